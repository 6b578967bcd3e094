"""Near ties: which of two values within rounding of each other a topk or argmin takes first is
rounding, and a compiler that rounds them otherwise returns other indices (pytorch-metric-
learning's HDC miner under Inductor keeps the same pairs in another order). Such an index is
excused where eager, taking near-equal values the other way round, returns it; any other index
still fails."""

from __future__ import annotations

import pytest

NEAREST = """
import pytest, torch

def pick(x):
    return x.argmin(-1), x.topk(2, dim=-1).indices

@pytest.mark.compile_parity
def test_it(compile_parity):
    one = torch.tensor(1.0)
    up = torch.nextafter(one, torch.tensor(2.0)).item()  # one unit above 1.0
    # Each row: a near tie at positions 0 and 1 (the smaller second), far from the rest.
    x = torch.tensor([[up, 1.0, 4.0, 7.0], [up, 1.0, 9.0, 3.0], [5.0, 2.0, 6.0, 8.0]])
    compile_parity(pick, x)
"""


def test_an_index_taken_from_a_near_tie_in_the_other_order_is_excused(pytester):
    pytester.makepyfile(NEAREST)
    result = pytester.runpytest("--compile-backend=planted:near_values_rounded_otherwise", "-rA")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*excused as near ties*returns compiled's value*"])


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_near_ties_pass_plainly_on_real_backends(pytester, backend):
    pytester.makepyfile(NEAREST)
    result = pytester.runpytest(f"--compile-backend={backend}")
    result.assert_outcomes(passed=1)


def test_an_index_no_order_of_near_ties_returns_still_fails(pytester):
    pytester.makepyfile(NEAREST)
    planted = "--compile-backend=planted:near_values_rounded_otherwise_one_index_off"
    result = pytester.runpytest(planted)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*no such order returns compiled's value: not a near tie*"])


TWO_PAIRS = """
import pytest, torch

def rank(x):
    return x.topk(6, dim=-1).indices, x.topk(4, dim=-1, largest=False).indices

@pytest.mark.compile_parity
def test_it(compile_parity):
    far = 1.0 + 5 * torch.finfo(torch.float32).eps  # five units above 1.0: near, not equal
    # Two pairs of equal values (the distances of (i, j) and (j, i)), the pairs a few units
    # apart: one group of four near-equal values, which the compiler swaps two by two.
    compile_parity(rank, torch.tensor([[1.0, 1.0, far, far, 7.0, 0.5]]))
"""


def test_a_group_of_two_near_pairs_swapped_two_by_two_is_excused(pytester):
    # Reversing the group of four returns none of compiled's indices; swapping its pairs does.
    pytester.makepyfile(TWO_PAIRS)
    result = pytester.runpytest("--compile-backend=planted:near_values_rounded_otherwise", "-rA")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*excused as near ties*in another order returns compiled's*"])
    planted = "--compile-backend=planted:near_values_rounded_otherwise_one_index_off"
    pytester.runpytest(planted).assert_outcomes(failed=1)
