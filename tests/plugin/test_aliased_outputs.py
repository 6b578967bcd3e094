"""Values that are one object on one side and two on the other: each place is compared by value.

Whether two of a call's values are one tensor object is no numeric divergence: a compiler may
return one object for two equal outputs (Inductor does, for a torchmetrics `MetricCollection`
caching `{"output1": x, "output2": x}`), and a program's `is` rarely looks. Each key is compared
by its value, so a present key is never reported missing, and a wrong value still fails.
"""

from __future__ import annotations

import pytest

PROGRAM = """
import pytest, torch

class Cached(torch.nn.Module):
    '''Caches two equal tensors: distinct objects in eager (a view each time).'''
    def forward(self, x):
        y = x * 2
        self.cache = {"a": y.squeeze(0), "b": y.squeeze(0)}
        return y

class SharedInEager(torch.nn.Module):
    '''Caches one object twice in eager; compiled, two equal tensors.'''
    def forward(self, x):
        y = x * 3
        self.cache = {"a": y, "b": y.clone() if torch.compiler.is_compiling() else y}
        return y

@pytest.mark.compile_parity
@pytest.mark.parametrize("model", [Cached, SharedInEager])
def test_cache(compile_parity, model):
    compile_parity(model(), torch.randn(1, 4))
"""


@pytest.mark.parametrize("backend", ["aot_eager", "planted:one_object_for_equal_outputs"])
def test_a_key_holding_the_same_tensor_as_another_on_one_side_is_compared_by_value(
    pytester, backend
):
    pytester.makepyfile(PROGRAM)
    pytester.runpytest(f"--compile-backend={backend}").assert_outcomes(passed=2)


def test_a_wrong_value_of_one_of_two_equal_keys_still_fails(pytester):
    pytester.makepyfile(PROGRAM)
    result = pytester.runpytest("--compile-backend=planted:corrupt_repeated_output")
    result.assert_outcomes(failed=2)
    result.stdout.re_match_lines(
        [r".*disagree at 1 leaf of 5 compared", r".*attribute cache\['b'\]: values are not close"]
    )
    result.stdout.no_fnmatch_line("*missing from*")
