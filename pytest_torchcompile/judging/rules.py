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
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor

from pytest_torchcompile.judging.closeness import (
    NOISE_ULPS,
    Scan,
    at_index,
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

REFERENCE_SLACK = 3.0
"""k in the float64-reference rule: compiled may be this many times eager's own worst error away."""

SENSITIVITY_SLACK = 3.0
"""k in the rounding-noise rule: compiled may move this many times as far as rounding noise does."""

RESIDUE_ULPS = 2.0
"""Rounding noise that moves a crossed element of eager's by more than this many units of the
element's own value shows that value to be rounding residue, not exact: an exact value moves by
the rounding of the last operations after it at most (a masked gradient's quotient: 1 unit)."""

ILL_CONDITIONED = 2.0
"""Rounding noise that moves eager by more than this many times compiled's whole step at a
boundary compiled gets wrong shows that no boundary is there: a floor or threshold moves by one
step at most under rounding noise (the floor of a softmax sum: 1 against 1), a sum of whole
numbers whose large terms cancel moves by its terms' rounding (an EMA's sum of 17 over values of
+-3.4e38: by ~1e32 against compiled's 9)."""


def _ulp(t: Tensor) -> Tensor:
    """One unit in the last place of each element of `t` in its own dtype (of the smallest
    normal number for 0 and subnormals)."""
    info = torch.finfo(t.dtype)
    wide = t.to(torch.float64).abs().clamp(min=info.tiny)
    return torch.exp2(torch.floor(torch.log2(wide))) * info.eps


@dataclass(frozen=True)
class Boundaries:
    """Where a failing leaf's float64 reference is a whole number (a floor, round, comparison or
    threshold of a reduction, a gradient a kink masks) and eager and compiled fall on different
    sides of it. Eager's error elsewhere on the leaf says nothing about such an element: one
    element on the wrong side of a boundary is a whole step off, so rule 1's slack (three times
    eager's worst error) would excuse any other.

    `wrong`: eager matches the reference and compiled, also a whole number, does not: compiled
    is wrong against the float64 reference, and no rule excuses it. `crossed`: compiled matches
    the reference and eager does not: rounding, if eager's own rounding noise crosses such
    boundaries too (rule 2, whose noise leaves exact results alone); otherwise eager's value is
    exact there, and compiled computes something else (a constant held in a wider precision
    than eager rounds it to).
    """

    wrong: int = 0
    crossed: int = 0
    excused: int = 0  # of these, how many rule 1's slack excused: counted as mismatched again
    lines: tuple[str, ...] = ()
    gap: float = 0.0  # the greatest |compiled - eager| among them, its flat index and relative
    at: int = 0
    relative_gap: float = 0.0
    crossed_at: Tensor | None = None  # flat mask of the crossed elements, where there are any
    answer: Tensor | None = None  # with it, the reference in the leaf's dtype (float64, flat)
    wrong_at: Tensor | None = None  # flat mask of the wrong elements, where there are any

    @classmethod
    def of(
        cls, e: Tensor, c: Tensor, r: Tensor, rtol: float, atol: float, slack: float
    ) -> Boundaries:
        if e.is_complex() or not e.numel():
            return cls()
        e64, c64, r64 = (t.detach().reshape(-1).to(torch.float64) for t in (e, c, r))
        rounded = r.detach().reshape(-1).to(e.dtype).to(torch.float64)  # the answer in e's dtype
        finite = e64.isfinite() & c64.isfinite() & r64.isfinite()
        apart = finite & ((c64 - e64).abs() > atol + rtol * e64.abs())
        # A whole number is a boundary only where the dtype also holds values between whole
        # numbers: from 1/eps up (128 in bfloat16, 2**24 in float32) every value is whole.
        fractional = r64.abs() < 1 / torch.finfo(e.dtype).eps
        whole = apart & fractional & (r64 == r64.round())
        wrong = whole & (e64 == rounded) & (c64 == c64.round()) & (c64 != rounded)
        crossed = whole & (c64 == rounded) & (e64 != rounded)
        close = (c64 - r64).abs() <= atol + rtol * r64.abs() + slack  # rule 1's excuse
        either = wrong | crossed
        gap = torch.where(either, (c64 - e64).abs(), 0.0)
        peak = int(gap.argmax()) if bool(either.any()) else 0
        lines = [
            _boundary_line(mask, e, e64, c64, r64, text)
            for mask, text in ((wrong, _WRONG), (crossed, _CROSSED))
            if bool(mask.any())
        ]
        return cls(
            int(wrong.sum()),
            int(crossed.sum()),
            int((either & close).sum()),
            tuple(lines),
            float(gap[peak]),
            peak,
            float(gap[peak] / e64[peak].abs()) if e64[peak] else 0.0,
            crossed_at=crossed if bool(crossed.any()) else None,
            answer=rounded if bool(crossed.any()) else None,
            wrong_at=wrong if bool(wrong.any()) else None,
        )

    def crossed_by_noise(self, e: Tensor, noisy: Tensor, base: Tensor) -> Tensor | None:
        """The crossed elements eager's own rounding noise explains: where it takes eager
        across the boundary too (the noisy re-run lands on the reference's whole number: both
        sides are within rounding of it), where it moves eager by at least
        1 / SENSITIVITY_SLACK of eager's distance from that number, or where it moves eager by
        more than RESIDUE_ULPS units of eager's own value (eager's value there is itself
        rounding residue, as a sum that cancels to exactly 0 in float64 leaves: a BatchNorm's
        conv bias gradient moved 3 and 41 ulps of itself, seen on the zoo); in a leaf whose
        reference is 0 everywhere, every crossed element once the noise explains one. None
        where there are none. Where the noise leaves eager's value alone, or moves it by a
        rounding of the value itself (a gradient a kink masks is a quotient rounded on either
        side: 1 ulp), eager's value is exact there and proves nothing."""
        if self.crossed_at is None or self.answer is None:
            return None
        flat_e, flat_noisy, flat_base = _flat64(self.answer.device, e, noisy, base)
        across = flat_noisy == self.answer
        noise = (flat_noisy - flat_base).abs()
        moved = SENSITIVITY_SLACK * noise >= (flat_e - self.answer).abs()
        ulp = _ulp(e.detach().reshape(-1)).to(device=self.answer.device, dtype=torch.float64)
        residue = noise > RESIDUE_ULPS * ulp
        explained = self.crossed_at & (across | moved | residue)
        if bool(explained.any()) and self.cancels:
            # A leaf that cancels to 0 everywhere in float64 (a BatchNorm's conv bias gradient)
            # is one residue per element: where the noise shows it at one, the elements it left
            # alone are residues of roundings it does not re-draw (seen: a float16 channel whose
            # every operation was exact on its rounded inputs), not values on a kink.
            explained = self.crossed_at
        return explained if bool(explained.any()) else None

    def wrong_by_noise(self, e: Tensor, c: Tensor, noisy: Tensor, base: Tensor) -> Tensor | None:
        """The wrong elements where no boundary is: eager's own rounding noise moves eager there
        by more than ILL_CONDITIONED times compiled's distance from it, so the whole number
        eager and the reference share is where an ill-conditioned value happened to land (a sum
        of whole numbers whose large terms cancelled in eager's order and absorbed some small
        ones in compiled's), not a floor or threshold, which rounding moves one step at most.
        None where there are none."""
        if self.wrong_at is None:
            return None
        flat_e, flat_c, flat_noisy, flat_base = _flat64(self.wrong_at.device, e, c, noisy, base)
        noise = (flat_noisy - flat_base).abs()
        ill = self.wrong_at & (noise > ILL_CONDITIONED * (flat_c - flat_e).abs())
        return ill if bool(ill.any()) else None

    @property
    def cancels(self) -> bool:
        """The reference is 0 at every element: the leaf cancels identically."""
        return self.answer is not None and bool((self.answer == 0).all())

    def unexcused(self, verdict: Scan) -> Scan:
        """`verdict` with the boundary elements rule 1 excused counted as mismatched again."""
        if not self.excused:
            return verdict
        abs_bad, rel_bad = verdict.abs_bad, verdict.rel_bad
        if self.gap > abs_bad.value:
            abs_bad = dataclasses.replace(abs_bad, value=self.gap, at=self.at)
        if self.relative_gap > rel_bad.value:
            rel_bad = dataclasses.replace(rel_bad, value=self.relative_gap, at=self.at)
        return dataclasses.replace(
            verdict,
            mismatched=verdict.mismatched + self.excused,
            value_mismatches=verdict.value_mismatches + self.excused,
            abs_bad=abs_bad,
            rel_bad=rel_bad,
        )


_WRONG = (
    "eager matches and compiled, also a whole number, does not: compiled is wrong against "
    "the float64 reference. Neither eager's error elsewhere nor its rounding noise excuses that, "
    f"unless the noise moves eager there by more than {ILL_CONDITIONED:g} times compiled's step "
    "(no boundary then, but an ill-conditioned value such as a sum whose large terms cancel)"
)
_CROSSED = (
    "compiled matches and eager does not: eager and compiled fall on either side of a "
    "boundary. That is rounding only where eager's value there is itself rounded, which its "
    "rounding noise shows by moving it (judged next); where eager's value is exact, no rounding "
    "moves it, and compiled computes something else (e.g. a constant kept wider than eager "
    "rounds it to)"
)


def _boundary_line(
    mask: Tensor, e: Tensor, e64: Tensor, c64: Tensor, r64: Tensor, text: str
) -> str:
    first = int(mask.nonzero()[0, 0])
    where = at_index(first, e)
    return (
        f"  At {int(mask.sum())} element(s) the float64 reference is a whole number (a floor, "
        f"round, comparison, threshold or masked gradient) that {text}; first{where}: eager "
        f"{e64[first].item()}, compiled {c64[first].item()}, reference {r64[first].item()}."
    )


@dataclass(frozen=True)
class Judgement:
    """A rule's verdict on one leaf: the element-wise verdict after the rule, and what the
    failure message (or, for a pass, the note) says about it."""

    verdict: Scan
    lines: list[str]
    note: str = ""
    nondeterministic: bool = False  # eager itself varies at this leaf
    boundaries: Boundaries = Boundaries()
    unexcused: int = 0  # crossed boundary elements no rounding explains: no rule excuses them
    # the crossed boundary elements rounding noise explained (rule 3), for the mirrored sample
    explained: Tensor | None = None

    @property
    def passed(self) -> bool:
        return not self.verdict.mismatched


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
) -> Judgement:
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
        return Judgement(verdict, [], boundaries=at)
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
    return Judgement(verdict, lines, boundaries=at)


def by_rounding_noise(
    e: Tensor,
    c: Tensor,
    noisy: Tensor,
    base: Tensor,
    verdict: Scan,
    at: Boundaries = Boundaries(),
    *,
    mirrored: bool = False,
    explained_before: Tensor | None = None,
) -> Judgement:
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
    another order), in this sample or the first; any other NaN/inf placement is never noise."""
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
    explained = _either(
        _either(at.crossed_by_noise(e, noisy, base), at.wrong_by_noise(e, c, noisy, base)),
        explained_before,
    )
    crossed, wrong = _within(explained, at.crossed_at), _within(explained, at.wrong_at)
    count = crossed + wrong
    if placed:
        if shown < placed:
            lines.append(
                f"    NaN/inf placement differs at {placed - shown} element(s) where eager's "
                "rounding noise leaves eager finite: never noise"
            )
            return Judgement(
                verdict, lines, boundaries=at, explained=_either(explained, overflowed)
            )
        lines.append(
            f"    at {placed} element(s) compiled is NaN or infinite where eager is finite, and "
            "eager's rounding noise makes eager non-finite there too (partial sums of another "
            "order overflow): within rounding"
            + (" (in this sample or the first)" if explained_before is not None else "")
        )
        verdict = dataclasses.replace(verdict, mismatched=verdict.mismatched - placed)
        explained = _either(explained, overflowed)
    if wrong:
        lines.append(
            f"    at {wrong} boundary element(s) compiled gets wrong, eager's rounding noise "
            f"moves eager by more than {ILL_CONDITIONED:g} times compiled's step: no boundary "
            "but an ill-conditioned value (a sum whose large terms cancel), within that noise"
            + (" (in this sample or the first)" if explained_before is not None else "")
            + ": excused"
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
            + ")"
            + (" (in this sample or the first)" if explained_before is not None else "")
            + ": within rounding, excused"
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
    unexcused = at.crossed - crossed + at.wrong - wrong
    if unexcused:
        return Judgement(verdict, lines, boundaries=at, unexcused=unexcused, explained=explained)
    if count:
        verdict = dataclasses.replace(
            verdict,
            mismatched=max(verdict.mismatched - count, 0),
            value_mismatches=max(verdict.value_mismatches - count, 0),
        )
        if not verdict.mismatched:
            return Judgement(verdict, lines, boundaries=at, explained=explained)
        # The rest of the leaf by the rms, without these elements on either side.
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
    return Judgement(verdict, lines, boundaries=at, explained=explained)


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


def _flat64(device: torch.device, *tensors: Tensor) -> tuple[Tensor, ...]:
    """Each tensor flattened, in float64, on `device`."""
    return tuple(t.detach().reshape(-1).to(device=device, dtype=torch.float64) for t in tensors)


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
) -> Judgement:
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
        return Judgement(scan_leaf(c, e, rtol, atol), [line])
    runs = [e, *samples]
    spread = max(distance(a, b).value for i, a in enumerate(runs) for b in runs[i + 1 :])
    verdict = scan_leaf(c, e, rtol, atol, reference=e, slack=spread)
    rule = (
        f"eager is nondeterministic here: {len(runs)} eager runs from one snapshot differ by up "
        f"to {num(spread)} ({differs})"
    )
    if not verdict.mismatched:
        note = f"{name}: {rule}; compiled is within that run-to-run spread"
        return Judgement(verdict, [], note=note, nondeterministic=True)
    line = (
        f"  Judged against eager's run-to-run spread: {rule}; allowed: |compiled - eager| <= "
        f"atol + rtol * |eager| + {num(spread)}, and compiled is outside it at "
        f"{verdict.mismatched} element(s). To compare without eager's spread, call "
        "torch.use_deterministic_algorithms(True)."
    )
    return Judgement(verdict, [line], nondeterministic=True)


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
