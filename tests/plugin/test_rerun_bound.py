"""Re-runs bounded (issue 42): a leaf whose rounding-noise runs would cost more than the call's
bound is judged on a sample of its rows, and says so; where the rows do not re-run alone as they
ran in the call, the whole runs judge it."""

from __future__ import annotations

import pytest
import torch

from pytest_torchcompile.judging import samples

# A 10M-element output so ill-conditioned that summing in another order moves it by 2% of its
# values: each row (dim=1; each column, dim=0) normalised by a standard deviation 1e-4 of its
# mean.
ILL_CONDITIONED = """
import pytest, torch

def settle_and_normalise(x):
    for _ in range(24):  # element-wise: each row's output depends on that row alone
        x = x + 0.01 * torch.tanh(x)
    centred = x - x.mean(dim={dim}, keepdim=True)
    return centred / centred.pow(2).mean(dim={dim}, keepdim=True).sqrt()

@pytest.mark.compile_parity
def test_it(compile_parity):
    torch.manual_seed(0)
    x = (100 * torch.rand({offsets}) + 50) + 1e-2 * torch.randn({rows}, {columns})
    compile_parity(settle_and_normalise, x)
"""


def test_an_ill_conditioned_10m_element_output_is_judged_on_a_sample_of_its_rows(pytester):
    # Summing in one lane is farther from float64 than eager at 6% of the elements, by up to 9x
    # eager's worst error: only eager's rounding noise judges it, whose full runs would cost
    # about 17x the call here. The rows re-run alone reproduce eager's rows bit for bit.
    pytester.makepyfile(ILL_CONDITIONED.format(dim=1, offsets="10000, 1", rows=10000, columns=1000))
    result = pytester.runpytest("--compile-backend=planted:sums_in_one_lane", "-rA")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [
            "*excused by eager's rounding noise*judged on a sample of * of its 10000 rows*"
            "the call re-run on those rows alone*"
        ]
    )


@pytest.fixture
def tight_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    """A bound every call passes, so that small calls take the sampled path."""
    monkeypatch.setattr(samples, "RERUN_FLOOR_S", 0.0)
    monkeypatch.setattr(samples, "RERUN_RATIO", 0.0)
    monkeypatch.setattr(samples, "MIN_ROWS", 16)


def test_a_wrong_row_of_an_ill_conditioned_output_is_caught_on_the_sample(pytester, tight_bound):
    # The worst rows are always in the sample: the row the planted backend moves by 5 is.
    # (Rule 3 is an rms over the leaf: on all 1000 rows, one such row would be within 3x the
    # noise's rms; the small sample's rms is the stricter judge.)
    pytester.makepyfile(ILL_CONDITIONED.format(dim=1, offsets="1000, 1", rows=1000, columns=400))
    planted = "--compile-backend=planted:sums_in_one_lane_one_row_off"
    result = pytester.runpytest_inprocess(planted)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        ["*On a sample of the leaf's rows: judged on a sample of 16 of its 1000 rows*"]
    )


def test_rows_that_do_not_re_run_alone_alike_are_judged_whole(pytester, tight_bound):
    # Normalised over the batch: a row's output depends on every row, so the rows re-run alone
    # differ from eager's, and no sample stands for the leaf.
    pytester.makepyfile(ILL_CONDITIONED.format(dim=0, offsets="1, 40", rows=1000, columns=40))
    result = pytester.runpytest_inprocess("--compile-backend=planted:sums_in_one_lane", "-rA")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*excused by eager's rounding noise*"])
    result.stdout.no_fnmatch_line("*judged on a sample*")


def test_the_same_leaf_sampled_by_a_tight_bound_keeps_its_verdict(pytester, tight_bound):
    pytester.makepyfile(ILL_CONDITIONED.format(dim=1, offsets="1000, 1", rows=1000, columns=400))
    passed = pytester.runpytest_inprocess("--compile-backend=planted:sums_in_one_lane", "-rA")
    passed.assert_outcomes(passed=1)
    passed.stdout.fnmatch_lines(["*judged on a sample of 16 of its 1000 rows*"])


def test_a_bound_takes_every_row_where_the_full_runs_fit() -> None:
    bound = samples.Bound(eager_seconds=1.0)  # 3 s
    assert bound.rows(10_000, spent=0.0, plain_seconds=0.01) == 10_000  # 0.46 s of noise runs
    assert bound.rows(10_000, spent=2.0, plain_seconds=1.0) == 215  # 1 s left, 46.3 ms a row
    assert bound.rows(10_000, spent=5.0, plain_seconds=1.0) == samples.MIN_ROWS  # none left
    assert bound.rows(100, spent=5.0, plain_seconds=1.0) == 100  # too few rows to sample


def test_the_rows_chosen_hold_the_worst_and_no_row_within_the_allowance_as_worst() -> None:
    excess = torch.full((100, 3), -1.0)
    excess[[7, 42, 99], 1] = torch.tensor([0.5, 2.0, 1.0])
    rows, worst = samples.choose_rows(excess, count=10)
    assert worst == 3  # only three rows are past the allowance
    assert {7, 42, 99} <= set(rows.tolist()) and rows.numel() == 10
    assert rows.tolist() == sorted(rows.tolist())
    again, _ = samples.choose_rows(excess, count=10)
    assert torch.equal(rows, again)  # the same leaf, the same sample
