"""Each tolerance rule on its own: what it excuses, what it does not, and what it says."""

from __future__ import annotations

import torch

from pytest_torchcompile.judging import rules
from pytest_torchcompile.judging.closeness import scan_leaf

F32 = (1.3e-6, 1e-5)  # assert_close's float32 (rtol, atol)


def test_reproduces_within_the_noise_floor_and_says_how_a_re_run_differs() -> None:
    e = torch.tensor([1.0, 2.0, 3.0, 4.0])
    assert rules.reproduces(e.clone(), e, *F32) == ""
    assert rules.reproduces(e + 1e-9, e, *F32) == ""  # far below 128 ulps of the leaf's rms
    assert rules.reproduces(e + torch.tensor([0, 0, 0.5, 0]), e, *F32) == (
        "two eager runs differ at 1 element(s) by up to 0.5"
    )


def test_by_reference_excuses_what_eager_is_as_wrong_as_and_not_a_corrupted_element() -> None:
    r = torch.tensor([100.0, 200.0, 300.0, 400.0], dtype=torch.float64) / 3
    e = (r + 3e-5).float()  # eager 3e-5 from the exact answer
    c = (r - 6e-5).float()  # compiled twice as far: within 3x
    plain = scan_leaf(c, e, *F32)
    assert plain.mismatched
    judged = rules.by_reference(e, c, r, *F32, plain)
    assert judged.passed and not judged.lines  # the lines explain a failure only
    bad = c.clone()
    bad[1] += 0.1  # far above 3x eager's error and 128 ulps of the leaf's rms
    failed = rules.by_reference(e, bad, r, *F32, scan_leaf(bad, e, *F32))
    assert not failed.passed
    assert "Judged against a float64 reference" in failed.lines[0]


def test_by_rounding_noise_bounds_compiled_by_three_times_the_noise() -> None:
    e = torch.zeros(8)
    noise = torch.full((8,), 1e-3)
    within, beyond = e + 2.5e-3, e + 3.5e-3
    for c, passes in ((within, True), (beyond, False)):
        judged = rules.by_rounding_noise(e, c, e + noise, e, scan_leaf(c, e, *F32))
        assert judged.passed is passes
        assert "allowed: 3 * 0.001" in judged.lines[1]


def test_by_eager_spread_passes_within_eager_spread_with_a_note() -> None:
    e = torch.tensor([1.0, 2.0, 3.0, 4.0])
    jitter = torch.tensor([0.0, 2.0**-12, 0.0, 0.0])
    judged = rules.by_eager_spread(
        "grad of input 0", e, e - jitter, [e + jitter, e], *F32, "two eager runs differ ..."
    )
    assert judged.passed and judged.nondeterministic
    assert judged.note.startswith("grad of input 0: eager is nondeterministic here")
    beyond = rules.by_eager_spread("x", e, e + 4 * jitter, [e + jitter, e], *F32, "...")
    assert not beyond.passed and "outside it at 1 element(s)" in beyond.lines[0]


def test_by_eager_spread_names_a_call_the_snapshot_could_not_rebuild() -> None:
    e = torch.tensor([1.0, 2.0])
    again = torch.tensor([1.5, 2.0])
    judged = rules.by_eager_spread("output", e, again, [again, again.clone()], *F32, "how")
    assert not judged.passed and not judged.nondeterministic
    assert "limitation of the checker" in judged.lines[0]


def test_identical_is_bitwise_with_nan_equal_to_nan() -> None:
    nan = torch.tensor([float("nan"), 1.0])
    assert rules.identical(nan, nan.clone())
    assert not rules.identical(nan, torch.tensor([float("nan"), 1.0 + 2**-23]))
    assert not rules.identical(torch.zeros(2), torch.zeros(2, dtype=torch.float64))
    assert rules.identical(3, 3) and not rules.identical(torch.zeros(1), 0.0)


def test_by_eager_spread_trusts_torch_alert_over_agreeing_re_runs() -> None:
    # cummin's float16 backward on an H100: the two re-runs agreed bit for bit, the first run
    # landed otherwise; torch alerts that the backward (a scatter-add) is nondeterministic.
    e = torch.tensor([1.0, 2.0])
    again = torch.tensor([1.0 + 2.0**-12, 2.0])
    judged = rules.by_eager_spread(
        "grad", e, again, [again, again.clone()], *F32, "how", alerted=lambda: True
    )
    assert judged.passed and judged.nondeterministic


# --- boundaries: discontinuous functions of noisy values -------------------------------------


def floors() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """floor(x.sum(-1)) of rows that sum to 1 in exact arithmetic, as eager, compiled and the
    float64 reference land: eager one rounding step below 1 at row 0 (where the reference is 1),
    compiled at 1 at rows 0 and 2 (where the reference, like eager, is a step below)."""
    e = torch.tensor([0.0, 1.0, 0.0, 1.0])
    c = torch.tensor([1.0, 1.0, 1.0, 1.0])
    r = torch.tensor([1.0, 1.0, 0.0, 1.0], dtype=torch.float64)
    return e, c, r


def test_a_boundary_element_compiled_gets_wrong_is_not_excused_by_eager_s_error_elsewhere() -> None:
    e, c, r = floors()
    judged = rules.by_reference(e, c, r, *F32, scan_leaf(c, e, *F32))
    # Eager is a whole step off at row 0, so rule 1's slack (3 steps) excused every row before.
    assert judged.boundaries.wrong == 1 and judged.boundaries.crossed == 1
    assert judged.scan.mismatched == 2 and not judged.passed
    text = "\n".join(judged.lines)
    assert "compiled is wrong against the float64 reference" in text
    assert "first at index (2,): eager 0.0, compiled 1.0, reference 0.0" in text
    assert "eager and compiled fall on either side of a boundary" in text


def floor_rows() -> tuple[torch.Tensor, ...]:
    """floor of three row sums a rounding step from 1 (float64: 1 each), and a fourth row far
    from any boundary: eager lands below at rows 0 and 1, compiled on 1."""
    e = torch.tensor([0.0, 0.0, 1.0, 5.5])
    c = torch.tensor([1.0, 1.0, 1.0, 5.5])
    r = torch.tensor([1.0, 1.0, 1.0, 5.5], dtype=torch.float64)
    return e, c, r


def test_crossed_boundary_elements_are_excused_where_eager_s_noise_crosses_too() -> None:
    e, c, r = floor_rows()
    judged = rules.by_reference(e, c, r, *F32, scan_leaf(c, e, *F32))
    assert judged.boundaries.crossed == 2 and judged.scan.mismatched == 2
    # The noise takes eager to 1 at both rows, as compiled: rounding, though the rms would not
    # excuse it (the noise moved the leaf less than compiled did).
    noisy = torch.tensor([1.0, 1.0, 1.0, 5.5])
    passed = rules.by_rounding_noise(e, c, noisy, e, judged.scan, judged.boundaries)
    assert passed.scan.mismatched == 0 and not passed.unexcused
    assert "at 2 boundary element(s) eager's rounding noise crosses" in "\n".join(passed.lines)
    # Noise that leaves eager's value alone at a row (a floor of an exact value) excuses
    # nothing there, and the rms of the rest of the leaf excuses nothing then either.
    beside = torch.tensor([1.0, 0.0, 1.0, 5.5])
    failed = rules.by_rounding_noise(e, c, beside, e, judged.scan, judged.boundaries)
    assert failed.unexcused == 1 and failed.scan.mismatched == 2
    assert "at 1 boundary element(s) eager's value is exact" in "\n".join(failed.lines)


def cancelled() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """zoo, float16: a conv bias gradient ahead of BatchNorm, 0 in float64 and compiled; eager's
    cancellation leaves a residue at three of four elements."""
    e = torch.tensor([0.0, 0.000886, 0.01425, -0.000587], dtype=torch.float16)
    return e, torch.zeros(4, dtype=torch.float16), torch.zeros(4, dtype=torch.float64)


def test_a_leaf_that_cancels_identically_is_excused_where_eager_s_noise_moves_its_residue() -> None:
    e, c, r = cancelled()
    judged = rules.by_reference(e, c, r, 1e-3, 1e-5, scan_leaf(c, e, 1e-3, 1e-5))
    # Compiled is the exact answer, but a boundary's slack is no excuse: rounding must show it.
    assert judged.boundaries.crossed == 3 and not judged.passed
    # Eager's residue is rounding: the noise moves it by as much as it is far from 0.
    noisy = e * torch.tensor([1.0, 0.5, 1.4, 2.0], dtype=torch.float16)
    passed = rules.by_rounding_noise(e, c, noisy, e, judged.scan, judged.boundaries)
    assert passed.passed and "moves eager there by a third" in "\n".join(passed.lines)


def test_crossed_elements_are_excused_one_by_one_over_a_sample_and_its_mirror() -> None:
    """A value on a kink moves across it in one direction only: an element either sample
    explains is rounding. (The residues of `cancelled()`, beside an element that is not 0.)"""
    e0, c0, r0 = cancelled()
    e = torch.cat([e0, torch.tensor([5.0], dtype=torch.float16)])
    c = torch.cat([c0, torch.tensor([5.0], dtype=torch.float16)])
    r = torch.cat([r0, torch.tensor([5.0], dtype=torch.float64)])
    judged = rules.by_reference(e, c, r, 1e-3, 1e-5, scan_leaf(c, e, 1e-3, 1e-5))
    first = e * torch.tensor([1.0, 2.0, 1.0, 1.0, 1.0], dtype=torch.float16)  # element 1 only
    mirror = e * torch.tensor([1.0, 1.0, 2.0, 2.0, 1.0], dtype=torch.float16)  # 2 and 3
    alone = [
        rules.by_rounding_noise(e, c, noisy, e, judged.scan, judged.boundaries)
        for noisy in (first, mirror)
    ]
    assert [j.unexcused for j in alone] == [2, 1]
    both = rules.by_rounding_noise(
        e, c, mirror, e, judged.scan, judged.boundaries, explained_before=alone[0].explained
    )
    assert both.passed and not both.unexcused
    assert "(in this sample or an earlier one)" in "\n".join(both.lines)


def test_a_leaf_that_cancels_everywhere_is_one_residue_once_the_noise_shows_it_anywhere() -> None:
    """zoo, float16 Conv+BN (seed 3, Inductor): the noise left one channel's residue alone (each
    of its operations was exact on its rounded inputs) and moved another's."""
    e, c, r = cancelled()
    judged = rules.by_reference(e, c, r, 1e-3, 1e-5, scan_leaf(c, e, 1e-3, 1e-5))
    first = e * torch.tensor([1.0, 2.0, 1.0, 1.0], dtype=torch.float16)
    passed = rules.by_rounding_noise(e, c, first, e, judged.scan, judged.boundaries)
    assert passed.passed and "the float64 reference is 0 everywhere" in "\n".join(passed.lines)
    # Noise that moves no residue anywhere shows none: eager's values stand as exact.
    still = rules.by_rounding_noise(e, c, e.clone(), e, judged.scan, judged.boundaries)
    assert not still.passed and still.unexcused == 3


def test_a_leaf_masked_to_zero_in_float64_is_convicted_where_eager_s_value_is_exact() -> None:
    # bfloat16 margin_ranking_loss at x1 - x2 == bf16(0.1): eager's hinge input is exactly 0, so
    # its gradient flows; float64 and compiled (margin kept in float32) mask it. The reference is
    # 0 everywhere, as for a cancelling sum, but eager's gradient is exact: the noise leaves it.
    e = torch.tensor([0.2793, 0.0], dtype=torch.bfloat16)
    c, r = torch.zeros(2, dtype=torch.bfloat16), torch.zeros(2, dtype=torch.float64)
    judged = rules.by_reference(e, c, r, 1.6e-2, 1e-5, scan_leaf(c, e, 1.6e-2, 1e-5))
    assert judged.boundaries.crossed == 1 and not judged.passed
    noisy = e.clone()
    noisy[0] = 0.28125  # one bfloat16 rounding of the value, on its side
    failed = rules.by_rounding_noise(e, c, noisy, e, judged.scan, judged.boundaries)
    assert not failed.passed and failed.unexcused == 1
    # Moved by more than RESIDUE_ULPS units of itself, the same value is rounding residue.
    noisy[0] = 0.2734375  # 3 units below
    residue = rules.by_rounding_noise(e, c, noisy, e, judged.scan, judged.boundaries)
    assert residue.passed and not residue.unexcused


def test_only_whole_numbers_of_the_reference_are_boundaries() -> None:
    r = torch.tensor([0.25, 0.75], dtype=torch.float64)  # a continuous answer
    e, c = torch.tensor([0.0, 1.0]), torch.tensor([0.5, 0.5])
    assert rules.Boundaries.of(e, c, r, *F32, slack=1.0) == rules.Boundaries()


def test_values_too_large_to_hold_a_fraction_are_no_boundaries() -> None:
    """From 1/eps of the dtype up every value is a whole number (bfloat16 from 128, float32 from
    2**24): landing on one there is no floor or threshold. Seen on a bfloat16 SGD step over
    targets near 1e19 (examples/test_properties.py::test_training_step, CUDA, seed 2): a weight
    of 3.29e16, eager and float64 a rounding apart, compiled 1.7% off, all whole numbers, was
    called 'compiled wrong at a boundary' though rule 1 and the noise both excused it."""
    e = torch.tensor([3.293257227514675e16, 2.0], dtype=torch.bfloat16)
    c = torch.tensor([3.236962232172544e16, 2.0], dtype=torch.bfloat16)
    r = torch.tensor([3.293826176907506e16, 2.0], dtype=torch.float64)
    assert rules.Boundaries.of(e, c, r, 1.6e-2, 1e-5, slack=1e15) == rules.Boundaries()
    # Below 1/eps a whole number still is one: bfloat16 floor outputs of 3 and 4.
    small = rules.Boundaries.of(
        torch.tensor([3.0], dtype=torch.bfloat16),
        torch.tensor([4.0], dtype=torch.bfloat16),
        torch.tensor([3.0], dtype=torch.float64),
        1.6e-2,
        1e-5,
        slack=0.0,
    )
    assert small.wrong == 1
