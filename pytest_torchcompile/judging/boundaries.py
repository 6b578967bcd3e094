"""Boundaries: where a failing leaf's float64 reference is a whole number (a floor, round,
comparison or threshold) and eager and compiled fall on different sides of it.

One element on the wrong side of a boundary is a whole step off, so the rules judge such
elements one by one (docs/compared.md), not by the slack eager's error elsewhere allows: the
float64 reference's rule finds them (`Boundaries.of`), the rounding-noise rule asks whether
eager's own noise explains them (`Boundaries.crossed_by_noise`, `Boundaries.wrong_by_noise`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import torch
from torch import Tensor

from pytest_torchcompile.judging.closeness import Scan, at_index

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

    def scattered_by_noise(
        self, e: Tensor, c: Tensor, noisy: Tensor, base: Tensor
    ) -> Tensor | None:
        """Every wrong element, where eager's own rounding noise scatters this leaf's whole
        numbers as compiled does, only elsewhere: it moves at least as many of them by more
        than ILL_CONDITIONED times compiled's smallest step (a floor or threshold moves one
        step under rounding: these are no boundaries), and each step compiled takes is one the
        noise takes too, within SENSITIVITY_SLACK (the codes of a quantizer, which a flipped
        floor moves by its weight, 8, 40 or 200, excuse no code off by 1). Such whole numbers
        are where an ill-conditioned choice lands: indices `multinomial` draws from weights
        that hold `0 * log(d)` at a distance rounding leaves 0 or not (pytorch-metric-learning's
        DistanceWeightedMiner: compiled moves 27 of 32,756 indices by up to 26, eager's noise
        493 by up to 28). Which elements a rounding moves is chance there, so the noise
        vouches for the leaf, not element by element. None where it does not."""
        if self.wrong_at is None:
            return None
        flat_e, flat_c, flat_noisy, flat_base = _flat64(self.wrong_at.device, e, c, noisy, base)
        steps = (flat_c - flat_e).abs()[self.wrong_at]
        noise = torch.where(flat_base == flat_base.round(), (flat_noisy - flat_base).abs(), 0.0)
        far = int((noise > ILL_CONDITIONED * steps.min()).sum())
        if far < steps.numel():
            return None
        moves = torch.unique(noise[noise > 0])  # sorted
        low = steps / SENSITIVITY_SLACK
        nearest = moves[torch.searchsorted(moves, low).clamp(max=moves.numel() - 1)]
        taken = (nearest >= low) & (nearest <= SENSITIVITY_SLACK * steps)
        return self.wrong_at if bool(taken.all()) else None

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


def _flat64(device: torch.device, *tensors: Tensor) -> tuple[Tensor, ...]:
    """Each tensor flattened, in float64, on `device`."""
    return tuple(t.detach().reshape(-1).to(device=device, dtype=torch.float64) for t in tensors)
