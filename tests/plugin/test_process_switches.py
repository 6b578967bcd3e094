"""What torch.compile switches for the whole process is put back after every check."""

from __future__ import annotations

SWITCHES = """
import warnings

import pytest
import torch


def switches():
    return (
        torch.distributions.Distribution._validate_args,
        torch.is_grad_enabled(),
        torch.get_default_dtype(),
        torch.are_deterministic_algorithms_enabled(),
        torch.is_deterministic_algorithms_warn_only_enabled(),
        list(warnings.filters),
    )


def sine(x):
    return torch.sin(x)


@pytest.mark.compile_parity
def test_the_first_compile_in_the_process(compile_parity):
    # GPyTorch's prior tests expect ValueError here; the first torch.compile in a process turns
    # distributions' argument validation off for good (torch/_dynamo/eval_frame.py).
    torch.distributions.Distribution.set_default_validate_args(True)
    before = switches()
    compile_parity(sine, torch.randn(3))
    assert switches() == before
    with pytest.raises(ValueError):
        torch.distributions.Normal(torch.tensor(0.0), torch.tensor(-1.0))
"""


def test_a_check_leaves_process_wide_switches_as_it_found_them(pytester):
    pytester.makepyfile(SWITCHES)
    # Its own process: the switch is flipped by the first compile of a process only.
    result = pytester.runpytest_subprocess("--compile-backend=aot_eager", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
