"""Real torch.compile bugs the zoo found (issue 10): verdicts the plugin must keep giving.

The zoo's property tests exclude each trigger (naming the bug), so that they pass on a correct
compiler. Here the trigger is checked on its own: first through a plain ``torch.compile``; where
this torch no longer has the bug, the test skips and says which exclusion can go. Where it still
has it, the plugin must fail the trigger with the right message: a correct verdict that no
tolerance or fallback rule may ever bless.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch

# The zoo's training step on an empty batch: eager's loss is nan, the compile crashes.
EMPTY_BATCH = """
def step(x, y):
    return torch.nn.functional.mse_loss(x, y)

def inputs():
    return torch.ones(0, 4, requires_grad=True), torch.ones(0, 4)
"""

# The zoo's moving average on 0-d float64 tensors: the compiled run loses the add_ (a bare
# `a.add_(1)` loses its update too): Dynamo restarts its analysis after the tensorify pass
# (torch/fx/passes/_tensorify_python_scalars.py), wraps the input as a float, and drops the
# in-place op from the new graph. float32, int64 and shape (1,) are right.
SCALAR_FLOAT64_UPDATE = """
def step(a, v):
    a.mul_(0.9).add_(v, alpha=0.1)
    return a

def inputs():
    return torch.tensor(-0.5, dtype=torch.float64), torch.tensor(3.0, dtype=torch.float64)
"""


def _trigger(source: str) -> dict[str, Any]:
    namespace: dict[str, Any] = {"torch": torch}
    exec(source, namespace)
    return namespace


def _run_plugin(pytester: pytest.Pytester, source: str) -> pytest.RunResult:
    pytester.makepyfile(
        "import pytest, torch\n"
        + source
        + "\n@pytest.mark.compile_parity\n"
        + "def test_it(compile_parity):\n"
        + "    compile_parity(step, *inputs())\n"
    )
    return pytester.runpytest("--compile-backend=aot_eager")


# AOTAutograd traces the backward under anomaly mode, which warns as the decomposition raises.
@pytest.mark.filterwarnings("ignore:Error detected in MseLossBackward0:UserWarning")
def test_an_empty_batch_that_crashes_the_compile_fails(pytester):
    # mse_loss's backward decomposition divides by numel (torch/_decomp/decompositions.py,
    # mse_loss_backward), so the compile raises ZeroDivisionError where eager returns nan.
    trigger = _trigger(EMPTY_BATCH)
    try:
        torch.compile(trigger["step"], backend="aot_eager")(*trigger["inputs"]()).backward()
    except torch._dynamo.exc.BackendCompilerFailed:
        pass
    else:
        pytest.skip(
            f"torch {torch.__version__} compiles mse_loss on an empty batch: the empty-batch "
            "bug is fixed; let benchmarks/zoo/suites/test_zoo_train_step.py draw batch 0 again"
        )
    finally:
        torch._dynamo.reset()
    result = _run_plugin(pytester, EMPTY_BATCH)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*ParityError*",
            "*exception: eager returned normally, compiled raised ZeroDivisionError: float "
            "division by zero (inside torch.compile's BackendCompilerFailed)",
            "*stage: Dynamo OK -> AOTAutograd diverges*",
        ]
    )


def test_a_lost_update_of_a_0d_float64_input_fails(pytester):
    trigger = _trigger(SCALAR_FLOAT64_UPDATE)
    eager, compiled = trigger["inputs"](), trigger["inputs"]()
    trigger["step"](*eager)
    torch.compile(trigger["step"], backend="aot_eager")(*compiled)
    torch._dynamo.reset()
    if torch.equal(eager[0], compiled[0]):
        pytest.skip(
            f"torch {torch.__version__} keeps in-place updates of 0-d float64 inputs: the bug "
            "is fixed; let benchmarks/zoo/suites/test_zoo_ema_update.py draw them again"
        )
    result = _run_plugin(pytester, SCALAR_FLOAT64_UPDATE)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*ParityError*",
            "*input 0 after the call: values are not close*",
            "*eager -0.15, compiled -0.45*",
            "*stage: Dynamo OK -> AOTAutograd diverges*",
        ]
    )
