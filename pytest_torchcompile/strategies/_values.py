"""Values: the distributions, edge classes and special values a tensor's elements are drawn
from, kept inside the bounds and reproducible from a seed (:class:`Values`)."""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any, Literal, get_args

import torch
from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument

from pytest_torchcompile.strategies import _edges
from pytest_torchcompile.strategies._checks import Compact, Shape, check
from pytest_torchcompile.strategies._literals import program_literals
from pytest_torchcompile.strategies._swarm import Coins, weighted

SpecialKind = Literal["nan", "inf", "-inf", "-0.0", "subnormal", "max", "min"]
Distribution = Literal[
    "small", "normal", "wide", "full", "ties", "offsets", "near_limits", "exact_sums"
]
EdgeClass = Literal["ties", "offsets", "near_limits", "exact_sums"]
EDGE_CLASSES: tuple[EdgeClass, ...] = get_args(EdgeClass)


def _float_info(dtype: torch.dtype) -> torch.finfo:
    return torch.finfo(dtype)  # complex dtypes report their component's finfo


def _bounds(
    dtype: torch.dtype, min_value: float | None, max_value: float | None
) -> tuple[float | None, float | None]:
    """The bounds that apply to `dtype`: integers always have them, floats keep None as unbounded
    and round a bound toward the interior (0.1 is 0.0999756 in float16, below min_value=0.1).

    :raises InvalidArgument: no value of `dtype` lies between the bounds.
    """
    if dtype.is_floating_point or dtype.is_complex:
        low = None if min_value is None else _representable(min_value, dtype, up=True)
        high = None if max_value is None else _representable(max_value, dtype, up=False)
        # A bound past the dtype's range is met by none of its values on that side.
        below = low is not None and min_value is not None and low < min_value
        above = high is not None and max_value is not None and high > max_value
        if not (below or above) and (low is None or high is None or low <= high):
            return low, high
    else:
        iinfo = torch.iinfo(dtype)
        low_i = iinfo.min if min_value is None else max(math.ceil(min_value), iinfo.min)
        high_i = iinfo.max if max_value is None else min(math.floor(max_value), iinfo.max)
        if low_i <= high_i:
            return low_i, high_i
    raise InvalidArgument(
        f"no {dtype} value lies between min_value={min_value} and max_value={max_value}"
    )


def _representable(bound: float, dtype: torch.dtype, up: bool) -> float:
    """The value of `dtype` nearest `bound` on its inner side (`up`: at or above it), or the
    dtype's extreme where none is."""
    info = _float_info(dtype)
    real = dtype.to_real()
    rounded = torch.tensor(min(max(bound, info.min), info.max), dtype=torch.float64).to(real)
    if (float(rounded) < bound) if up else (float(rounded) > bound):
        toward = torch.tensor(math.inf if up else -math.inf, dtype=real)
        rounded = torch.nextafter(rounded, toward).clamp(info.min, info.max)
    return float(rounded)


def holds(dtype: torch.dtype, min_value: float | None, max_value: float | None) -> bool:
    """Whether a value of `dtype` lies between the bounds (a bool's are 0 and 1)."""
    if dtype == torch.bool:
        return any(
            (min_value is None or min_value <= v) and (max_value is None or v <= max_value)
            for v in (0, 1)
        )
    try:
        _bounds(dtype, min_value, max_value)
    except InvalidArgument:
        return False
    return True


def _special_value(
    kind: SpecialKind, dtype: torch.dtype, low: float | None, high: float | None
) -> float:
    if kind == "max":
        return high if high is not None else _float_info(dtype).max
    if kind == "min":
        return low if low is not None else _float_info(dtype).min
    if kind == "subnormal":
        return _float_info(dtype).smallest_normal / 2
    return float(kind)


def _special_kinds(
    dtype: torch.dtype,
    low: float | None,
    high: float | None,
    allow_nan: bool,
    allow_infinity: bool,
    allow_subnormal: bool,
) -> tuple[SpecialKind, ...]:
    """The special values that `dtype`, the bounds and the switches allow, in shrink order.

    Not the widest dtypes' own extremes (float64's +-1.8e308 where no bound is given): an
    overflow eager makes and compiled avoids is judged against a wider reference, float64 has
    none, and what is computed from it (a gradient after a BatchNorm whose variance overflowed
    in eager only) would differ with no way to tell which side is right."""
    if dtype == torch.bool:
        return ()
    if not (dtype.is_floating_point or dtype.is_complex):
        return ("max", "min")
    widest = dtype in _WIDEST
    wanted: dict[SpecialKind, bool] = {
        "nan": allow_nan and low is None and high is None,
        "inf": allow_infinity and high is None,
        "-inf": allow_infinity and low is None,
        "-0.0": True,
        "subnormal": allow_subnormal,
        "max": high is not None or not widest,
        "min": low is not None or not widest,
    }

    def inside(kind: SpecialKind) -> bool:
        value = _special_value(kind, dtype, low, high)
        return math.isnan(value) or (
            (low is None or low <= value) and (high is None or value <= high)
        )

    return tuple(kind for kind, on in wanted.items() if on and inside(kind))


def _fit(values: torch.Tensor, low: float | None, high: float | None) -> torch.Tensor:
    """Move values into [low, high], keeping their spread: reflect them at the bound they cross
    (so small values stay small), then wrap what is still outside, then clamp."""
    if low is not None:
        values = torch.where(values < low, low + (low - values), values)
    if high is not None:
        values = torch.where(values > high, high + (high - values), values)
    if low is not None and high is not None and high - low <= 2**62:
        span = high - low + (0 if values.is_floating_point() else 1)
        wrapped = (
            low + torch.remainder(values - low, span) if span else torch.full_like(values, low)
        )
        values = torch.where((values < low) | (values > high), wrapped, values)
    return values if low is None and high is None else values.clamp(low, high)


def _ordinary(dist: Distribution, n: int, integral: bool, gen: torch.Generator) -> torch.Tensor:
    """Unbounded values of a distribution: float64, or int64 when `integral`."""
    if dist == "small":
        return torch.randint(
            -3, 4, (n,), generator=gen, dtype=torch.int64 if integral else torch.float64
        )
    if integral:
        scale = {"normal": 100, "wide": 10_000}[dist]
        return torch.randint(-scale, scale + 1, (n,), generator=gen)
    if dist == "normal":
        return torch.randn(n, generator=gen, dtype=torch.float64)
    sign = torch.randint(0, 2, (n,), generator=gen, dtype=torch.float64) * 2 - 1
    return sign * torch.exp2(torch.rand(n, generator=gen, dtype=torch.float64) * 20 - 10)


@dataclass(frozen=True, repr=False)
class Values(Compact):
    """How a tensor's values are made: reproducible from a seed, with specials planted by position.

    `dist` is ``small`` (integers in [-3, 3], exact in every dtype), ``normal`` (standard normal;
    integers in [-100, 100]), ``wide`` (magnitudes 2**-10 to 2**10 with random signs; integers in
    [-10000, 10000]), ``full`` (integers over the dtype's whole range), or for floating and complex
    dtypes one of the edge classes of :mod:`pytest_torchcompile.strategies._edges`: ``ties``, ``offsets``,
    ``near_limits``, ``exact_sums``, whose per-position constants `steps` seeds (a tensor group
    shares it); `literals` are the program's own constants that ``ties`` also puts on its lattice.
    `positive` makes every value positive (magnitudes, 0 becoming 1) and `zeros` about half of
    them +0 (False for bool), both before the bounds. Values outside [`min_value`, `max_value`] or
    the dtype's range are wrapped or reflected inside it; float values too small to be normal in
    the dtype become zeros of their sign. Each entry of `specials` puts a special value at a flat
    position (in the real part for complex dtypes); ``max``/``min`` are the largest and smallest
    values the bounds and dtype allow.
    """

    dist: Distribution = "small"
    seed: int = 0
    specials: tuple[tuple[int, SpecialKind], ...] = ()
    min_value: float | None = None
    max_value: float | None = None
    steps: int = 0
    literals: tuple[float, ...] = ()
    positive: bool = False
    zeros: bool = False

    def generate(self, shape: Shape, dtype: torch.dtype) -> torch.Tensor:
        """A contiguous CPU tensor of `shape` and `dtype` holding these values."""
        n = math.prod(shape)
        gen = torch.Generator().manual_seed(self.seed)
        if dtype == torch.bool:
            # small: fair bits; normal: sparse (1 in 8 True); wide: dense (7 in 8).
            if self.dist in ("normal", "wide"):
                odds = 1 / 8 if self.dist == "normal" else 7 / 8
                flags = torch.rand(shape, generator=gen) < odds
            else:
                flags = torch.randint(0, 2, shape, generator=gen).bool()
            flags = flags | self.positive
            flags = flags & ~self._zeros(shape) if self.zeros else flags
            # The bounds last: min_value above 0 leaves True only, max_value below 1 False only.
            low, high = self.min_value, self.max_value
            return (flags | (low is not None and low > 0)) & (high is None or high >= 1)
        low, high = _bounds(dtype, self.min_value, self.max_value)
        if not (dtype.is_floating_point or dtype.is_complex):
            if self.dist == "full":
                raw = torch.randint(0, 256, (n * dtype.itemsize,), generator=gen, dtype=torch.uint8)
                ordinary = raw.view(dtype).long()
            else:
                ordinary = _ordinary(self.dist, n, True, gen)
            out = self._signs(ordinary, low, high).to(dtype)
        else:
            parts = self._signs(self._floats(shape, dtype, gen), low, high)
            parts = torch.where(parts.abs() < _float_info(dtype).smallest_normal, parts * 0, parts)
            if low is not None or high is not None:  # a zero made so may lie outside them
                parts = parts.clamp(low, high)
            out = (torch.complex(parts[:n], parts[n:]) if dtype.is_complex else parts).to(dtype)
        planted = out.real if dtype.is_complex else out  # the imaginary part stays in the bounds
        for position, kind in self.specials:
            planted[position] = _special_value(kind, dtype, low, high)
        return out.reshape(shape)

    def _signs(self, values: torch.Tensor, low: float | None, high: float | None) -> torch.Tensor:
        """Flat `values` made positive and sprinkled with zeros as switched, then fitted to the
        bounds, positive ones from above 0 (reflected and wrapped at 127, the magnitudes of a
        wide int8 came back negative about half the time)."""
        if self.zeros:
            values = torch.where(self._zeros(values.shape), torch.zeros_like(values), values)
        if not self.positive or (high is not None and high <= 0):  # no positive value fits
            return _fit(values, low, high)
        floor = 0 if values.is_floating_point() else 1
        fitted = _fit(values.abs(), floor if low is None else max(low, floor), high)
        return torch.where(fitted == 0, 1 if high is None else min(1, high), fitted)

    def _zeros(self, shape: Shape) -> torch.Tensor:
        """About half of the positions, from their own stream of `seed`."""
        return torch.rand(shape, generator=torch.Generator().manual_seed(self.seed + 1)) < 0.5

    def _floats(self, shape: Shape, dtype: torch.dtype, gen: torch.Generator) -> torch.Tensor:
        """Unbounded float64 values: real and imaginary parts, one after the other, if complex."""
        real = dtype.to_real()
        parts = 2 if dtype.is_complex else 1
        n = parts * math.prod(shape)
        if self.dist == "ties":
            return _edges.ties(n, self.seed, self.steps, real, self.literals)
        if self.dist == "offsets":
            return _edges.offsets(n, self.seed, self.steps, real)
        if self.dist == "near_limits":
            return _edges.near_limits(n, self.seed, real)
        if self.dist == "exact_sums":
            rows = (parts, *shape) if shape else (parts,)
            return _edges.exact_sums(rows, self.seed, self.steps, real)
        return _ordinary(self.dist, n, False, gen)


@dataclass(frozen=True)
class ValueOptions:
    """What :func:`tensors` was told about values, passed on to each draw."""

    min_value: float | None
    max_value: float | None
    specials: bool | None
    allow: tuple[bool, bool, bool]  # allow_nan, allow_infinity, allow_subnormal
    edges: tuple[EdgeClass, ...]  # the edge classes switched on
    signs: tuple[str, ...]  # "positive" and "zeros", where switched on

    def coins(self) -> Coins:
        """The value classes these options leave to the swarm, each with its odds: NaN and
        infinities mask other divergences, so by default they are on in one example of five."""
        coins: list[tuple[str, int, int]] = [(edge, 2, 3) for edge in self.edges]
        coins += [(sign, 2, 3) if sign == "positive" else (sign, 1, 2) for sign in self.signs]
        if self.specials is not False:
            if self.allow[0] or self.allow[1]:
                coins.append(("nan_inf", 1, 2 if self.specials else 4))
            coins.append(("specials", 1, 2 if self.specials else 3))
        return tuple(coins)


# Where edge classes are on, they take three floating tensors in four between them (ties more
# in a group, whose point is relations between tensors), the ordinary distributions the rest.
_EDGE_SHARE = 3  # the edge classes' weight against the ordinary distributions' 1


_ORDINARY: tuple[Distribution, ...] = ("small", "normal", "wide")
_WIDEST = (torch.float64, torch.complex128)


@functools.lru_cache(maxsize=4096)
def _distributions(
    inexact: bool, full: bool, on: tuple[EdgeClass, ...], ties: int = 1
) -> st.SearchStrategy[Any]:
    """The distributions a dtype draws from: the edge classes `on`, then the ordinary ones,
    ``small`` first among them (the shrink target, see `simplest_last`); `ties` weighs that class
    more."""
    ordinary = list(_ORDINARY)
    if not inexact:
        return st.sampled_from([*ordinary, "full"] if full else ordinary)
    weights = {e: ties if e == "ties" else 1 for e in on}
    edges = [(len(ordinary) * _EDGE_SHARE * w, e) for e, w in weights.items()]
    each = max(sum(weights.values()), 1)  # the edge classes' share is the same however many are on
    if not edges:
        return st.sampled_from(ordinary)
    return weighted(*edges, *((each, d) for d in ordinary))


_SEEDS = st.integers(0, 2**32 - 1)


@dataclass(frozen=True)
class Plan:
    """One distribution for the floating tensors of a group, and what they share."""

    dist: Distribution
    steps: int = 0
    literals: tuple[float, ...] = ()


@functools.lru_cache(maxsize=4096)
@st.composite
def _plans(draw: st.DrawFn, on: tuple[EdgeClass, ...], ties: int) -> Plan:
    """A distribution of `on` or an ordinary one, with the constants' seed a group shares and,
    for ties, the program's literals."""
    dist = draw(_distributions(True, False, on, ties))
    steps = draw(_SEEDS) if dist in _STEPPED else 0
    return Plan(dist, steps, draw(program_literals()) if dist == "ties" else ())


def group_plans(on: tuple[EdgeClass, ...]) -> st.SearchStrategy[Plan]:
    """One plan for every floating tensor of a group, so that their elements are related:
    multiples of one constant at each position, or around one offset. Ties are drawn three times
    as often as for one tensor: relations between tensors are the point of a group."""
    return _plans(on, ties=6)


@st.composite
def draw_values(
    draw: st.DrawFn,
    dtype: torch.dtype,
    n: int,
    options: ValueOptions,
    plan: Plan | None,
    on: frozenset[str],
) -> Values:
    if dtype == torch.bool:
        # As many choices as an ordinary float tensor's, so neither shrinks to the other by length.
        dist = draw(_distributions(False, False, ()))
        sign = draw(_sign(on, (True, True)))
        return Values(
            dist,
            draw(_SEEDS),
            min_value=options.min_value,
            max_value=options.max_value,
            positive=sign == "positive",
            zeros=sign == "zeros",
        )
    low, high = _bounds(dtype, options.min_value, options.max_value)
    fits = (high is None or high > 0, (low is None or low <= 0) and (high is None or high >= 0))
    sign = draw(_sign(on, fits))
    kinds = tuple(
        kind
        for kind in _special_kinds(dtype, low, high, *options.allow)
        if ("nan_inf" if kind in _NAN_INF else "specials") in on
        # All positive stays all positive (NaN aside): no int8 -128 or uint8 0 planted there.
        and (sign != "positive" or not _special_value(kind, dtype, low, high) <= 0)
    )
    planting = bool(kinds) and n > 0
    inexact = dtype.is_floating_point or dtype.is_complex
    # An overflow eager makes and compiled avoids is judged against a wider reference: float64
    # has none, so it draws no values at its limits (a NaN on one side would be no verdict).
    edges_on = tuple(
        e for e in options.edges if e in on and (e != "near_limits" or dtype not in _WIDEST)
    )
    if inexact and plan is not None and plan.dist in (*_ORDINARY, *edges_on):
        chosen = plan
    elif inexact:
        chosen = draw(_plans(edges_on, ties=1))
    else:
        chosen = Plan(draw(_distributions(False, "specials" in on, ())))
    seed = draw(_SEEDS)
    planted: list[tuple[int, SpecialKind]] = []
    if planting:
        # NaN and infinities, where most special-value bugs live, are drawn most often.
        weights = {"nan": 3, "inf": 2, "-inf": 2}
        spot = st.tuples(st.integers(0, n - 1), weighted(*((weights.get(k, 1), k) for k in kinds)))
        planted = draw(st.lists(spot, min_size=1, max_size=3))
    return Values(
        chosen.dist,
        seed,
        tuple(planted),
        options.min_value,
        options.max_value,
        chosen.steps,
        chosen.literals,
        sign == "positive",
        sign == "zeros",
    )


def _sign(on: frozenset[str], fits: tuple[bool, bool]) -> st.SearchStrategy[str | None]:
    """ "positive" or "zeros" where switched on and the bounds hold them: one of the two where
    both are (all values positive leaves no zeros), drawn."""
    signs = [s for s, fit in zip(SIGNS, fits, strict=True) if s in on and fit]
    return st.sampled_from(signs) if len(signs) > 1 else st.just(signs[0] if signs else None)


_STEPPED = ("ties", "offsets", "exact_sums")  # the classes whose constants a group shares
_NAN_INF = ("nan", "inf", "-inf")


def check_value_args(
    min_value: float | None, max_value: float | None, flags: dict[str, object]
) -> None:
    for name, bound in (("min_value", min_value), ("max_value", max_value)):
        check(
            bound is None or (isinstance(bound, int | float) and not math.isnan(bound)),
            f"{name}={bound!r} must be a number or None",
        )
    if min_value is not None and max_value is not None:
        check(min_value <= max_value, f"min_value={min_value} is larger than max_value={max_value}")
    for name, flag in flags.items():
        check(
            isinstance(flag, bool) or (name == "specials" and flag is None),
            f"{name}={flag!r} must be a bool",
        )


SIGNS = ("positive", "zeros")
