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


EAGER_UNDER_THE_USERS_SWITCHES = """
import pytest
import torch


def probabilities(p):
    return torch.distributions.Categorical(probs=p).probs


@pytest.mark.compile_parity
@pytest.mark.parametrize("check", ["first in the process", "second"])
def test_eager_validates_where_compiled_does_not(compile_parity, check):
    torch.distributions.Distribution.set_default_validate_args(True)
    compile_parity(probabilities, torch.tensor([[0.5, -0.5]]))
"""


def test_eager_runs_under_the_switches_the_user_set_not_those_torch_compile_set(pytester):
    """The compiled side runs first, and the first torch.compile in a process turns argument
    validation off: eager ran with it off too, so an invalid batch eager rejects and compiled
    takes was judged "raised alike". Eager runs under the user's switches, compiled under
    torch.compile's: the difference is reported, on every check of the process alike."""
    pytester.makepyfile(EAGER_UNDER_THE_USERS_SWITCHES)
    result = pytester.runpytest_subprocess("--compile-backend=aot_eager", "-p", "no:cacheprovider")
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(
        [
            "*exception: eager raised ValueError: Expected parameter probs*",
            "*compiled returned normally",
        ]
    )
    result.stdout.fnmatch_lines(["*stage: Dynamo diverges (the first stage)*"])
