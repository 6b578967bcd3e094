"""Value distributions that put inputs where compilers turn out to differ from eager.

Random normal values almost never sit exactly on a discontinuity, share a large offset or fill a
dtype's range, yet real miscompiles live there (each class from a real upstream report):

- `ties`: values on a lattice ``k * step`` (k in -2..2, zeros of either sign), `step` a short
  decimal constant of the kind programs are written with (1, 0.1, 0.5, ...), or one of the
  program's own literals that Hypothesis collected, rounded to the dtype: equal elements, +-0, the
  kinks of relu/clamp/hinge/abs/max, and tensors of one group whose elements differ by exactly
  such a constant (a bfloat16 ``margin_ranking_loss`` gradient is wrong exactly where ``x1 - x2``
  equals the margin);
- `offsets`: a large common offset with a unit spread, the offset a few bits short of the dtype's
  precision (about 1e5 in float32), where a variance or a normalisation cancels;
- `near_limits`: magnitudes whose squares, or sums of a few squares, leave the dtype's range though
  the values do not (about 2e18 to 4e19 in float32), where a variance or a norm overflows only if
  computed naively;
- `exact_sums`: rows (along the last dimension) of decimal multiples of a step whose exact sum is an
  integer, so that a row sum lands within a rounding step of an integer boundary.

Each function returns float64 values for one tensor's `n` stored elements, reproducible from
`seed`; `steps` seeds the per-position constants (and the offset), which the tensors of one group
share, so their elements at one position are multiples of one constant (or share one offset).
"""

from __future__ import annotations

import math

import torch

STEPS = (1.0, 0.1, 0.5, 0.2, 0.01, 0.3, 0.05, 0.001)
"""The constants of `ties`, in shrink order: 1 makes the lattice small integers."""

_STEP_WEIGHTS = (2.0, 3.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0)  # the commonest literals most often

_SUM_STEPS = tuple(s for s in STEPS if (1 / s) == round(1 / s))  # steps that divide 1 exactly

LITERAL_WEIGHT = 2.0
"""Each program literal's weight on the lattice, as the commonest steps' (1 has 2, 0.1 has 3),
while the literals together weigh no more than the steps: a program of many literals shares
that weight among them, and the common constants keep half the lattice."""


def _generator(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _signs(n: int, gen: torch.Generator) -> torch.Tensor:
    return torch.randint(0, 2, (n,), generator=gen, dtype=torch.float64) * 2 - 1


def _constants(
    n: int,
    steps: int,
    table: tuple[float, ...],
    dtype: torch.dtype,
    literals: tuple[float, ...] = (),
) -> torch.Tensor:
    """One constant of `table` or `literals` per position, rounded to `dtype` (as a program's
    literal is); each of the `literals` weighs `LITERAL_WEIGHT`, or their share of the steps'
    weight where that is less."""
    weights = list(_STEP_WEIGHTS[: len(table)])
    if literals:
        weights += [min(LITERAL_WEIGHT, sum(weights) / len(literals))] * len(literals)
    picked = torch.multinomial(
        torch.tensor(weights, dtype=torch.float64),
        max(n, 1),
        replacement=True,
        generator=_generator(steps),
    )
    return torch.tensor(table + literals, dtype=dtype).to(torch.float64)[picked[:n]]


def ties(
    n: int, seed: int, steps: int, dtype: torch.dtype, literals: tuple[float, ...] = ()
) -> torch.Tensor:
    """``k * step`` with k = j + d in -2..2: exact in `dtype`, with zeros of either sign. j in
    -1..1 comes from `steps`, d in -1..1 from `seed`, so two tensors of one group are equal at a
    third of the positions they share and differ by exactly +step at two ninths. `step` is one of
    `STEPS` or of the program's `literals` (positive floats) at each position."""
    j = torch.randint(-1, 2, (n,), generator=_generator(steps + 1), dtype=torch.float64)
    gen = _generator(seed)
    k = j + torch.randint(-1, 2, (n,), generator=gen, dtype=torch.float64)
    zero_sign = _signs(n, gen)
    values = k * _constants(n, steps, STEPS, dtype, literals)
    return torch.where(k == 0, zero_sign * 0.0, values)


def _precision_bits(dtype: torch.dtype) -> int:
    return round(-math.log2(torch.finfo(dtype).eps)) + 1


def offsets(n: int, seed: int, steps: int, dtype: torch.dtype) -> torch.Tensor:
    """Unit normal values around a common offset of +-2**(p - j), j in 4..10, p the dtype's
    precision in bits (float32: 2**14 to 2**20), at least 8; `steps` picks the offset."""
    pick = _generator(steps)
    j = int(torch.randint(4, 11, (), generator=pick))
    offset = float(_signs(1, pick)) * 2.0 ** max(_precision_bits(dtype) - j, 3)
    return offset + torch.randn(n, generator=_generator(seed), dtype=torch.float64)


def near_limits(n: int, seed: int, dtype: torch.dtype) -> torch.Tensor:
    """Magnitudes 2**(e/2 - 3) to 2**(e/2 + 1), e the dtype's largest exponent, random signs
    (float32: about 2e18 to 4e19): the values fit, the largest squares do not, and a sum of a
    few squares does not, while a mean of squares (a variance) mostly still does."""
    gen = _generator(seed)
    half = math.log2(torch.finfo(dtype).max) / 2
    exponents = half - 3 + 4 * torch.rand(n, generator=gen, dtype=torch.float64)
    return _signs(n, gen) * torch.exp2(exponents)


def exact_sums(shape: tuple[int, ...], seed: int, steps: int, dtype: torch.dtype) -> torch.Tensor:
    """Rows along the last dimension of multiples ``m * step`` (m small) whose exact sum is an
    integer: the last element of each row takes up the remainder. One step per row."""
    n = math.prod(shape)
    width = shape[-1] if shape else 1
    rows = n // width if width else 0
    gen = _generator(seed)
    m = torch.randint(-3, 4, (rows, width), generator=gen, dtype=torch.float64)
    step = _constants(rows, steps, _SUM_STEPS, torch.float64)[:, None]
    per_unit = torch.round(1 / step)
    if width:
        remainder = torch.remainder(m.sum(-1, keepdim=True), per_unit)
        # Take the remainder off, or add what is missing to the next integer: whichever is less.
        m[:, -1:] -= torch.where(remainder > per_unit / 2, remainder - per_unit, remainder)
    return (m * step).reshape(-1)
