"""Backends export and aot_inductor: the deployment paths, checked with the same rules as
torch.compile, each with a planted bug the checker must catch, and an exporter's refusal reported
as a compile failure in the exporter's own words.

AOTInductor compiles C++ for every package (seconds each here): its tests are few, and skip the
stage bisect a failure would otherwise run.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.plugin.loader import skip_where_the_loader_crashes

EXAMPLES = str(Path(__file__).resolve().parents[2] / "examples")
NO_BISECT = "--compile-bisect=off"

PLANTED = """
import contextlib, pytest, torch
import planted

@pytest.fixture(autouse=True)
def planted_bug():
    with {patch}:
        yield

def layer(x, weight):
    return torch.tanh(x @ weight) * 2

@pytest.mark.compile_parity
def test_two_batches(compile_parity):
    torch.manual_seed(0)
    weight = torch.randn(8, 3)
    for batch in {batches}:  # each new batch size is exported again
        compile_parity(layer, torch.randn(batch, 8, requires_grad=True), weight)
"""


@pytest.mark.parametrize(
    ("backend", "patch", "leaf", "batches"),
    [
        ("export", "planted.export_wrong_for_large_batches()", "output", (2, 8)),
        ("export", "planted.export_scales_gradients()", "grad of input 0", (2, 8)),
        # one batch size: each package is a C++ compile
        ("aot_inductor", "planted.aoti_wrong_for_large_batches()", "output", (8,)),
    ],
)
def test_a_planted_bug_fails_where_the_clean_path_passes(pytester, backend, patch, leaf, batches):
    clean = PLANTED.format(patch="contextlib.nullcontext()", batches=batches)
    pytester.makepyfile(test_clean=clean, test_planted=PLANTED.format(patch=patch, batches=batches))
    bisect = backend == "export"  # torch.compile's stages, then the path; C++ for AOTInductor
    result = pytester.runpytest(f"--compile-backend={backend}", *([] if bisect else [NO_BISECT]))
    skip_where_the_loader_crashes(result.stdout.str())  # the GPU host's torch 2.11 loader
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*ParityError*",
            f"*{leaf}: values are not close*",
            "*input 0: float32[[]8, 8]*",  # the batch over the planted bug's limit
            *(["*decompositions OK -> torch.export diverges*"] if bisect else []),
            "FAILED test_planted.py::test_two_batches*",
        ]
    )


def test_a_new_input_signature_is_exported_again_and_counted_as_a_recompile(pytester):
    pytester.makepyfile(PLANTED.format(patch="contextlib.nullcontext()", batches=(2, 8)))
    result = pytester.runpytest("--compile-backend=export", "--compile-max-recompiles=0")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*RecompileLimitExceeded*1 recompile, over the budget max_recompiles=0*",
            "*layer [[]size[]]: exported again: input 0 shape was (2, 8), now (8, 8)*",
        ]
    )


MODELS = f"""
import sys, pytest, torch
sys.path.insert(0, {EXAMPLES!r})
from models import MLP, ConvBN

@pytest.mark.compile_parity
def test_mlp_train(compile_parity):
    torch.manual_seed(0)
    compile_parity(MLP().train(), torch.randn(16, 32))  # dropout: random draws compared

@pytest.mark.compile_parity
def test_conv_bn_train(compile_parity):
    torch.manual_seed(0)
    model = ConvBN().train()
    for _ in range({{calls}}):  # running statistics compared after each call
        compile_parity(model, torch.randn(4, 3, 8, 8))

@pytest.mark.compile_parity
def test_conv_bn_eval(compile_parity):
    torch.manual_seed(0)
    with torch.no_grad():
        compile_parity(ConvBN().eval(), torch.randn(2, 3, 8, 8))
"""


def test_the_example_models_pass_through_export(pytester):
    pytester.makepyfile(MODELS.format(calls=2))
    pytester.runpytest("--compile-backend=export").assert_outcomes(passed=3)


def test_the_example_models_pass_through_aot_inductor(pytester):
    pytester.makepyfile(MODELS.format(calls=1))
    result = pytester.runpytest("--compile-backend=aot_inductor", NO_BISECT, "-rA")
    skip_where_the_loader_crashes(result.stdout.str())
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(["*gradients and outputs' requires_grad not compared*"])


def test_aot_inductor_reading_a_counter_it_increments_as_a_constant_is_caught(pytester):
    """A real AOTInductor bug (torch 2.13, CPU): a 0-d or one-element buffer the program updates
    in place is read as the value it had when packaged, so BatchNorm's num_batches_tracked stays
    at 1 (benchmarks/aoti_scalar_buffer.py shows it without the plugin)."""
    pytester.makepyfile(MODELS.format(calls=2))
    result = pytester.runpytest("--compile-backend=aot_inductor", NO_BISECT, "-k", "conv_bn_train")
    skip_where_the_loader_crashes(result.stdout.str())
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        ["*ParityError*", "*buffer 'bn.num_batches_tracked'*", "*eager 2, compiled 1*"]
    )


REFUSED = """
import pytest, torch

def branchy(x):
    if x.sum() > 0:  # data-dependent control flow: torch.export cannot capture it
        return x * 2
    return x - 1

@pytest.mark.compile_parity
def test_branchy(compile_parity):
    compile_parity(branchy, torch.ones(3))
"""


@pytest.mark.parametrize("backend", ["export", "aot_inductor"])
def test_an_export_failure_is_a_compile_failure_in_the_exporters_words(pytester, backend):
    pytester.makepyfile(REFUSED)
    result = pytester.runpytest(f"--compile-backend={backend}", NO_BISECT)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*ExportFailure: torch.export could not export the program (backend="
            f"{backend}, from --compile-backend)*no parity was shown*",
            "*Could not guard on data-dependent expression*",
            "*if x.sum() > 0:*",
            f"*backend={backend} mode=default*",
        ]
    )
    failure = _failure_report(result.stdout.lines)
    assert not [line for line in failure if "ParityError" in line or "direct cause" in line]


def _failure_report(lines: list[str]) -> list[str]:
    """The lines pytest shows for the failure itself, before the captured output (where torch's
    own logging may print the exporter's traceback)."""
    start = next(i for i, line in enumerate(lines) if line.startswith("____"))
    end = next(i for i, line in enumerate(lines) if i > start and line.startswith("----"))
    return lines[start:end]


def test_a_packaging_failure_names_aot_inductor(pytester):
    pytester.makepyfile(
        """
        import pytest, torch, torch._inductor

        def refuse(*args, **kwargs):
            raise RuntimeError("planted: this package cannot be built")

        @pytest.mark.compile_parity
        def test_it(compile_parity, monkeypatch):
            monkeypatch.setattr(torch._inductor, "aoti_compile_and_package", refuse)
            compile_parity(torch.nn.Linear(3, 2), torch.ones(2, 3))
        """
    )
    result = pytester.runpytest("--compile-backend=aot_inductor", NO_BISECT)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*ExportFailure: AOTInductor packaging could not package the program*",
            "*RuntimeError: planted: this package cannot be built*",
        ]
    )


def test_an_error_eager_raises_alike_is_the_programs_not_the_exporters(pytester):
    pytester.makepyfile(
        """
        import pytest, torch

        def picky(x):
            if x.dim() != 2:
                raise ValueError("picky wants a matrix")
            return x * 2

        @pytest.mark.compile_parity
        def test_it(compile_parity):
            compile_parity(picky, torch.ones(3))
        """
    )
    result = pytester.runpytest("--compile-backend=export")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*ValueError: picky wants a matrix*", "*eager itself raised*"])
    result.stdout.no_fnmatch_line("*ExportFailure*")
