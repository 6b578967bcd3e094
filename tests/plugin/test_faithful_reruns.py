"""Verdicts that rest on re-runs: the re-run rebuilds the call, and eager's own spread is eager's.

Each test failed on the plugin before the snapshot and spread rules it checks.
"""

from __future__ import annotations

TRAIN_STEP = """
import pytest, torch
from torch import nn

def train_step(model, optimizer, x, y):
    optimizer.zero_grad()
    loss = nn.functional.mse_loss(model(x), y)
    loss.backward()
    optimizer.step()
    return loss.detach()

@pytest.mark.compile_parity
def test_first_step(compile_parity):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 4))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    compile_parity(train_step, model, optimizer, torch.randn(8, 8), torch.randn(8, 4))
"""


def test_a_first_optimizer_step_is_re_run_from_before_its_momentum_buffers(pytester):
    # The README's training example failed on --hypothesis-seed=1: the re-run started from the
    # momentum buffers eager's first step had created ("two eager runs differ by up to 0.84").
    pytester.makepyfile(TRAIN_STEP)
    assert pytester.runpytest("--compile-backend=aot_eager").ret == 0
    result = pytester.runpytest("--compile-backend=planted:corrupt_gradient")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*parameter '0.weight': values are not close",
            "*Judged against a float64 reference*",
        ]
    )
    result.stdout.no_fnmatch_line("*does not reproduce*")


JITTER = """
import numpy as np
import pytest, torch

@torch.library.custom_op("tc_spread_test::jitter", mutates_args=())
def jitter(x: torch.Tensor) -> torch.Tensor:
    # Nondeterministic, as an atomic accumulation is: each element gains 0 or 2**-12 per run.
    coins = np.random.default_rng().integers(0, 2, size=tuple(x.shape))
    return x + torch.from_numpy(coins).to(x.dtype) * 2.0**-12

@jitter.register_fake
def _(x):
    return torch.empty_like(x)

def f(x):
    return jitter(x * 2)

@pytest.mark.compile_parity
def test_jitter(compile_parity):
    compile_parity(f, torch.arange(64, dtype=torch.float32) / 7)
"""


def test_eager_nondeterminism_is_judged_by_eager_spread_and_blames_no_stage(pytester):
    pytester.makepyfile(JITTER)
    result = pytester.runpytest("--compile-backend=aot_eager", "-rA")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [
            "*output: eager is nondeterministic here: 3 eager runs from one snapshot differ "
            "by up to 0.0002441*compiled is within that run-to-run spread",
        ]
    )
    result = pytester.runpytest("--compile-backend=planted:corrupt_output")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        ["*Judged against eager's run-to-run spread: eager is nondeterministic here*"]
    )
    # The planted error is in every stage's replay only under the planted backend.
    result.stdout.fnmatch_lines(["*stage: Dynamo OK, AOTAutograd OK, decompositions OK -> *"])
