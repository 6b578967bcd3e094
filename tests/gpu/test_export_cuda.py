"""The example MLP and Conv+BN through AOTInductor on CUDA: packages compiled with Triton kernels,
loaded onto the GPU the inputs are on, their weights and buffers bound in place. Skipped without
a GPU.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from pytest_torchcompile import _compat

pytestmark = pytest.mark.skipif(
    not torch.cuda.is_available(), reason="needs a CUDA device (run scripts/gpu_suite.py on one)"
)

EXAMPLES = str(Path(__file__).resolve().parents[2] / "examples")


@pytest.fixture(scope="module")
def loader_crash(tmp_path_factory: pytest.TempPathFactory) -> str | None:
    """How torch's AOTInductor loader dies on this machine, without the plugin, or None.

    torch 2.11 (cu130) on the GPU machine segfaults loading any package, CPU or CUDA.
    """
    x = torch.randn(2, 4, device="cuda")
    program = torch.export.export(torch.nn.Linear(4, 3).cuda(), (x,))
    path = str(tmp_path_factory.mktemp("probe") / "linear.pt2")
    return _compat.aoti_load_crash(_compat.aoti_package(program, path, {}))


@pytest.fixture
def aoti_loads(loader_crash: str | None) -> None:
    if loader_crash is not None:
        pytest.skip(f"torch {torch.__version__}'s AOTInductor loader crashes here ({loader_crash})")


MODELS = f"""
import sys, pytest, torch
sys.path.insert(0, {EXAMPLES!r})
from models import MLP, ConvBN

@pytest.mark.compile_parity(devices=["cuda"])
def test_mlp_train(compile_parity, device):
    torch.manual_seed(0)
    compile_parity(MLP().to(device).train(), torch.randn(16, 32, device=device))

@pytest.mark.compile_parity(devices=["cuda"])
def test_mlp_inference(compile_parity, device):
    torch.manual_seed(0)
    with torch.no_grad():
        compile_parity(MLP().to(device).eval(), torch.randn(4, 32, device=device))

@pytest.mark.compile_parity(devices=["cuda"])
def test_conv_bn_train(compile_parity, device):
    torch.manual_seed(0)
    compile_parity(ConvBN().to(device).train(), torch.randn(4, 3, 8, 8, device=device))

@pytest.mark.compile_parity(devices=["cuda"])
def test_conv_bn_eval(compile_parity, device):
    torch.manual_seed(0)
    with torch.no_grad():
        compile_parity(ConvBN().to(device).eval(), torch.randn(2, 3, 8, 8, device=device))
"""


def test_the_example_models_pass_through_aot_inductor_on_cuda(pytester, aoti_loads):
    pytester.makepyfile(MODELS)
    result = pytester.runpytest("--compile-backend=aot_inductor", "--compile-bisect=off", "-v")
    result.assert_outcomes(passed=4)
    result.stdout.fnmatch_lines(["*test_mlp_train?cuda*PASSED*"])


def test_a_planted_aot_inductor_bug_is_caught_on_cuda(pytester, aoti_loads):
    pytester.makepyfile(
        """
        import pytest, torch
        import planted

        @pytest.mark.compile_parity(devices=["cuda"])
        def test_two_batches(compile_parity, device):
            weight = torch.randn(8, 3, device=device)
            with planted.aoti_wrong_for_large_batches():
                for batch in (2, 8):
                    compile_parity(torch.matmul, torch.randn(batch, 8, device=device), weight)
        """
    )
    result = pytester.runpytest("--compile-backend=aot_inductor", "--compile-bisect=off")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*ParityError*", "*input 0: float32[[]8, 8]*cuda:0*"])


def test_a_crashing_loader_is_an_environment_fault_not_the_sessions_end(pytester, loader_crash):
    if loader_crash is None:
        pytest.skip("AOTInductor's loader works here: nothing to report")
    pytester.makepyfile(
        """
        import pytest, torch

        @pytest.mark.compile_parity(devices=["cuda"])
        def test_linear(compile_parity, device):
            compile_parity(torch.nn.Linear(4, 3).to(device), torch.randn(2, 4, device=device))
        """
    )
    result = pytester.runpytest("--compile-backend=aot_inductor", "--compile-bisect=off")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        ["*EnvironmentFault*torch's runtime on this machine*", "*crashed (signal SIG*"]
    )
