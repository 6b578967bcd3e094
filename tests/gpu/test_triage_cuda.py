"""Triage on CUDA: the stage line, a repro that reloads its inputs on the GPU, Triton code among
the artifacts. Skipped without a GPU (run scripts/gpu_suite.py on one)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from tests.plugin.test_triage import ALL_STAGES, run_copied

pytestmark = pytest.mark.skipif(
    not torch.cuda.is_available(), reason="needs a CUDA device (run scripts/gpu_suite.py on one)"
)

ON_CUDA = """
import pytest, torch
import planted

@pytest.fixture(autouse=True)
def planted_bug():
    with {patch}:
        yield

@pytest.mark.compile_parity(devices=["cuda:0"])
def test_gelu(compile_parity, device):
    x = torch.randn(64, 64, device=device, requires_grad=True)
    compile_parity(torch.nn.functional.gelu, x[:, ::2])
"""


def test_a_cuda_only_miscompile_gets_a_repro_that_fails_on_the_gpu(pytester, tmp_path):
    pytester.makepyfile(
        ON_CUDA.format(patch="contextlib.nullcontext()").replace(
            "import planted", "import contextlib"
        )
    )
    result = pytester.runpytest(
        "--compile-backend=planted:corrupt_output_on_cuda", "--compile-artifacts=out"
    )
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([f"E * {ALL_STAGES}planted:corrupt_output_on_cuda diverges"])
    repro = next((pytester.path / "out").glob("*/repro.py")).parent
    saved = torch.load(repro / "calls.pt", weights_only=False)
    (x,) = saved["calls"][0]["args"]
    assert (x.device.type, x.stride(), x.requires_grad) == ("cuda", (64, 2), True)
    done = run_copied(repro, tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr


def test_an_aot_autograd_bug_under_inductor_on_cuda_keeps_the_triton_code(pytester):
    pytester.makepyfile(ON_CUDA.format(patch="planted.aot_autograd_scales_backward()"))
    result = pytester.runpytest("--compile-backend=inductor", "--compile-artifacts=out")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["E * stage: Dynamo OK -> AOTAutograd diverges"])
    artifacts = next((pytester.path / "out").glob("*/artifacts"))
    code = "".join(p.read_text() for p in artifacts.glob("*_inductor_output_code.py"))
    assert "triton" in code
    assert sorted(Path(artifacts).glob("*_aot_backward_graph.py"))
