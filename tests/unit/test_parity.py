"""Unit tests for parity.compare: hand-built results, no torch.compile needed."""

from __future__ import annotations

import collections
import dataclasses
import itertools
import re
import warnings
from collections.abc import Callable
from typing import Any

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_torchcompile import strategies as tcst
from pytest_torchcompile.errors import ParityError
from pytest_torchcompile.judging import closeness, reruns, rules
from pytest_torchcompile.judging.parity import CompareOptions, ParityReport, compare
from pytest_torchcompile.running.sides import SideResult
from pytest_torchcompile.running.snapshot import Unfaithful

CONTEXT = "backend=inductor mode=default dynamic=auto fullgraph=False device=cpu"
OPTIONS = CompareOptions(context=CONTEXT)


def side(
    output: Any = None,
    *,
    exception: BaseException | None = None,
    after: dict[str, Any] | None = None,
    grads: dict[str, Any] | None = None,
) -> SideResult:
    return SideResult(output, exception, after or {}, grads or {})


def check(
    eager: SideResult, compiled: SideResult, options: CompareOptions = OPTIONS, **kw: Any
) -> ParityReport:
    return compare(eager, compiled, options, **kw)


def fails(match: str, eager: SideResult, compiled: SideResult, **kw: Any) -> str:
    """Assert the comparison fails with a message matching `match`; return the message."""
    report = check(eager, compiled, **kw)
    with pytest.raises(ParityError, match=match) as info:
        report.raise_if_failed()
    return str(info.value)


def passes(eager: SideResult, compiled: SideResult, **kw: Any) -> ParityReport:
    report = check(eager, compiled, **kw)
    report.raise_if_failed()
    assert report.ok
    return report


class Counter:
    """A thunk that counts its calls."""

    def __init__(self, result: SideResult | Callable[[], SideResult]) -> None:
        self.result, self.calls = result, 0

    def __call__(self) -> SideResult:
        self.calls += 1
        return self.result() if callable(self.result) else self.result


def corrupt(t: torch.Tensor, index: tuple[int, ...], relative: float) -> torch.Tensor:
    out = t.clone()
    out[index] = out[index] * (1 + relative)
    return out


# --- float values -----------------------------------------------------------------------------


def test_identical_pytrees_pass_and_record_zero_errors() -> None:
    x = torch.randn(4, 4)
    out = (x, {"logits": x * 2, "n": 3}, [None, "s"])
    report = passes(side(out), side((x.clone(), {"logits": x * 2, "n": 3}, [None, "s"])))
    names = [leaf.leaf for leaf in report.leaves]
    assert names == [
        "output[0]",
        "output[1]['logits']",
        "output[1]['n']",
        "output[2][0]",
        "output[2][1]",
    ]
    assert all(leaf.max_abs == 0.0 and leaf.message == "" for leaf in report.leaves)
    assert report.failure_message() == ""


def test_one_corrupted_float32_element_fails_naming_leaf_index_and_context() -> None:
    x = torch.randn(8, 8) + 3
    bad = corrupt(x, (0, 5), 1e-3)
    message = fails(
        r"output\[1\]\['logits'\]: values are not close",
        side((x, {"logits": x})),
        side((x, {"logits": bad})),
    )
    assert "Mismatched elements: 1 / 64 (1.6%)" in message
    assert re.search(
        r"Greatest absolute difference: \S+ at index \(0, 5\) \(up to 1e-05 allowed\)", message
    )
    assert re.search(
        r"Greatest relative difference: 0.001 at index \(0, 5\) \(up to 1.3e-06 allowed\)", message
    )
    assert message.endswith(CONTEXT)
    assert "output[0]" not in message


def test_float32_corruption_still_fails_with_a_float64_reference() -> None:
    torch.manual_seed(0)
    a, w = torch.randn(8, 16), torch.randn(16, 8)
    eager = a @ w
    reference = Counter(side(a.double() @ w.double()))
    message = fails(
        r"(?s)output: values are not close.*index \(2, 3\).*float64 reference",
        side(eager),
        side(corrupt(eager, (2, 3), 1e-3)),
        reference=reference,
    )
    assert "compiled vs float64 reference" in message
    assert reference.calls == 1


def float16_sums() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Eager rounds to float16 after every addition; 'compiled' accumulates in float32 once."""
    torch.manual_seed(0)
    x = torch.randn(16, 64).half()
    eager = torch.zeros(16, dtype=torch.half)
    for i in range(64):
        eager = eager + x[:, i]
    return eager, x.float().sum(-1).half(), x.double().sum(-1)


def test_float16_noise_that_the_reference_explains_passes() -> None:
    eager, compiled, exact = float16_sums()
    fails(r"output: values are not close", side(eager), side(compiled))  # plain tolerance alone
    report = passes(side(eager), side(compiled), reference=lambda: side(exact))
    assert report.leaves[0].max_abs > 1e-3  # the recorded error is still eager vs compiled


def test_float16_real_error_fails_despite_the_reference_with_three_distances() -> None:
    eager, compiled, exact = float16_sums()
    wrong = compiled.clone()
    wrong[7] += 0.25
    message = fails(
        r"(?s)output: values are not close.*Mismatched elements: 1 / 16",
        side(eager),
        side(wrong),
        reference=lambda: side(exact),
    )
    assert re.search(r"eager vs compiled: +greatest \|difference\| 0.2\d* at index \(7,\)", message)
    assert re.search(r"eager vs float64 reference: +greatest \|difference\| \S+", message)
    assert re.search(r"compiled vs float64 reference: +greatest \|difference\| 0.25", message)
    assert "atol + rtol * |reference| + 3 * " in message
    assert rules.REFERENCE_SLACK == 3.0


def test_reference_is_called_lazily_and_at_most_once() -> None:
    x = torch.randn(5)
    ref = Counter(side((x.double(), x.double()), grads={"grad of input 0": x.double()}))
    passes(
        side((x, x), grads={"grad of input 0": x}),
        side((x, x), grads={"grad of input 0": x}),
        reference=ref,
    )
    assert ref.calls == 0
    bad = x + 1
    report = check(
        side((x, x), grads={"grad of input 0": x}),
        side((bad, bad), grads={"grad of input 0": bad}),
        reference=ref,
    )
    assert [leaf.ok for leaf in report.leaves] == [False, False, False]
    assert ref.calls == 1


@pytest.mark.parametrize(
    ("reference", "why"),
    [
        (
            side(exception=TypeError("no float64 kernel")),
            r"the reference run raised TypeError: no float64 kernel",
        ),
        (side({"other": torch.zeros(3)}), r"the reference run has no tensor at this leaf"),
        (
            side(torch.zeros(4, dtype=torch.float64)),
            r"the reference has shape \(4,\), eager \(3,\)",
        ),
    ],
)
def test_unusable_reference_falls_back_to_the_plain_verdict_and_says_why(
    reference: SideResult, why: str
) -> None:
    x = torch.ones(3)
    fails(
        rf"(?s)No float64 reference here \({why}\): judged by the plain tolerance",
        side(x),
        side(x + 1),
        reference=lambda: reference,
    )


def test_reference_thunk_that_raises_is_reported_not_propagated() -> None:
    def boom() -> SideResult:
        raise RuntimeError("upcast failed")

    x = torch.ones(3)
    fails(
        r"the reference run raised RuntimeError: upcast failed",
        side(x),
        side(x + 1),
        reference=boom,
    )


def test_compiled_nan_where_the_reference_is_finite_fails() -> None:
    x = torch.ones(3)
    y = x.clone()
    y[1] = float("nan")
    ref = Counter(side(x.double()))
    fails(r"NaN/inf in different places", side(x), side(y), reference=ref)
    assert ref.calls == 1  # consulted, and it says compiled is wrong


def test_reference_lines_of_a_non_finite_mismatch_say_where_nan_inf_differ() -> None:
    # zoo ema_update, 0-d float64: eager and the reference are -inf, compiled lost the update and
    # stayed finite. Distances over finite pairs are all 0 there, which read as "no difference".
    e = torch.tensor([1.0, float("-inf"), 2.0])
    c = torch.tensor([1.0, -1.5, 2.0])
    r = torch.tensor([1.0, float("-inf"), 2.0], dtype=torch.float64)
    message = fails(r"NaN/inf in different places", side(e), side(c), reference=lambda: side(r))
    assert (
        "eager vs compiled:             greatest |difference| 0 where both are "
        "finite; NaN/inf differ at 1 element(s), first at index (1,): eager -inf, compiled -1.5"
    ) in message
    assert "eager vs float64 reference:    greatest |difference| 0\n" in message
    assert (
        "compiled vs float64 reference: greatest |difference| 0 where both are "
        "finite; NaN/inf differ at 1 element(s), first at index (1,): compiled -1.5, reference -inf"
    ) in message


def test_compiled_right_where_eager_overflowed_passes_with_a_note() -> None:
    # soft_margin_loss in float16: eager overflows to inf, compiled (float32 inside) is right.
    e = torch.tensor([14.6, float("inf")], dtype=torch.float16)
    c = torch.tensor([14.6, 14.6], dtype=torch.float16)
    r = torch.tensor([14.6, 14.6], dtype=torch.float64)
    report = passes(side(e), side(c), reference=lambda: side(r), eager_again=lambda: side(e))
    (note,) = report.notes
    assert note.startswith(
        "output: outside assert_close's tolerance at 1 NaN/inf placement(s) of 2 element(s); "
        "excused by the float64 reference"
    )
    assert note.endswith(
        "compiled is finite and agrees with the float64 reference at 1 element(s) where "
        "eager is not (eager overflowed or lost precision there): compiled is right"
    )


def test_compiled_finite_but_wrong_where_eager_overflowed_fails() -> None:
    e = torch.tensor([float("inf")], dtype=torch.float16)
    r = torch.tensor([14.6], dtype=torch.float64)
    fails(
        r"NaN/inf",
        side(e),
        side(torch.tensor([3.0], dtype=torch.float16)),
        reference=lambda: side(r),
    )


@pytest.mark.parametrize(
    ("eager", "compiled"), [(float("nan"), float("-inf")), (float("inf"), float("nan"))]
)
def test_kinds_of_non_finite_may_differ_where_the_reference_is_undefined(
    eager: float, compiled: float
) -> None:
    # an inf input: eager's gradient is nan where compiled's is -inf; the exact answer is nan too
    r = torch.tensor([1.0, float("nan")], dtype=torch.float64)
    e, c = torch.tensor([1.0, eager]), torch.tensor([1.0, compiled])
    passes(side(e), side(c), reference=lambda: side(r))


def test_kinds_of_non_finite_may_differ_where_eager_overflowed_and_the_reference_is_finite() -> (
    None
):
    # zoo attention, bfloat16 inputs around 8: a weight's gradient is nan eagerly and -inf
    # compiled where float64 is finite. Eager is as wrong there: it holds compiled to nothing.
    r = torch.tensor([1.0, -1.92], dtype=torch.float64)
    e = torch.tensor([1.0, float("nan")], dtype=torch.bfloat16)
    c = torch.tensor([1.0, float("-inf")], dtype=torch.bfloat16)
    passes(side(e), side(c), reference=lambda: side(r))
    # Compiled non-finite where eager is finite still fails, whatever the reference.
    fails(r"NaN/inf", side(r.to(torch.bfloat16)), side(c), reference=lambda: side(r))


def test_an_overflow_only_eager_makes_in_float64_is_not_judged_and_says_so() -> None:
    # examples, Conv+BN in training on a float64 image of 1.8e308 everywhere: eager's batch
    # mean overflows, compiled's stays finite, and the float64 reference is eager again.
    e = torch.tensor([1.0, float("nan"), float("-inf")], dtype=torch.float64)
    c = torch.tensor([1.0, 0.0, -8.5e306], dtype=torch.float64)
    report = passes(side(e), side(c), reference=lambda: side(e.clone()))
    (note,) = report.notes
    assert note.endswith(
        "not judged at 2 element(s) where eager is non-finite and compiled is not: "
        "torch.float64 has no wider reference to tell which is right (an overflow at the "
        "dtype's range only one side makes)"
    )
    # A float32 leaf has one: compiled finite where float64 overflows too is wrong.
    r = torch.tensor([1.0, float("nan"), float("-inf")], dtype=torch.float64)
    fails(r"NaN/inf", side(e.float()), side(c.float()), reference=lambda: side(r))


def test_every_excuse_a_passing_leaf_took_is_in_its_note() -> None:
    e = torch.tensor([float("inf"), float("nan")], dtype=torch.float64)
    c = torch.tensor([1.0, 0.0], dtype=torch.float64)
    r = torch.tensor([1.0, float("nan")], dtype=torch.float64)
    (note,) = passes(side(e), side(c), reference=lambda: side(r)).notes
    assert "compiled is right" in note and "not judged at 1 element(s)" in note


def test_compiled_non_finite_where_eager_is_finite_and_reference_undefined_of_another_kind() -> (
    None
):
    r = torch.tensor([float("inf")], dtype=torch.float64)
    fails(
        r"NaN/inf",
        side(torch.tensor([3.0])),
        side(torch.tensor([float("nan")])),
        reference=lambda: side(r),
    )


def test_a_reference_past_the_dtype_range_is_an_infinity_in_that_dtype() -> None:
    # 1e6 does not fit float16: the correctly rounded answer is inf, which compiled gives.
    r = torch.tensor([1e6], dtype=torch.float64)
    e = torch.tensor([65504.0], dtype=torch.float16)
    c = torch.tensor([float("inf")], dtype=torch.float16)
    passes(side(e), side(c), reference=lambda: side(r))


def test_nondeterminism_note_compares_non_finite_values_as_equal() -> None:
    e = torch.tensor([float("inf"), 1.0])
    message = fails(
        r"values are not close",
        side(e),
        side(torch.tensor([1.0, 2.0])),
        eager_again=lambda: side(e.clone()),
    )
    assert "re-run" not in message and "nondeterministic" not in message


def test_no_rule_excuses_a_difference_an_eager_rerun_does_not_reproduce() -> None:
    # An unfaithful re-run (say, one that lost the inputs' aliasing) reproduces the compiler's
    # wrong answer; the reference built the same way would bless it. The second eager run,
    # from the same snapshot, does not reproduce eager: so nothing is excused.
    e = torch.tensor([4.0, 4.0, 3.0, 3.0])
    wrong = torch.tensor([3.0, 3.0, 3.0, 3.0])
    ref = Counter(side(wrong.double()))
    message = fails(
        r"agree bit for bit with each other but not with the first eager run \(two eager runs "
        r"differ at 2 element.*limitation of the checker",
        side(e),
        side(wrong),
        reference=ref,
        eager_again=lambda: side(wrong.clone()),
        perturbed=lambda: side(wrong.clone()),
    )
    assert ref.calls == 0 and "float64 reference" not in message


def _runs_of(*results: torch.Tensor) -> Callable[[], SideResult]:
    """A re-run thunk that returns each of `results` in turn: eager's run-to-run spread."""
    runs = iter(results)
    return lambda: side(next(runs).clone())


def test_compiled_within_eager_run_to_run_spread_passes_with_a_note() -> None:
    # A backward that accumulates with atomics (cummax's on CUDA): eager's runs differ at a few
    # elements, and compiled from eager by as much.
    e = torch.tensor([1.0, 2.0, 3.0, 4.0])
    jitter = torch.tensor([0.0, 0.0, 2.0**-13, 0.0])
    again, third = e + jitter, e - jitter
    report = passes(side(e), side(e + jitter), eager_again=_runs_of(again, third))
    assert report.notes == [
        "output: eager is nondeterministic here: 3 eager runs from one snapshot differ by "
        "up to 0.0002441 (two eager runs differ at 1 element(s) by up to 0.0001221); compiled "
        "is within that run-to-run spread"
    ]


def test_nondeterminism_a_second_run_hid_is_found_by_more_runs() -> None:
    # interpolate's and cummin's float16 backward on CUDA (atomics): the second eager run landed
    # within the tolerance of eager (here, bit for bit), the rules failed compiled's 1-ulp
    # difference at a small element; a later run shows eager's own spread.
    # A gradient summed in another order: one ulp of the terms (~2), at a result near zero.
    e = torch.tensor([2.0**-9, 2.0, 3.0, 4.0], dtype=torch.float16)
    ulp = torch.tensor([2.0**-9, 0.0, 0.0, 0.0], dtype=torch.float16)
    again = Counter(_runs_of(e, e, e + ulp, e, e))
    report = passes(side(e), side(e + ulp), eager_again=again)
    assert again.calls == 3  # the second run, then more until one differs bit for bit
    assert report.notes[0].startswith("output: eager is nondeterministic here: 4 eager runs")
    deterministic = Counter(side(e.clone()))
    fails("values are not close", side(e), side(e + ulp), eager_again=deterministic)
    assert deterministic.calls == 1 + reruns.LATE_SAMPLES


def test_agreeing_re_runs_of_a_call_torch_alerts_about_are_eager_spread() -> None:
    e = torch.tensor([1.0, 2.0, 3.0, 4.0])
    again = e + torch.tensor([0.0, 2.0**-12, 0.0, 0.0])

    def alerting() -> SideResult:  # as ATen's alertNotDeterministic warns under warn_only
        warnings.warn(
            "scatter_add_cuda_kernel does not have a deterministic implementation", stacklevel=2
        )
        return side(again.clone())

    report = passes(side(e), side(again), eager_again=alerting)
    assert "eager is nondeterministic here" in report.notes[0]
    assert not torch.are_deterministic_algorithms_enabled()  # the alert run restores it


def test_compiled_beyond_eager_run_to_run_spread_fails_and_is_not_blamed_on_a_stage() -> None:
    e = torch.tensor([1.0, 2.0, 3.0, 4.0])
    jitter = torch.tensor([0.0, 0.0, 2.0**-13, 0.0])
    message = fails(
        r"Judged against eager's run-to-run spread: eager is nondeterministic here.*allowed: "
        r"\|compiled - eager\| <= atol \+ rtol \* \|eager\| \+ 0.0002441, and compiled is "
        r"outside it at 1 element",
        side(e),
        side(corrupt(e + jitter, (0,), 1e-3)),
        eager_again=_runs_of(e + jitter, e - jitter),
    )
    assert "limitation of the checker" not in message


def test_reduction_order_noise_passes_but_one_corrupted_element_fails() -> None:
    # bn.weight's gradient of a float32 conv+BN on a 1023-long, wide-valued input: Inductor sums
    # in another order than ATen and lands 4x farther from float64 than eager, at ~10 ulps of
    # the leaf's magnitude (numbers measured on examples/test_properties.py::test_conv_bn).
    r = torch.tensor(
        [-143.5, 1012.25, 2048.0, -1475.75, 88.0, 900.5, 1520.0, -12.25], dtype=torch.float64
    )
    e = (
        r + torch.tensor([1e-4, -2e-4, 3e-4, 1e-4, 0, -1e-4, 2e-4, 0], dtype=torch.float64)
    ).float()
    c = (
        r + torch.tensor([4e-4, 8e-4, -1.3e-3, 6e-4, -2e-4, 5e-4, -9e-4, 3e-4], dtype=torch.float64)
    ).float()
    passes(side(e), side(c), reference=lambda: side(r), eager_again=lambda: side(e.clone()))
    bad = c.clone()
    bad[4] += 1e-3 * (abs(float(bad[4])) + 1)  # what tests/planted.py's corrupt_output does
    fails(
        r"float64 reference",
        side(e),
        side(bad),
        reference=lambda: side(r),
        eager_again=lambda: side(e.clone()),
    )


def test_reference_judges_python_float_leaves_too() -> None:
    e, c = side({"loss": 1.0}), side({"loss": 1.0 + 1e-6})
    assert not check(e, c).ok
    assert check(e, c, reference=lambda: side({"loss": 1.0 + 5e-7})).ok  # eager was off by 5e-7
    assert not check(e, c, reference=lambda: side({"loss": 1.0})).ok  # eager was exact


# --- NaN, inf, exact dtypes ---------------------------------------------------------------------


def test_nan_and_inf_in_the_same_places_pass() -> None:
    x = torch.tensor([1.0, float("nan"), float("inf"), -float("inf")])
    passes(side(x), side(x.clone()))


def test_nan_in_different_places_fails() -> None:
    e = torch.tensor([1.0, float("nan"), 3.0])
    c = torch.tensor([1.0, 2.0, float("nan")])
    message = fails(
        r"NaN/inf in different places, first at index \(1,\): eager nan, compiled 2.0",
        side(e),
        side(c),
    )
    assert "Mismatched elements: 2 / 3" in message


def test_inf_of_opposite_sign_fails() -> None:
    e = torch.tensor([float("inf"), 0.0])
    c = torch.tensor([-float("inf"), 0.0])
    fails(r"first at index \(0,\): eager inf, compiled -inf", side(e), side(c))


def test_integer_tensors_are_exact_even_with_loose_tolerances() -> None:
    e = torch.arange(10)
    c = e.clone()
    c[4] = 5
    message = fails(
        r"output: values are not equal",
        side(e),
        side(c),
        options=CompareOptions(rtol=1.0, atol=10.0),
    )
    assert "Greatest absolute difference: 1 at index (4,)" in message
    assert "allowed" not in message
    passes(side(e), side(e.clone()))


def test_bool_tensors_are_exact() -> None:
    e = torch.tensor([True, False])
    fails(r"Mismatched elements: 1 / 2 \(50.0%\)", side(e), side(torch.tensor([True, True])))


def test_complex_values() -> None:
    e = torch.randn(4, dtype=torch.complex64)
    passes(side(e), side(e.clone()))
    fails(r"values are not close", side(e), side(e + 1e-3j))


def test_zero_dim_tensor_message_shows_both_values() -> None:
    fails(
        r"(?s)output: values are not close.*eager 1.0, compiled 1.5",
        side(torch.tensor(1.0)),
        side(torch.tensor(1.5)),
    )


def test_empty_tensors_pass() -> None:
    passes(side(torch.empty(0, 3)), side(torch.empty(0, 3)))


def test_sparse_tensors_compare_dense_forms() -> None:
    dense = torch.tensor([[0.0, 1.0], [2.0, 0.0]])
    passes(side(dense.to_sparse()), side(dense.to_sparse()))
    fails(
        r"index \(1, 0\)",
        side(dense.to_sparse()),
        side((dense * torch.tensor([[1.0], [2.0]])).to_sparse()),
    )


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, torch.float64])
def test_plain_verdict_agrees_with_torch_testing_assert_close(dtype: torch.dtype) -> None:
    torch.manual_seed(1)
    e = torch.randn(200, dtype=torch.float64).to(dtype)
    for scale in (1e-8, 1e-6, 1e-4, 1e-3, 1e-2):
        c = (e.double() * (1 + scale * torch.randn(200, dtype=torch.float64))).to(dtype)
        try:
            torch.testing.assert_close(c, e)
            expected = True
        except AssertionError:
            expected = False
        assert check(side(e), side(c)).ok is expected, (dtype, scale)


def test_differences_are_scanned_in_chunks_with_correct_indices(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(closeness, "CHUNK_ELEMENTS", 7)
    e = torch.randn(6, 5)
    c = e.clone()
    c[4, 3] += 1.0
    c[1, 1] += 0.5
    report = check(side(e), side(c))
    assert report.leaves[0].max_abs == pytest.approx(1.0, rel=1e-5)
    with pytest.raises(
        ParityError,
        match=r"Mismatched elements: 2 / 30(?s:.*)absolute difference: 1 at index \(4, 3\)",
    ):
        report.raise_if_failed()


@settings(max_examples=100, deadline=None)
@given(
    e=tcst.tensors(dtypes=tcst.float_dtypes(), shapes=tcst.shapes(max_dims=2), specials=True),
    noise=st.sampled_from([0.0, 1e-7, 1e-6, 1e-5, 1e-3]),
    chunk=st.sampled_from([3, 1 << 22]),
    data=st.data(),
)
def test_the_fast_path_settles_a_leaf_exactly_as_the_scan_would(
    e: torch.Tensor, noise: float, chunk: int, data: st.DataObject
) -> None:
    """Equal or close, finite leaves skip the scan, with the scan's verdict and largest errors;
    any other leaf (a NaN, an infinity, one element too far) goes on to the scan."""
    noise_t = noise * torch.randn(e.shape, generator=torch.Generator().manual_seed(0))
    c = (e + noise_t.to(e.dtype)).contiguous()  # contiguous: one element is set through view(-1)
    if e.numel() and data.draw(st.booleans()):
        c.view(-1)[data.draw(st.integers(0, e.numel() - 1))] = data.draw(
            st.sampled_from([float("nan"), float("inf"), 1e3])
        )
    rtol, atol = OPTIONS.tolerances(e.dtype)
    e_before, c_before = e.clone(), c.clone()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(closeness, "CHUNK_ELEMENTS", chunk)
        fast = closeness.plainly_close(c, e, rtol, atol)
        scan = closeness.scan_leaf(c, e, rtol, atol)
    for leaf, before in ((e, e_before), (c, c_before)):  # it works in place on its own copies only
        torch.testing.assert_close(leaf, before, rtol=0, atol=0, equal_nan=True)
    all_finite = bool(e.isfinite().all() and c.isfinite().all())
    assert (fast is not None) == (scan.mismatched == 0 and (all_finite or torch.equal(c, e)))
    if fast is not None:
        assert fast == (scan.abs_all.value, scan.rel_all.value)
    with pytest.MonkeyPatch.context() as patch:  # the batch a whole call's leaves go through
        patch.setattr(closeness, "CHUNK_ELEMENTS", chunk)
        [(plain, within_floor)] = closeness.plainly_close_all([(c, e, rtol, atol)])
        floor = closeness.noise_floor(e, e.dtype) if closeness.is_inexact(e) else 0.0
        exact_floor = closeness.plainly_close(c, e, rtol, atol + floor)
    # Judged in the leaf's own dtype: the same verdicts (a plain one it cannot be sure of is
    # left to the floor, which passes it alike), the errors up to float32 rounding.
    assert plain is None or plain == pytest.approx(fast, rel=2**-20, abs=0)
    assert (within_floor is None) == (exact_floor is None)
    assert within_floor is None or within_floor == pytest.approx(exact_floor, rel=2**-20, abs=0)
    assert fast is None or plain is not None or within_floor is not None


# --- metadata -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("compiled", "what"),
    [
        (
            torch.zeros(2, 3, dtype=torch.float16),
            r"dtype: eager torch.float32, compiled torch.float16",
        ),
        (torch.zeros(3, 2), r"shape: eager \(2, 3\), compiled \(3, 2\)"),
        (torch.zeros(2, 3, device="meta"), r"device: eager cpu, compiled meta"),
        (torch.zeros(2, 3).to_sparse(), r"layout: eager torch.strided, compiled torch.sparse_coo"),
    ],
)
def test_metadata_mismatch_names_both_values(compiled: torch.Tensor, what: str) -> None:
    fails(
        rf"output: tensor metadata differs between eager and compiled.\n  {what}",
        side(torch.zeros(2, 3)),
        side(compiled),
    )


def test_requires_grad_mismatch_fails_and_values_are_still_compared() -> None:
    e = torch.zeros(3, requires_grad=True)
    message = fails(r"requires_grad: eager True, compiled False", side(e), side(torch.ones(3)))
    assert "Mismatched elements: 3 / 3" in message


def test_transposed_output_fails_with_check_strides_and_passes_without() -> None:
    e = torch.randn(4, 6)
    c = e.t().contiguous().t()
    fails(
        r"memory layout \(strides\): eager \(6, 1\), compiled \(1, 4\)"
        r"(?s:.*)check_strides=False",
        side(e),
        side(c),
    )
    passes(side(e), side(c), options=CompareOptions(check_strides=False))


def test_padded_rows_keep_the_layout_and_pass() -> None:
    """Inductor pads rows for alignment on CUDA (row stride 16 for 10 columns): same layout."""
    e = torch.randn(16, 10)
    c = torch.empty_strided((16, 10), (16, 1)).copy_(e)
    passes(side(e), side(c))


def test_a_materialized_broadcast_changes_the_layout() -> None:
    e = torch.randn(1, 5).expand(3, 5)
    fails(
        r"memory layout \(strides\): eager \(0, 1\), compiled \(5, 1\)",
        side(e),
        side(e.contiguous()),
    )


def test_strides_of_size_one_dims_and_empty_tensors_are_ignored() -> None:
    e = torch.randn(1, 5)
    c = torch.empty_strided((1, 5), (1, 1)).copy_(e)
    passes(side(e), side(c))
    passes(side(torch.empty(0, 4)), side(torch.empty(0, 4).t().contiguous().t()))


def test_strides_are_only_checked_for_outputs() -> None:
    e = torch.randn(4, 6)
    c = e.t().contiguous().t()
    passes(
        side(None, after={"input 0 after the call": e}, grads={"grad of input 0": e}),
        side(None, after={"input 0 after the call": c}, grads={"grad of input 0": c}),
    )


# --- structure and naming -------------------------------------------------------------------


Pair = collections.namedtuple("Pair", ["loss", "logits"])


@dataclasses.dataclass
class Out:
    loss: torch.Tensor
    extras: dict[str, Any]


def test_namedtuple_fields_are_named_with_attributes() -> None:
    x = torch.ones(2)
    fails(r"output.logits: values are not close", side(Pair(x, x)), side(Pair(x, x + 1)))


def test_dataclass_fields_are_named_with_attributes() -> None:
    x = torch.ones(2)
    fails(
        r"output\[0\].extras\['h'\]\[1\]: values are not close",
        side([Out(x, {"h": [x, x]})]),
        side([Out(x, {"h": [x, x * 3]})]),
    )


def test_torch_return_types_are_named_by_field() -> None:
    x = torch.tensor([[1.0, 3.0], [4.0, 2.0]])
    e = torch.max(x, 1)
    c = torch.max(x * torch.tensor([[1.0, 1.0], [1.0, 3.0]]), 1)
    message = fails(r"output.values: values are not close", side(e), side(c))
    assert "output.indices: values are not equal" in message


@pytest.mark.parametrize(
    ("eager", "compiled", "match"),
    [
        ((1, 2), [1, 2], r"output: eager has a tuple of length 2, compiled has a list of length 2"),
        ([1, 2], [1, 2, 3], r"output: eager has 2 elements, compiled has 3"),
        (
            {"a": 1, "b": 2},
            {"a": 1, "c": 2},
            r"output: dict keys differ; only in eager: 'b'; only in compiled: 'c'",
        ),
        (
            (None,),
            (torch.zeros(2),),
            r"output\[0\]: eager has None, compiled has a tensor of shape \(2,\)",
        ),
        (
            (torch.zeros(2),),
            (1.0,),
            r"output\[0\]: eager has a tensor of shape \(2,\) and dtype torch.float32, "
            r"compiled has float 1.0",
        ),
        (3, 3.0, r"output: eager has int 3, compiled has float 3.0"),
        (Pair(1, 2), (1, 2), r"output: eager has a Pair of length 2, compiled has a tuple"),
    ],
)
def test_structure_mismatches_say_what_differs(eager: Any, compiled: Any, match: str) -> None:
    fails(match, side(eager), side(compiled))


def test_dict_key_order_does_not_matter() -> None:
    passes(side({"a": 1, "b": 2}), side({"b": 2, "a": 1}))


@pytest.mark.parametrize(
    ("eager", "compiled", "ok"),
    [
        (3, 3, True),
        (3, 4, False),
        (True, True, True),
        (0.1 + 0.2, 0.3, True),  # float64 default tolerance, like assert_close
        (1.0, 1.001, False),
        (float("nan"), float("nan"), True),
        (1 + 2j, 1 + 2j, True),
        ("a", "b", False),
        (torch.Size([2, 3]), torch.Size([2, 3]), True),
        (torch.Size([2, 3]), torch.Size([3, 2]), False),
        (torch.float32, torch.float16, False),
        (torch.device("cpu"), torch.device("cpu"), True),
        (None, None, True),
    ],
)
def test_python_scalars_and_torch_objects(eager: Any, compiled: Any, ok: bool) -> None:
    assert check(side([eager]), side([compiled])).ok is ok


def test_scalar_mismatch_message_shows_both() -> None:
    fails(
        r"output\[0\]: eager has torch.Size\(\[2, 3\]\), compiled has torch.Size\(\[3, 2\]\)",
        side([torch.Size([2, 3])]),
        side([torch.Size([3, 2])]),
    )


# --- exceptions -----------------------------------------------------------------------------


def test_same_exception_type_is_parity_with_a_note() -> None:
    report = passes(side(exception=ValueError("a")), side(exception=ValueError("b")))
    assert report.exception_note == "both raised ValueError"
    assert report.leaves == []


def test_compiled_raising_a_subclass_of_eagers_exception_is_parity() -> None:
    class WrappedRuntimeError(RuntimeError):
        pass

    report = passes(
        side(exception=RuntimeError("shape")), side(exception=WrappedRuntimeError("shape"))
    )
    assert report.exception_note == "both raised RuntimeError (compiled: WrappedRuntimeError)"
    assert not check(side(exception=WrappedRuntimeError("x")), side(exception=RuntimeError("x"))).ok


def test_different_exception_types_fail_showing_both() -> None:
    fails(
        r"exception: eager raised ValueError: bad value, compiled raised TypeError: bad type",
        side(exception=ValueError("bad value")),
        side(exception=TypeError("bad type")),
    )


def test_only_compiled_raising_fails() -> None:
    message = fails(
        r"exception: eager returned normally, compiled raised RuntimeError: boom",
        side(torch.ones(2), after={"input 0 after the call": torch.ones(2)}),
        side(None, exception=RuntimeError("boom")),
    )
    assert "output" not in message and "input 0" not in message


def test_only_eager_raising_fails() -> None:
    fails(
        r"exception: eager raised KeyError: 'k', compiled returned normally",
        side(exception=KeyError("k")),
        side(torch.ones(2)),
    )


# --- state after the call and gradients -----------------------------------------------------


def test_buffer_after_the_call_differs() -> None:
    mean = torch.zeros(4)
    fails(
        r"buffer 'bn.running_mean': values are not close",
        side(None, after={"buffer 'bn.running_mean'": mean + 0.1}),
        side(None, after={"buffer 'bn.running_mean'": mean}),
    )


def test_state_key_on_one_side_only_fails() -> None:
    x = torch.ones(2)
    fails(
        r"input 0 after the call: present in eager only",
        side(None, after={"input 0 after the call": x}),
        side(None),
    )
    fails(
        r"input 'x' after the call: present in compiled only",
        side(None),
        side(None, after={"input 'x' after the call": x}),
    )


def test_missing_gradient_says_which_side_had_none() -> None:
    g = torch.ones(3)
    fails(
        r"grad of parameter 'W_q.weight': compiled computed no gradient \(None\), "
        r"eager computed a tensor of shape \(3,\)",
        side(None, grads={"grad of parameter 'W_q.weight'": g}),
        side(None, grads={"grad of parameter 'W_q.weight'": None}),
    )
    fails(
        r"grad of input 0: eager computed no gradient \(None\), compiled computed a tensor",
        side(None, grads={"grad of input 0": None}),
        side(None, grads={"grad of input 0": g}),
    )
    passes(side(None, grads={"grad of input 0": None}), side(None, grads={"grad of input 0": None}))


def test_gradient_value_differs() -> None:
    g = torch.randn(3, 3)
    fails(
        r"grad of input 0: values are not close",
        side(None, grads={"grad of input 0": g}),
        side(None, grads={"grad of input 0": corrupt(g, (1, 1), 1e-2)}),
    )


def test_report_order_is_outputs_then_after_then_grads() -> None:
    x = torch.ones(2)
    state = {"input 0 after the call": x}
    grads = {"grad of input 0": x}
    report = check(
        side(x, after=state, grads=grads),
        side(x + 1, after={"input 0 after the call": x + 1}, grads={"grad of input 0": x + 1}),
    )
    assert [leaf.leaf for leaf in report.leaves] == [
        "output",
        "input 0 after the call",
        "grad of input 0",
    ]
    message = report.failure_message()
    assert message.startswith("Eager and compiled runs disagree at 3 leaves of 3 compared.")
    assert (
        message.index("output:")
        < message.index("input 0 after the call:")
        < message.index("grad of input 0:")
    )
    assert message.count(CONTEXT) == 1 and message.endswith(CONTEXT)
    assert all(leaf.message.endswith(CONTEXT) for leaf in report.leaves)


def test_errors_are_recorded_for_passing_leaves() -> None:
    e = torch.tensor([1.0, 0.0])
    c = torch.tensor([1.0 + 2**-20, 5e-6])
    report = passes(side(e), side(c))
    assert report.leaves[0].max_abs == pytest.approx(5e-6)
    assert report.leaves[0].max_rel == 2**-20  # eager's zero is left out of the relative error


# --- eager's own nondeterminism -------------------------------------------------------------


def test_nondeterministic_eager_is_reported_as_such() -> None:
    e = torch.zeros(4)
    runs = itertools.cycle([(e + 0.5, e), (e + 0.25, e)])
    again = Counter(lambda: side(next(runs)))
    report = check(side((e, e)), side((e + 0.8, e + 1)), eager_again=again)
    first, second = report.leaves
    assert (
        first.nondeterministic
        and "two eager runs differ at 4 element(s) by up to 0.5" in first.message
        and "up to 0.5)" in first.message  # the spread: the largest difference of three runs
    )
    assert not second.nondeterministic and "nondeterministic" not in second.message
    # once more, to tell eager's spread from an unrebuilt call; and for output[1], which every
    # run reproduces bit for bit, more runs look for nondeterminism in vain
    assert again.calls == 2 + reruns.LATE_SAMPLES
    message = report.failure_message()
    assert message.index("output[1]") < message.index("output[0]")  # real failures first
    with pytest.raises(
        ParityError,
        match=r"eager is nondeterministic(?s:.*)"
        r"torch.use_deterministic_algorithms\(True\)",
    ):
        report.raise_if_failed()


def test_eager_again_is_not_called_when_everything_passes() -> None:
    again = Counter(side(torch.ones(1)))
    passes(side(torch.zeros(1)), side(torch.zeros(1)), eager_again=again)
    assert again.calls == 0


def test_nondeterministic_exception() -> None:
    message = fails(
        r"a second eager run returned normally",
        side(exception=ValueError("flaky")),
        side(torch.ones(1)),
        eager_again=lambda: side(torch.ones(1)),
    )
    assert "eager is nondeterministic" in message


def test_nondeterministic_structure() -> None:
    fails(
        r"output: dict keys differ(?s:.*)two eager runs differ\b",
        side({"a": 1}),
        side({"b": 1}),
        eager_again=lambda: side({"c": 1}),
    )


# --- options --------------------------------------------------------------------------------


def test_rtol_atol_overrides() -> None:
    e = torch.ones(3)
    c = e + 1e-3
    fails(r"up to 1e-05 allowed", side(e), side(c))
    passes(side(e), side(c), options=CompareOptions(rtol=0.0, atol=2e-3))
    fails(
        r"output: values are not equal",
        side(e),
        side(e + 1e-7),
        options=CompareOptions(rtol=0.0, atol=0.0),
    )


@pytest.mark.parametrize("kwargs", [{"rtol": 1e-3}, {"atol": 1e-3}, {"rtol": -1.0, "atol": 0.0}])
def test_invalid_tolerances_are_rejected(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match=r"rtol|atol"):
        CompareOptions(**kwargs)


# --- eager's own sensitivity ------------------------------------------------------------------


def kinked_gradients() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """bfloat16 gradients through a ReLU whose input sits at the kink: eager and compiled
    disagree at a few places by whole cotangent values, and so does eager on nudged inputs."""
    torch.manual_seed(0)
    eager = torch.randn(64).to(torch.bfloat16)
    compiled = eager.clone()
    compiled[[3, 17]] = 0.0  # two activations flipped off on the compiled side
    nudged = eager.clone()
    nudged[[5, 40, 41]] = 0.0  # and three others flip when eager's inputs move by one ulp
    return eager, compiled, nudged


def test_differences_within_eager_sensitivity_pass() -> None:
    eager, compiled, nudged = kinked_gradients()
    reference = side(grads={"g": eager.double()})  # eager exact: the reference excuses nothing
    nudges = Counter(side(grads={"g": nudged}))
    passes(
        side(grads={"g": eager}),
        side(grads={"g": compiled}),
        reference=lambda: reference,
        perturbed=nudges,
    )
    assert nudges.calls == 1


def test_differences_beyond_eager_sensitivity_fail_and_say_both_distances() -> None:
    eager, compiled, _ = kinked_gradients()
    barely_nudged = eager.clone()
    barely_nudged[5] = barely_nudged[5] * (1 + 2**-7)
    message = fails(
        r"g: values are not close",
        side(grads={"g": eager}),
        side(grads={"g": compiled}),
        perturbed=lambda: side(grads={"g": barely_nudged}),
    )
    assert "Judged by eager's rounding noise" in message
    assert "allowed: 3 *" in message


def test_sensitivity_never_excuses_nan_placement() -> None:
    eager = torch.ones(8)
    compiled = eager.clone()
    compiled[2] = float("nan")
    fails(
        r"NaN/inf in different places",
        side(eager),
        side(compiled),
        perturbed=lambda: side(torch.full((8,), 100.0)),
    )


def test_sensitivity_is_not_consulted_when_the_plain_check_passes() -> None:
    nudges = Counter(side(torch.zeros(4)))
    passes(side(torch.ones(4)), side(torch.ones(4)), perturbed=nudges)
    assert nudges.calls == 0


def test_complex32_leaves_are_compared_without_torch_equal() -> None:
    # torch.equal has no ComplexHalf kernel on the CPU: OpInfo's chalf() sample crashed the
    # fast path ("equal_cpu" not implemented for 'ComplexHalf').
    e = torch.ones(3, dtype=torch.complex32)
    passes(side(e), side(e.clone()))
    fails(r"values are not close", side(e), side(e * 2))


def test_a_rerun_that_cannot_be_built_is_no_evidence_of_nondeterminism() -> None:
    # A training step that crashed only when compiled: eager changed the parameters in place
    # where compiled did not, so no faithful re-run exists. That says nothing about eager.
    def unavailable() -> SideResult:
        raise Unfaithful("eager changed parameter 'w' in place")

    message = fails(
        r"exception: eager returned normally",
        side(torch.ones(1)),
        side(exception=RuntimeError("compile crashed")),
        eager_again=unavailable,
    )
    assert "nondeterministic" not in message
    message = fails(
        r"Not judged by the float64 reference or eager's rounding noise: no faithful re-run: "
        r"eager changed parameter 'w' in place",
        side(torch.ones(2)),
        side(torch.ones(2) * 3),
        reference=lambda: side(torch.ones(2, dtype=torch.float64)),
        eager_again=unavailable,
    )
    assert "nondeterministic" not in message and "Judged against" not in message


# --- boundaries -------------------------------------------------------------------------------


def margin_gradients() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """bfloat16 gradients of a hinge at its kink: eager passes the gradient at 3 positions where
    ``x1 - x2`` equals the margin exactly, compiled (and float64, whose margin is not rounded)
    does not."""
    eager = torch.full((9,), -0.25, dtype=torch.bfloat16)
    eager[[1, 4, 6]] = 0.0
    compiled = torch.full((9,), -0.25, dtype=torch.bfloat16)
    compiled[[0, 1, 2, 4, 6]] = 0.0
    return eager, compiled, compiled.double()


def test_compiled_across_a_boundary_passes_where_eager_s_rounding_noise_crosses_it_too() -> None:
    eager, compiled, reference = margin_gradients()
    noisy = eager.clone()
    noisy[[0, 2, 3]] = 0.0  # eager's rounding moves kinks too
    report = passes(
        side(grads={"g": eager}),
        side(grads={"g": compiled}),
        reference=lambda: side(grads={"g": reference}),
        perturbed=lambda: side(grads={"g": noisy}),
    )
    assert report.notes == [
        "g: outside assert_close's tolerance at 2 value(s), greatest |compiled - eager| 0.25 of "
        "9 element(s); excused by eager's rounding noise: at 2 boundary element(s) eager's "
        "rounding noise crosses the boundary too, moves eager there by a third of its "
        "distance from it, or moves eager by more than 2 units of its own value (a rounding "
        "residue): within rounding, excused"
    ]


def test_compiled_across_a_boundary_fails_where_eager_is_exact() -> None:
    """The float64 reference agrees with compiled, and its slack (3 whole steps) would excuse
    it; but no rounding moves eager there: compiled computes something else."""
    eager, compiled, reference = margin_gradients()
    message = fails(
        r"g: values are not close",
        side(grads={"g": eager}),
        side(grads={"g": compiled}),
        reference=lambda: side(grads={"g": reference}),
        perturbed=lambda: side(grads={"g": eager.clone()}),
    )
    assert "At 2 element(s) the float64 reference is a whole number" in message
    assert "where eager's value is exact, no rounding moves it" in message
    assert "at 2 boundary element(s) eager's value is exact" in message
    assert "Mismatched elements: 2 / 9" in message


def test_compiled_wrong_against_the_reference_at_a_boundary_fails_where_noise_moves_a_step() -> (
    None
):
    eager = torch.tensor([0.0, 1.0, 0.0, 1.0])
    compiled = torch.tensor([1.0, 1.0, 1.0, 1.0])
    reference = torch.tensor([1.0, 1.0, 0.0, 1.0], dtype=torch.float64)
    message = fails(
        r"compiled is wrong against the float64 reference",
        side(eager),
        side(compiled),
        reference=lambda: side(reference),
        perturbed=lambda: side(torch.tensor([1.0, 0.0, 1.0, 0.0])),  # noise flips every row
    )
    assert "Mismatched elements: 2 / 4" in message  # the wrong row, and the crossed one
    # A floor moves by one step under rounding noise: the rms of that noise excuses nothing.
    assert "at 1 boundary element(s) compiled gets wrong, eager's rounding noise moves" in message


def test_a_whole_number_an_ill_conditioned_sum_lands_on_is_no_boundary() -> None:
    """examples' test_ema_update on CUDA (Inductor, torch 2.11, seeds 2 and 4): the sum of an
    average holding +-3.4e38 * (1 - decay) and small whole numbers. Eager's order cancelled the
    large terms first (17, as float64), compiled's absorbed a few small ones (8); eager's own
    rounding noise moves that sum by ~1e32, so 17 is no boundary compiled got wrong."""
    report = passes(
        side(torch.tensor(17.0)),
        side(torch.tensor(8.0)),
        reference=lambda: side(torch.tensor(17.0, dtype=torch.float64)),
        perturbed=lambda: side(torch.tensor(2.0e32)),
    )
    assert "an ill-conditioned value" in " ".join(report.notes)


def sampled_indices() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Indices a sampler draws from weights that rounding changes (pytorch-metric-learning's
    DistanceWeightedMiner: `0 * log(d)` at a self-distance rounding leaves 0 or not, so a row's
    draw is NaN-dropped or not): eager as float64 draws them at all but five elements, compiled
    changes two of them by 9 and 26."""
    eager = torch.arange(1000, dtype=torch.int64) % 256
    reference = eager.clone()
    reference[[3, 70, 400, 512, 900]] += 5
    compiled = eager.clone()
    compiled[[10, 600]] += torch.tensor([9, 26])
    return eager, compiled, reference


def noise_moving(eager: torch.Tensor, at: list[int], by: list[int]) -> torch.Tensor:
    noisy = eager.clone()
    noisy[at] += torch.tensor(by)
    return noisy


def test_whole_numbers_eager_s_noise_scatters_as_compiled_does_are_no_boundaries() -> None:
    """Eager's own rounding noise moves 20 other indices by 1 to 28: which elements a rounding
    moves is chance there, so compiled's two moves, steps the noise takes too, are within it."""
    eager, compiled, reference = sampled_indices()
    moves = list(range(100, 1000, 45))
    noisy = noise_moving(eager, moves, [1 + 7 * i % 28 for i in range(len(moves))])
    report = passes(
        side(eager),
        side(compiled),
        reference=lambda: side(reference),
        perturbed=lambda: side(noisy),
    )
    assert "an ill-conditioned choice lands on" in " ".join(report.notes)


@pytest.mark.parametrize(
    ("at", "by", "why"),
    [
        ([100], [28], "the noise moves fewer whole numbers than compiled"),
        (list(range(100, 1000, 45)), [1] * 20, "a floor's one step: boundaries"),
        (list(range(100, 1000, 45)), [8] * 20, "compiled's step of 26 is over 3x the noise's"),
    ],
)
def test_whole_numbers_are_boundaries_unless_the_noise_scatters_them_as_far_and_as_often(
    at: list[int], by: list[int], why: str
) -> None:
    eager, compiled, reference = sampled_indices()
    message = fails(
        r"compiled is wrong against the float64 reference",
        side(eager),
        side(compiled),
        reference=lambda: side(reference),
        perturbed=lambda: side(noise_moving(eager, at, by)),
    )
    assert "at 2 boundary element(s) compiled gets wrong" in message, why


def test_nan_where_eager_s_rounding_noise_overflows_too_is_excused_and_nowhere_else() -> None:
    """examples' test_ema_update on CUDA (seed 2): a sum whose sixteen terms of 3.4e37 overflow
    in Inductor's order (NaN) and not in eager's (17.5, as float64). Eager's rounding noise
    makes that sum NaN too (one sign's terms add up past float32's largest), so the NaN is
    another order's; NaN where the noise leaves eager finite is never noise."""
    eager, compiled = torch.tensor([17.5, 1.0]), torch.tensor([float("nan"), 1.0])
    reference = lambda: side(torch.tensor([17.5, 1.0], dtype=torch.float64))  # noqa: E731
    report = passes(
        side(eager),
        side(compiled),
        reference=reference,
        perturbed=lambda: side(torch.tensor([float("nan"), 1.0])),
    )
    assert "partial sums of another order overflow" in " ".join(report.notes)
    message = fails(
        r"NaN/inf",
        side(eager),
        side(compiled),
        reference=reference,
        perturbed=lambda: side(torch.tensor([17.5, 1.0])),
    )
    assert "where eager's rounding noise leaves eager finite: never noise" in message
