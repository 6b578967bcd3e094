"""After a parity failure: the stage that diverged, a standalone repro.py, the compiler's artifacts."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import pytest_torchcompile
from tests.plugin.test_hypothesis import HYPOTHESIS_SUMMARY

SIN = """
import pytest, torch
import planted

@pytest.fixture(autouse=True)
def planted_bug():
    with {patch}:
        yield

@pytest.mark.compile_parity
def test_sin(compile_parity):
    compile_parity(lambda t: torch.sin(t) * 2, torch.randn(8, requires_grad=True))
"""

ALL_STAGES = "stage: Dynamo OK, AOTAutograd OK, decompositions OK -> "


@pytest.mark.parametrize(
    ("patch", "backend", "stage"),
    [
        (
            "planted.dynamo_traces_sin_as_cos()",
            "aot_eager_decomp_partition",
            "stage: Dynamo diverges (the first stage)",
        ),
        (
            "planted.aot_autograd_scales_backward()",
            "aot_eager_decomp_partition",
            "stage: Dynamo OK -> AOTAutograd diverges",
        ),
        (
            "planted.inductor_decomposes_sin_as_cos()",
            "aot_eager_decomp_partition",
            "stage: Dynamo OK, AOTAutograd OK -> decompositions diverges",
        ),
        (
            "planted.inductor_decomposes_sin_as_cos()",
            "planted:corrupt_gradient",  # the patch reaches no stage before a custom backend's own
            "stage: Dynamo OK, AOTAutograd OK -> decompositions diverges",
        ),
        (
            "contextlib.nullcontext()",
            "planted:corrupt_output",
            ALL_STAGES + "planted:corrupt_output diverges",
        ),
        (
            "contextlib.nullcontext()",
            "planted:wrong_decomposition",
            ALL_STAGES + "planted:wrong_decomposition diverges",
        ),
        (  # an exception on one side only is a divergence too
            "contextlib.nullcontext()",
            "planted:raise_when_compiled",
            ALL_STAGES + "planted:raise_when_compiled diverges",
        ),
    ],
    ids=[
        "dynamo",
        "aot_autograd",
        "decomposition",
        "decomposition-custom",
        "final",
        "final-aot",
        "final-raises",
    ],
)
def test_a_wrong_compile_is_attributed_to_its_stage(pytester, patch, backend, stage):
    pytester.makepyfile(
        SIN.format(patch=patch).replace("import planted", "import contextlib, planted")
    )
    result = pytester.runpytest(f"--compile-backend={backend}", "--compile-artifacts=out")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*ParityError*",
            f"E * {stage}",
            "E * repro: python *repro.py*",
            "*torch.compile*",
            f"    {stage}",
        ]
    )


def test_the_stage_bisect_stops_at_a_builtin_backend_and_can_be_turned_off(pytester):
    pytester.makepyfile(SIN.format(patch="planted.aot_autograd_scales_backward()"))
    result = pytester.runpytest("--compile-backend=aot_eager", "--compile-artifacts=out")
    result.stdout.fnmatch_lines(["E * stage: Dynamo OK -> AOTAutograd diverges"])
    result = pytester.runpytest(
        "--compile-backend=aot_eager", "--compile-artifacts=out", "--compile-bisect=off"
    )
    result.assert_outcomes(failed=1)
    assert "stage: " not in result.stdout.str()
    result.stdout.fnmatch_lines(["E * repro: python *repro.py*", "E * triage took *s"])
    assert (
        pytester.path
        / "out"
        / "test_the_stage_bisect_stops_at_a_builtin_backend_and_can_be_turned_off.py__test_sin"
        / "repro.py"
    ).exists()


def test_a_passing_suite_is_not_triaged(pytester):
    pytester.makepyfile(
        SIN.format(patch="contextlib.nullcontext()").replace("import planted", "import contextlib")
    )
    result = pytester.runpytest("--compile-backend=aot_eager", "--compile-artifacts=out")
    result.assert_outcomes(passed=1)
    assert not (pytester.path / "out").exists()


SEQUENCE = """
import pytest, torch

class Scaled(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(4, 4)

    def forward(self, x):
        return torch.tanh(self.linear(x)) * 3

@pytest.mark.compile_parity
def test_module_calls(compile_parity):
    torch.manual_seed(0)
    model = Scaled()
    base = torch.randn(6, 8)
    compile_parity(model, base[:, ::2])  # a strided view: saved with its strides
    compile_parity(model, (base + 1)[:, ::2])  # same shapes and strides, new values: stale

@pytest.mark.compile_parity
def test_closure_calls(compile_parity):
    scale = 0.5
    x = torch.randn(3, 5)
    softmax = lambda t: torch.softmax(t * scale, -1)
    compile_parity(softmax, x)
    compile_parity(softmax, x)
    compile_parity(softmax, x * 2)
"""


def _plugin_only_path(tmp_path: Path) -> str:
    """A PYTHONPATH holding the plugin and nothing else of this checkout (no tests/, no planted)."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "pytest_torchcompile").symlink_to(Path(pytest_torchcompile.__file__).parent)
    return str(site)


def run_copied(
    repro_dir: Path, tmp_path: Path, *, backend: str | None = None
) -> subprocess.CompletedProcess[str]:
    """Copy a repro directory to an empty one and run its repro.py with only torch and the plugin."""
    target = tmp_path / f"copy-{len(list(tmp_path.iterdir()))}"
    shutil.copytree(repro_dir, target)
    if backend is not None:
        script = target / "repro.py"
        text = script.read_text()
        start = text.index("'backend': ")
        end = text.index(",", start)
        script.write_text(text[:start] + f"'backend': {backend!r}" + text[end:])
    env = {**os.environ, "PYTHONPATH": _plugin_only_path(target)}
    return subprocess.run(
        [sys.executable, "repro.py"],
        cwd=target,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_the_repro_replays_the_whole_sequence_from_an_empty_directory(pytester, tmp_path):
    pytester.makepyfile(SEQUENCE)
    result = pytester.runpytest(
        "--compile-backend=planted:stale_cache",
        "--compile-artifacts=out",
        "--compile-report=r.json",
    )
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(
        [
            "*ParityError*",
            f"E * {ALL_STAGES}planted:stale_cache diverges",
            "E * repro: python *test_module_calls*repro.py  (replays 2 checker call(s))",
            "*torch.compile*",
            "parity failures, with the stage that diverged and a standalone repro (2):",
        ]
    )
    result.stdout.fnmatch_lines(
        ["E * repro: python *test_closure_calls*repro.py  (replays 3 checker call(s))"]
    )
    tests = json.loads((pytester.path / "r.json").read_text())["tests"]
    for name in ("test_module_calls", "test_closure_calls"):
        entry = tests[
            f"test_the_repro_replays_the_whole_sequence_from_an_empty_directory.py::{name}"
        ]
        assert entry["stage"] == f"{ALL_STAGES}planted:stale_cache diverges"
        repro = Path(entry["repro"]).parent
        done = run_copied(repro, tmp_path)
        assert done.returncode == 1, done.stdout + done.stderr
        assert "call 2 of" in done.stdout or "call 3 of" in done.stdout
        assert "the bug is present" in done.stdout
        if name == "test_module_calls":  # without the bug the same repro passes
            fixed = run_copied(repro, tmp_path, backend="aot_eager")
            assert fixed.returncode == 0, fixed.stdout + fixed.stderr
            assert "the bug is gone" in fixed.stdout
        artifacts = Path(entry["artifacts"])
        assert (artifacts / "trace" / "dedicated_log_torch_trace_rank_0.log").stat().st_size > 0
        graphs = sorted(artifacts.glob("*_dynamo_output_graph.py"))
        assert graphs and "class GraphModule" in graphs[0].read_text()
    copied = sorted(
        p.name for p in (Path(tests[next(iter(tests))]["repro"]).parent / "source").iterdir()
    )
    assert "planted.py" in copied  # the custom backend's module travels with the repro


def test_a_call_under_autocast_is_replayed_under_it(pytester, tmp_path):
    # float32 inputs, bfloat16 matmul under autocast: the planted kernel is wrong only there, so
    # a replay outside autocast would agree and find no stage.
    pytester.makepyfile(
        """
        import pytest, torch

        @pytest.mark.compile_parity(backward=False)
        def test_autocast(compile_parity):
            with torch.autocast("cpu", dtype=torch.bfloat16):
                compile_parity(lambda z: (z @ z.T).sigmoid(), torch.randn(8, 4))
        """
    )
    result = pytester.runpytest(
        "--compile-backend=planted:wrong_for_half_outputs", "--compile-report=r.json"
    )
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([f"E * {ALL_STAGES}planted:wrong_for_half_outputs diverges"])
    [entry] = json.loads((pytester.path / "r.json").read_text())["tests"].values()
    repro = Path(entry["repro"])
    assert "under autocast('cpu', dtype=torch.bfloat16)" in repro.read_text()
    done = run_copied(repro.parent, tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "the bug is present" in done.stdout


def test_the_saved_inputs_keep_strides_offsets_aliasing_and_requires_grad(pytester):
    pytester.makepyfile(
        """
        import pytest, torch

        @pytest.mark.compile_parity
        def test_views(compile_parity):
            base = torch.randn(4, 6)
            leaf = torch.randn(3, requires_grad=True)
            compile_parity(lambda a, b, c: a.sum() + b.sum() + c.sum(), base[1:, ::2], base.t(), leaf)
        """
    )
    pytester.runpytest("--compile-backend=planted:corrupt_output", "--compile-artifacts=out")
    import torch

    saved = torch.load(next((pytester.path / "out").glob("*/calls.pt")), weights_only=False)
    a, b, c = saved["calls"][0]["args"]
    assert (a.stride(), a.storage_offset(), b.stride(), b.storage_offset()) == (
        (6, 2),
        6,
        (1, 6),
        0,
    )
    assert a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()  # still one storage
    assert c.requires_grad and c.is_leaf and not a.requires_grad


HYPOTHESIS = """
import pytest, torch
from hypothesis import given, strategies as st

@pytest.mark.compile_parity
@given(value=st.floats(-4, 4, allow_nan=False))
def test_values(compile_parity, value):
    compile_parity(lambda t: t * 2, torch.full((3,), value))
"""


def test_a_failure_that_needs_earlier_examples_replays_them(hypothesis_pytester, tmp_path):
    hypothesis_pytester.makepyfile(HYPOTHESIS)
    result = hypothesis_pytester.runpytest(
        "--compile-backend=planted:stale_cache",
        "--compile-artifacts=out",
        "--hypothesis-profile=parity-ci",
    )
    result.assert_outcomes(failed=1)
    text = result.stdout.str()
    assert f"{ALL_STAGES}planted:stale_cache diverges" in text
    repro = next((hypothesis_pytester.path / "out").glob("*/repro.py")).parent
    calls = int(text.split("(replays ")[1].split(" ")[0])
    assert calls > 1  # the failing example alone compiles afresh and passes
    # the replay ends at the example the message shows, not at one that failed while shrinking
    # Hypothesis 6.155 names the example "Falsifying example:", 6.170 "Failing test case:"
    shown = float(re.search(rf"(?:{HYPOTHESIS_SUMMARY}).*?value=([^,\s]+),", text, re.S)[1])
    saved = torch.load(repro / "calls.pt", weights_only=False)
    assert saved["calls"][-1]["args"][0][0].item() == shown
    done = run_copied(repro, tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr


def test_a_callable_the_repro_cannot_rebuild_is_named(pytester, tmp_path):
    pytester.makepyfile(
        """
        import pytest, torch

        @pytest.mark.compile_parity
        def test_local_class(compile_parity):
            class Local(torch.nn.Module):
                def forward(self, x):
                    return x.sin()

            compile_parity(Local(), torch.randn(3))
        """
    )
    result = pytester.runpytest(
        "--compile-backend=planted:corrupt_output", "--compile-artifacts=out"
    )
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            f"E * {ALL_STAGES}planted:corrupt_output diverges",
            "E * repro: the module class test_local_class.<locals>.Local is defined inside a "
            "function, so the repro cannot rebuild it; define it at module level*",
        ]
    )
    done = run_copied(next((pytester.path / "out").glob("*/repro.py")).parent, tmp_path)
    assert done.returncode == 2 and "could not be rebuilt" in done.stdout


REPEATED = """
import torch

class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(4, 4)

    def forward(self, x):
        return self.linear(x).sin()

def test_first():
    Block()(torch.randn(3, 4))

def test_second():
    Block()(torch.ones(3, 4))

def test_another_signature():
    Block()(torch.ones(5, 4))
"""


def test_zero_change_mode_triages_one_divergence_once_per_session(pytester):
    # The same class, structure, input signature and differing leaf: one bisect, reused with
    # its repro and artifacts (and said so); another input signature is triaged on its own.
    pytester.makepyfile(test_repeated=REPEATED)
    result = pytester.runpytest(
        "--compile-parity=all",
        "--compile-parity-every-call",
        "--compile-backend=planted:corrupt_output",
        "-rN",  # on CI (CI set) pytest's short summary repeats each whole failure message
    )
    result.assert_outcomes(failed=3)
    output = result.stdout.str()
    assert output.count("triage took") == 2
    result.stdout.fnmatch_lines(
        ["*triage: reused from test_repeated.py::test_first, which diverged the same way*"]
    )
    assert (
        output.count(
            "stage: Dynamo OK, AOTAutograd OK, decompositions OK -> planted:corrupt_output diverges"
        )
        >= 3
    )


def test_once_the_session_s_triage_budget_is_spent_a_failure_gets_its_repro_alone(pytester):
    # A suite failing everywhere (a wrong backend) would otherwise replay and recompile every
    # failing test; past the budget, a failure names its repro and why it has no stage.
    pytester.makepyfile(test_repeated=REPEATED)
    flags = [
        *("--compile-parity=all", "--compile-parity-every-call", "-rN"),
        *("--compile-backend=planted:corrupt_output", "--compile-artifacts=out"),
        "test_repeated.py",  # not the copies of it that each repro keeps under out/
    ]
    result = pytester.runpytest(*flags, "--compile-triage-budget=0.001")
    result.assert_outcomes(failed=3)
    output = result.stdout.str()
    spent = (
        "*triage: no stage bisect and no artifacts: this session's triage took *s, its "
        "--compile-triage-budget of 0.001s; run this test alone, or raise the budget (0: none), "
        "for them"
    )
    # test_first is triaged, test_second reuses it, test_another_signature is past the budget
    result.stdout.fnmatch_lines(["*repro: python *test_another_signature/repro.py*", spent])
    assert output.count("--compile-triage-budget of") == 1
    out = pytester.path / "out"
    assert [path.parent.name for path in out.glob("*/artifacts")] == [
        "test_repeated.py__test_first"
    ]
    assert (out / "test_repeated.py__test_another_signature" / "repro.py").exists()
    result = pytester.runpytest(*flags, "--compile-triage-budget=0")
    result.assert_outcomes(failed=3)
    assert "--compile-triage-budget of" not in result.stdout.str()
    assert len(list(out.glob("*/artifacts"))) == 2
