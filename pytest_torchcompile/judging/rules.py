"""The tolerance rules that tell a compiler's numeric noise from a miscompile, one unit each.

A floating leaf that fails assert_close's tolerance (with the reduction-order noise floor, which
`closeness` computes) is judged again by these rules, in this order, and only when a plain eager
re-run from the call's snapshot reproduces eager's first result (`reproduces`):

1. `by_reference`: compiled against a float64 reference (eager re-run on inputs and state
   upcast, aliasing kept). With ``E = max|eager - r|`` and ``rms(r)`` the leaf's magnitude,
   every element where compiled and the reference are finite must satisfy::

       |compiled - r| <= atol + rtol * |r| + REFERENCE_SLACK * E + NOISE_ULPS * eps * rms(r)

   REFERENCE_SLACK = 3 is PyTorch's accuracy-benchmark rule (compiled may be 2-3x as far from
   the exact answer as eager), element-wise so one corrupted element is still caught;
   NOISE_ULPS = 128 units of the accumulation precision is reduction order (Inductor sums in
   vector lanes, or one lane over a non-contiguous input, where ATen sums in a cascade:
   calibrated on the zoo, the examples and op_db, the largest seen is 59 ulps). Non-finite
   values are judged against the reference rounded to the leaf's dtype: where eager overflowed
   and the reference is finite, compiled passes by agreeing with it (compiled is right).
   Boundaries (`Boundaries`) are exempt from the slack: where the reference is a whole number
   (a floor, round, comparison or threshold, a gradient a kink masks) and eager and compiled
   fall on different sides of it, compiled is wrong if eager matches the reference and it does
   not (a failure no rule excuses, unless eager's own rounding noise moves eager there by more
   than ILL_CONDITIONED whole steps: then the whole number is the chance landing of an
   ill-conditioned value, such as a sum whose large terms cancel, and rule 2 judges the
   element as any other), and across a boundary from eager if it matches the
   reference and eager does not (left to rule 2: rounding where eager's own noise crosses the
   boundary there too; else compiled computes something else, e.g. a constant kept wider than
   eager rounds it to). A leaf whose reference is 0 everywhere (a gradient that cancels
   identically) has no boundaries: eager's values are its rounding residue.
2. `by_rounding_noise`: for ill-conditioned leaves (a result that cancels to ~0, a
   normalisation by a tiny deviation, a kink that rounding turns either way), the leaf passes
   iff ``rms(compiled - eager) <= SENSITIVITY_SLACK * rms(perturbed - noise_base)`` for the
   perturbed re-run or its mirror (every value moved the other way: a value on a kink that one
   sample leaves on one side, the mirror takes to the other): the compiler
   may move the result no further than rounding-level changes move eager (rounding.py makes
   the perturbed and noiseless decomposed re-runs; results that are exact, and the inputs, are
   not moved: no order or precision changes them). Boundary elements where compiled equals the
   reference are excused first, one by one, where the noise takes eager across too; the rest of
   the leaf is judged by the rms. NaN/inf placement is never excused, except compiled
   non-finite where the noise makes eager non-finite too (a sum that overflows in another order).
3. `by_near_ties`: for the indices an ordering operation takes of values within rounding of each
   other, the leaf passes iff, at every element compiled differs from eager, eager re-run with
   near-equal values taken in another order (reversed, or swapped two by two: running/ties.py)
   returns compiled's value.

Where the plain re-run does not reproduce eager, a third run tells why (`by_eager_spread`):
eager's own run-to-run spread (atomics), which compiled is judged against, or a call the
snapshot could not rebuild, which is named as the checker's limit and excuses nothing. Where a
leaf still fails after rules 1 and 2 though the re-run reproduced eager within the tolerance,
a few more eager runs look for nondeterminism that landed alike (an atomic accumulation ordered
one of two ways does so half the time): any run not equal to eager bit for bit is judged the
same way.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from typing import Any

import torch
from torch import Tensor

from pytest_torchcompile.judging.boundaries import (
    ILL_CONDITIONED,
    RESIDUE_ULPS,
    SENSITIVITY_SLACK,
    Boundaries,
)
from pytest_torchcompile.judging.closeness import (
    NOISE_ULPS,
    Scan,
    dense,
    distance,
    noise_floor,
    nonfinite_text,
    num,
    peak_text,
    rms,
    same_nonfinite,
    scan_leaf,
)
from pytest_torchcompile.judging.verdicts import Outcome, Verdict

REFERENCE_SLACK = 3.0
"""k in the float64-reference rule: compiled may be this many times eager's own worst error away."""

REFERENCE = "float64 reference"
NOISE = "eager's rounding noise"
TIES = "near ties"
SPREAD = "eager's run-to-run spread"
LIMIT = "checker's limit"
"""The rules' names, as outcomes and notes give them."""


_NO_BOUNDARIES = Boundaries()


def _answer(rule: str, verdict: Scan, lines: list[str], **more: Any) -> Outcome:
    """A rule's outcome: PASSED where `verdict` holds no mismatch after the rule, else FAILED."""
    passed = Verdict.FAILED if verdict.mismatched else Verdict.PASSED
    return Outcome(passed, rule, verdict, tuple(lines), **more)


def reproduces(again: Tensor, e: Tensor, rtol: float, atol: float) -> str:
    """How a plain eager re-run `again` fails to reproduce floating leaf `e`; "" when it does.

    Reproducing means agreeing up to the tolerance and the reduction-order noise floor, NaN and
    inf in the same places: the rules below use re-runs, and one that does not even reproduce
    eager proves nothing about the compiler.
    """
    if identical(again, e):  # a deterministic eager run: the common case, one comparison
        return ""
    scan = scan_leaf(again, e, rtol, atol, reference=e, slack=noise_floor(e, e.dtype))
    if not scan.mismatched:
        return ""
    worst = f" by up to {num(scan.abs_bad.value)}" if scan.value_mismatches else ""
    return f"two eager runs differ at {scan.mismatched} element(s){worst}"


def reference_slack(e: Tensor, r: Tensor) -> float:
    """What rule 1 allows compiled beyond the tolerance: 3x eager's own error over the leaf,
    plus the reduction-order floor."""
    return REFERENCE_SLACK * distance(e, r).value + noise_floor(r, e.dtype)


def reference_excess(c: Tensor, r: Tensor, rtol: float, atol: float, slack: float) -> Tensor:
    """How far compiled is past what rule 1 allows it (`slack`: `reference_slack`), element
    by element (float64, <= 0 where it is within; non-finite pairs count as 0)."""
    c64, r64 = c.detach().to(torch.float64), r.detach().to(torch.float64)
    allowed = atol + rtol * r64.abs() + slack
    excess = (c64 - r64).abs() - allowed
    return torch.where(excess.isfinite(), excess, 0.0)


def by_reference(
    e: Tensor,
    c: Tensor,
    r: Tensor,
    rtol: float,
    atol: float,
    plain: Scan,
    *,
    slack: float | None = None,
) -> Outcome:
    """Rule 1: compiled against the float64 reference `r`, allowed 3x eager's own error plus
    the reduction-order floor. `plain` is the verdict by the plain tolerance. `slack`: the
    whole leaf's, where `e` is a sample of its rows (eager's error elsewhere counts)."""
    eager_error = distance(e, r)
    floor = noise_floor(r, e.dtype)
    if slack is None:
        slack = REFERENCE_SLACK * eager_error.value + floor
    at = Boundaries.of(e, c, r, rtol, atol, slack)
    verdict = at.unexcused(scan_leaf(c, e, rtol, atol, reference=r, slack=slack))
    if not verdict.mismatched:  # the lines below explain a failure only
        return _answer(REFERENCE, verdict, [], boundaries=at)
    lines = [
        "  Judged against a float64 reference (eager re-run on inputs and state upcast):",
        f"    eager vs compiled:             {peak_text(plain.abs_all, e)}"
        f"{nonfinite_text(e, c, ('eager', 'compiled'))}",
        f"    eager vs float64 reference:    {peak_text(eager_error, e)}"
        f"{nonfinite_text(e, r, ('eager', 'reference'))}",
        f"    compiled vs float64 reference: {peak_text(distance(c, r), e)}"
        f"{nonfinite_text(c, r, ('compiled', 'reference'))}",
        f"    allowed: |compiled - reference| <= atol + rtol * |reference| + "
        f"{REFERENCE_SLACK:g} * {num(eager_error.value)} (eager's own error) + "
        f"{num(floor)} (reduction-order noise: {NOISE_ULPS:g} ulps of the leaf's rms) "
        f"with atol={num(atol)}, rtol={num(rtol)}",
        *at.lines,
    ]
    return _answer(REFERENCE, verdict, lines, boundaries=at)


def by_rounding_noise(
    e: Tensor,
    c: Tensor,
    noisy: Tensor,
    base: Tensor,
    verdict: Scan,
    at: Boundaries = _NO_BOUNDARIES,
    *,
    mirrored: bool = False,
    explained_before: Tensor | None = None,
) -> Outcome:
    """Rule 3: compiled may move the leaf no further than rounding noise moves eager: `noisy`
    is the perturbed decomposed re-run (`mirrored`: the same with every value moved the other
    way), `base` the same without noise. `verdict` is the verdict so far, kept where the rule
    does not excuse the leaf. Boundary elements compiled crossed to the float64 reference
    (`at`) are excused one by one where the noise explains eager's value there
    (`Boundaries.crossed_by_noise`), in this sample or, for the mirror, in the first
    (`explained_before`: a value on a kink moves across it in one direction only), and left out
    of the rms; any other crossed element is not rounding (compiled computes something else),
    and the rms excuses nothing then. Compiled NaN or infinite where eager is finite is excused
    only where the noise makes eager non-finite there too (a sum whose partial sums overflow in
    another order), in this sample or an earlier one; any other NaN/inf placement is never noise."""
    placed = verdict.mismatched - verdict.value_mismatches
    placement = _placement(e, c) if placed else None
    overflowed = _either(_overflowed(placement, noisy), explained_before)
    shown = _within(overflowed, placement)
    lines = [
        "  Judged by the same noise moved the other way (every value that moved up moved down):"
        if mirrored
        else "  Judged by eager's rounding noise (eager re-run with every operation's inexact "
        "results rounded to a neighbouring value, reductions by sqrt(terms) ulps, fused "
        "operations decomposed):",
    ]
    ill = at.wrong_by_noise(e, c, noisy, base)
    # The leaf's noise vouches only for what the element's own noise leaves unexplained.
    scattered = (
        at.scattered_by_noise(e, c, noisy, base) if _within(ill, at.wrong_at) < at.wrong else None
    )
    wrong_by_noise = _either(ill, scattered)
    explained = _either(
        _either(at.crossed_by_noise(e, noisy, base), wrong_by_noise), explained_before
    )
    crossed, wrong = _within(explained, at.crossed_at), _within(explained, at.wrong_at)
    either = " (in this sample or an earlier one)" if explained_before is not None else ""
    if placed:
        if shown < placed:
            lines.append(
                f"    NaN/inf placement differs at {placed - shown} element(s) where eager's "
                "rounding noise leaves eager finite: never noise"
            )
            return _answer(
                NOISE, verdict, lines, boundaries=at, explained=_either(explained, overflowed)
            )
        lines.append(
            f"    at {placed} element(s) compiled is NaN or infinite where eager is finite, and "
            "eager's rounding noise makes eager non-finite there too (partial sums of another "
            f"order overflow): within rounding{either}"
        )
        verdict = dataclasses.replace(verdict, mismatched=verdict.mismatched - placed)
        explained = _either(explained, overflowed)
    lines += _boundary_lines(at, crossed, wrong, either, scattered=scattered is not None)
    unexcused = at.crossed - crossed + at.wrong - wrong
    if unexcused:
        return _answer(
            NOISE, verdict, lines, boundaries=at, unexcused=unexcused, explained=explained
        )
    verdict = _rest_by_rms(e, c, noisy, base, verdict, explained, crossed + wrong, lines)
    return _answer(NOISE, verdict, lines, boundaries=at, explained=explained)


def by_near_ties(
    e: Tensor, c: Tensor, orders: Iterable[Tensor], rtol: float, atol: float, verdict: Scan
) -> Outcome:
    """Rule 3 of this module: `orders` are eager re-run with near-equal values taken in other
    orders (`running.ties`), read one after the other while some difference is unexplained.
    Compiled passes where, at every element it differs from eager, one of them returns
    compiled's value: the index a topk or argmin takes of values within rounding of each other,
    taken as a compiler rounding them otherwise may. Anything else compiled moved stands: these
    runs excuse orders, not values."""
    apart = ~_close(c, e, rtol, atol)
    lands = torch.zeros_like(apart)
    for reordered in orders:
        lands |= _close(c, reordered.to(c.device), rtol, atol)
        if not bool((apart & ~lands).any()):
            break
    missed = int((apart & ~lands).sum())
    count = int(apart.sum())
    heading = (
        "  Judged by eager with near-equal values taken in other orders (topk, sort, argmax, "
        "argmin, max and min taking values within rounding of each other otherwise, as a "
        "compiler rounding them otherwise may):"
    )
    if missed or not count:
        line = (
            f"    at {missed} of the {count} element(s) compiled differs from eager, no such "
            "order returns compiled's value: not a near tie"
        )
        return Outcome(Verdict.FAILED, TIES, verdict, (heading, line))
    line = (
        f"    at each of the {count} element(s) compiled differs from eager, eager taking "
        "near-equal values in another order returns compiled's value: excused"
    )
    passed = dataclasses.replace(verdict, mismatched=0, value_mismatches=0)
    return Outcome(Verdict.PASSED, TIES, passed, (heading, line))


def _close(a: Tensor, b: Tensor, rtol: float, atol: float) -> Tensor:
    """Element-wise: within the tolerance, NaN where the other is NaN, infinities equal."""
    if a.shape != b.shape:
        return torch.zeros(a.shape, dtype=torch.bool, device=a.device)
    a64, b64 = a.detach().to(torch.float64), b.detach().to(torch.float64)
    near = (a64 - b64).abs() <= atol + rtol * b64.abs()
    return near | (a64 == b64) | (a64.isnan() & b64.isnan())


def _boundary_lines(
    at: Boundaries, crossed: int, wrong: int, either: str, *, scattered: bool = False
) -> list[str]:
    """What rule 3 says of the boundary elements: those eager's rounding noise explains
    (`crossed`, `wrong` of them; `either`: in this sample or an earlier one; `scattered`: the
    wrong ones by the leaf's noise, `Boundaries.scattered_by_noise`) and those it leaves."""
    lines = []
    if wrong and scattered:
        lines.append(
            f"    at {wrong} boundary element(s) compiled gets wrong, by steps no larger than "
            f"{SENSITIVITY_SLACK:g} times eager's rounding noise moves this leaf's whole numbers "
            "elsewhere; that noise moves at least as many of them, some by more than "
            f"{ILL_CONDITIONED:g} times compiled's smallest step (a floor or threshold moves one "
            "step: no boundaries, but whole numbers an ill-conditioned choice lands on, such as "
            "indices drawn from weights rounding changes), within that noise"
            f"{either}: excused"
        )
    elif wrong:
        lines.append(
            f"    at {wrong} boundary element(s) compiled gets wrong, eager's rounding noise "
            f"moves eager by more than {ILL_CONDITIONED:g} times compiled's step (no boundary "
            f"but an ill-conditioned value, a sum whose large terms cancel), within that noise"
            f"{either}: excused"
        )
    if crossed:
        lines.append(
            f"    at {crossed} boundary element(s) eager's rounding noise crosses the boundary "
            "too, moves eager there by a third of its distance from it, or moves eager by more "
            f"than {RESIDUE_ULPS:g} units of its own value (a rounding residue"
            + (
                "; the float64 reference is 0 everywhere, so a residue shown at one element is "
                "the leaf's"
                if at.cancels
                else ""
            )
            + f"){either}: within rounding, excused"
        )
    if at.wrong > wrong:
        lines.append(
            f"    at {at.wrong - wrong} boundary element(s) compiled gets wrong, eager's "
            "rounding noise moves eager by a step at most: a floor, round, comparison or "
            "threshold compiled takes the wrong way, which no rounding excuses"
        )
    if at.crossed > crossed:
        lines.append(
            f"    at {at.crossed - crossed} boundary element(s) eager's value is exact: its "
            "rounding noise neither takes it across nor moves it near: compiled computes "
            "something else there (e.g. a constant kept wider than eager rounds it to), which "
            "no rounding excuses"
        )
    return lines


def _rest_by_rms(
    e: Tensor,
    c: Tensor,
    noisy: Tensor,
    base: Tensor,
    verdict: Scan,
    explained: Tensor | None,
    count: int,
    lines: list[str],
) -> Scan:
    """Rule 3's verdict on the leaf once the `count` boundary elements the noise `explained`
    are excused: the rest of it by the rms, without those elements on either side (its line
    added to `lines`)."""
    if count:
        verdict = dataclasses.replace(
            verdict,
            mismatched=max(verdict.mismatched - count, 0),
            value_mismatches=max(verdict.value_mismatches - count, 0),
        )
        if not verdict.mismatched:
            return verdict
        assert explained is not None
        keep = explained.to(c.device)
        c = torch.where(keep, e.detach().reshape(-1), c.detach().reshape(-1)).reshape(e.shape)
        flat = noisy.detach().reshape(-1)
        noisy = torch.where(keep, base.detach().reshape(-1), flat).reshape(base.shape)
    moved_by_compiler, moved_by_noise = rms(c, e), rms(noisy, base)
    lines.append(
        f"    rms |compiled - eager| {num(moved_by_compiler)}, rms |noisy - noiseless "
        f"re-run| {num(moved_by_noise)}; allowed: {SENSITIVITY_SLACK:g} * {num(moved_by_noise)}"
    )
    if moved_by_compiler <= SENSITIVITY_SLACK * moved_by_noise:
        verdict = dataclasses.replace(verdict, mismatched=0, value_mismatches=0)
    return verdict


def _placement(e: Tensor, c: Tensor) -> Tensor:
    """Flat mask: compiled NaN or infinite where eager is finite."""
    flat_e, flat_c = e.detach().reshape(-1), c.detach().reshape(-1).to(e.device)
    return flat_e.isfinite() & ~flat_c.isfinite()


def compiled_overflows(e: Tensor, c: Tensor) -> int:
    """How many elements compiled has NaN or infinite where eager is finite."""
    return int(_placement(e, c).sum())


def _overflowed(placement: Tensor | None, noisy: Tensor) -> Tensor | None:
    """Flat mask of the elements of `placement` (`_placement`: compiled non-finite where eager
    is finite) eager's rounding noise makes non-finite too; None where there are none."""
    if placement is None:
        return None
    shown = placement & ~noisy.detach().reshape(-1).to(placement.device).isfinite()
    return shown if bool(shown.any()) else None


def _either(mask: Tensor | None, other: Tensor | None) -> Tensor | None:
    return mask if other is None else other if mask is None else mask | other


def _within(mask: Tensor | None, among: Tensor | None) -> int:
    """How many elements of `among` `mask` holds (0 where either is None)."""
    return 0 if mask is None or among is None else int((mask & among).sum())


def by_eager_spread(
    name: str,
    e: Tensor,
    c: Tensor,
    samples: list[Tensor],
    rtol: float,
    atol: float,
    differs: str,
    alerted: Callable[[], bool] = lambda: False,
) -> Outcome:
    """A leaf that eager's re-runs `samples` (from the call's snapshot) do not all reproduce
    bit for bit (`differs` says how), told apart by the samples and by torch itself.

    Where two or more re-runs agree bit for bit with each other and none with the first eager
    run, and torch raises no nondeterminism alert for the call (`alerted`: an eager run under
    `torch.use_deterministic_algorithms(True, warn_only=True)` warned), the snapshot did not
    rebuild the call: the checker's limit, named as such, and nothing is excused. Otherwise
    eager is nondeterministic here (atomics, nondeterministic algorithms: re-runs may still
    agree with each other, the first run landing otherwise): compiled passes within the plain
    tolerance plus the largest difference between eager's runs, with a note naming the leaf
    and the spread.
    """
    agreeing = len(samples) > 1 and all(identical(samples[0], other) for other in samples[1:])
    if agreeing and not alerted():
        line = (
            f"  {len(samples)} plain eager re-runs from the checker's snapshot agree bit for bit "
            f"with each other but not with the first eager run ({differs}): the checker could not "
            "rebuild this call's state exactly. That is a limitation of the checker, not eager's "
            "nondeterminism nor a verdict on the compiler, so nothing is excused; please report "
            "it with the repro."
        )
        return _answer(LIMIT, scan_leaf(c, e, rtol, atol), [line])
    runs = [e, *samples]
    spread = max(distance(a, b).value for i, a in enumerate(runs) for b in runs[i + 1 :])
    verdict = scan_leaf(c, e, rtol, atol, reference=e, slack=spread)
    rule = (
        f"eager is nondeterministic here: {len(runs)} eager runs from one snapshot differ by up "
        f"to {num(spread)} ({differs})"
    )
    if not verdict.mismatched:
        note = f"{name}: {rule}; compiled is within that run-to-run spread"
        return _answer(SPREAD, verdict, [], note=note, nondeterministic=True)
    line = (
        f"  Judged against eager's run-to-run spread: {rule}; allowed: |compiled - eager| <= "
        f"atol + rtol * |eager| + {num(spread)}, and compiled is outside it at "
        f"{verdict.mismatched} element(s). To compare without eager's spread, call "
        "torch.use_deterministic_algorithms(True)."
    )
    return _answer(SPREAD, verdict, [line], nondeterministic=True)


def nondeterministic_text(how: str) -> str:
    """What a failure says where a re-run does not reproduce eager and no third run tells why."""
    return (
        f"A plain eager re-run from the same inputs and state does not reproduce eager's "
        f"result here ({how}): eager is nondeterministic, or the call could not be rebuilt "
        "exactly, so no rule excuses this difference. Seed the random number generators, or "
        "call torch.use_deterministic_algorithms(True)."
    )


def identical(a: object, b: object) -> bool:
    """Equal bit for bit (NaN equal to NaN, the same dtype and shape); other values by ==."""
    if isinstance(a, Tensor) or isinstance(b, Tensor):
        if not (isinstance(a, Tensor) and isinstance(b, Tensor)):
            return False
        if (a.dtype, a.shape) != (b.dtype, b.shape):
            return False
        a, b = dense(a), dense(b)
        return bool(torch.equal(a, b)) or bool(same_nonfinite(a, b).all())
    try:
        return bool(a == b)
    except Exception:
        return False
