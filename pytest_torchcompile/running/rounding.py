"""Rounding noise: eager run as if every operation had rounded its result differently.

The float64 reference tells how far eager and compiled are from the exact answer, but not how far
a correct compiler may be. Where a result is ill-conditioned (a BatchNorm's bias gradient cancels
to exactly zero; a near-constant channel's normalisation divides a mean's rounding error by a tiny
standard deviation), the rounding of intermediate values shows up amplified, and eager's one error
sample bounds nothing. This mode estimates that noise: every floating result an ATen operation
computes is moved to a neighbouring value, up or down, and a reduction's result (n terms per
value) by about sqrt(n) units of the precision it accumulates in, the random-walk error of another
summation order (a plain sum: units of its largest input where terms cancel to less). The
direction is a hash of the value, so equal values move alike, as real rounding moves them (a
constant image stays constant). Only what was rounded moves: a result equal to the same
operation computed in float64 (the difference of two values that is itself representable) is
exact in any order and precision, and stays, as the inputs do (they are given, not computed),
except a plain sum whose terms are large enough to absorb small ones in another order; so
a compiler that moves a value sitting exactly on a kink is never excused as rounding. Fused operations can be decomposed into the primitives a
compiler would emit (its decomposition table), so that their internal roundings are exposed too.
This is Monte Carlo arithmetic at the granularity of ATen operations (Parker, 1997), used only to
re-judge a leaf that failed every cheaper rule.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

import torch

from pytest_torchcompile import _compat
from pytest_torchcompile.running.ties import TieOrder, reordered

# Multipliers of a 64-bit mixing hash (SplitMix64's, reduced below 2**63 for torch.int64).
_MIX = (0x1E3779B97F4A7C15, 0x3F58476D1CE4E5B9, 0x14D049BB133111EB)
_SALT = (1 << 62) - 1


# Operations that select or gather values, summing nothing: their result is one rounding at most
# however many values they read (an embedding row out of a large table is not a long sum).
_SELECTIONS = frozenset(
    {"embedding", "index_select", "gather", "index", "take", "masked_select", "take_along_dim"}
)

# Plain sums of their input's elements, whose other summation orders differ by units of the
# terms where those cancel. Not var, std or norms: their terms are deviations or squares, not
# the input, and a float32 var at a large offset accumulated in float32 is a real divergence.
_SUMS = frozenset({"sum", "nansum", "mean"})

# Sums of products (matrix products), and the argument holding the left factor: each result
# element sums k products, whose partial sums scale with the terms, not with the result, where
# they cancel (a squared distance |x|^2 + |y|^2 - 2 x.y of a point to itself): by their norm
# sqrt(sum (a b)^2), the size a random walk of them reaches (sum |a||b|, the size same-signed
# terms reach, is the result itself there), and sqrt(k) units of that is another order's error.
_PRODUCTS = {"mm": 0, "bmm": 0, "mv": 0, "dot": 0, "vdot": 0, "addmm": 1, "baddbmm": 1, "addmv": 1}


_BLOCKS = 8  # a product's running sum is read at eighths of k: where one sign's terms reach


def _accumulates(dtype: torch.dtype) -> torch.dtype:
    """The precision a sum of `dtype` accumulates in: float32 for float16 and bfloat16 too."""
    return torch.float64 if dtype == torch.float64 else torch.float32


def _moved(
    t: torch.Tensor,
    salt: int,
    terms: float,
    opposite: bool = False,
    magnitude: float | torch.Tensor = 0.0,
) -> torch.Tensor:
    """`t` with each element shifted up or down (by a hash of its value; the other way where
    `opposite`) and rounded back to its dtype: by one unit of its own precision, or for a sum of
    `terms` values per element by sqrt(terms) units of the precision it accumulates in (float32
    for float16 and bfloat16), the random-walk error of another summation order, if that is
    more. That error scales with the partial sums, not with the result: where terms of up to
    `magnitude` cancel (a sum of +-1e307 that leaves 1e3), the shift is that many units of
    `magnitude` where that is more than of the result (`magnitude`: one number, or one per
    element of `t`)."""
    wide = t.detach().to(torch.float64)
    bits = wide.view(torch.int64)
    # In place where it can be: on a large result each fresh buffer costs as much as the op.
    mixed = bits >> 29
    mixed.bitwise_xor_(bits).mul_(_MIX[0]).add_(salt * _MIX[1] & _SALT)
    mixed.bitwise_xor_(mixed >> 31).mul_(_MIX[2])
    sign = mixed.bitwise_right_shift_(40).bitwise_and_(1).to(torch.float64).mul_(2).sub_(1)
    if opposite:
        sign.neg_()
    accumulates = _accumulates(t.dtype)
    shift = max(torch.finfo(t.dtype).eps, torch.finfo(accumulates).eps * math.sqrt(terms))
    if terms > 1 and _positive(magnitude):
        scale = torch.as_tensor(magnitude, dtype=wide.dtype, device=wide.device)
        step = torch.maximum(wide.abs() * shift, scale * shift)
        step = torch.where(torch.isfinite(wide), step, 0.0)  # inf - inf would make a NaN
        return (wide + sign * step).to(t.dtype)
    return sign.mul_(shift).add_(1).mul_(wide).to(t.dtype)  # wide * (1 + sign * shift)


def _positive(magnitude: float | torch.Tensor) -> bool:
    """Whether a sum's scale is above 0 anywhere (one number, or one per element)."""
    return bool((torch.as_tensor(magnitude) > 0).any())


def _absorbs(result: torch.Tensor, magnitude: float | torch.Tensor) -> torch.Tensor:
    """Where a plain sum's terms are so large that one unit of the largest, in the precision it
    accumulates in, is more than one unit of the result: there a partial sum holding a large
    term absorbs small ones, so that another order leaves another result, however exactly the
    float64 sum of this order came out (+-3.4e38 * 0.1 and small whole numbers: 0 in float64
    and in eager's order, -2 in Inductor's on CUDA)."""
    accumulates = _accumulates(result.dtype)
    own = torch.finfo(result.dtype)
    unit = result.detach().abs().to(torch.float64).clamp(min=own.tiny) * own.eps
    return magnitude * torch.finfo(accumulates).eps > unit


def _overflowing(
    func: Any, args: tuple[Any, ...], kwargs: dict[str, Any], results: list[Any], *, averages: bool
) -> list[Any]:
    """A plain sum's results, NaN where they are finite and its positive or its negative terms
    add up past the largest value of the precision it accumulates in: some order of the sum
    overflows there (+-3.4e38 * 0.1 sixteen times each, as an EMA of an expanded row holding
    float32's extremes: finite in eager's order, NaN in Inductor's on CUDA), so eager could
    have been non-finite too."""
    source = args[0] if args else None
    if not isinstance(source, torch.Tensor) or source.layout != torch.strided:
        return results
    wide = source.detach().to(torch.float64)
    parts = []
    for part in (wide.clamp(min=0), wide.clamp(max=0)):
        try:
            total = func(part, *_widened(args[1:]), **_widened(kwargs))
        except Exception:  # a dtype argument the float64 part does not take
            return results
        if not isinstance(total, torch.Tensor):
            return results
        # a mean's terms add up to the mean times their count before the division
        count = source.numel() / max(total.numel(), 1) if averages else 1.0
        parts.append(total.abs() * count)
    out = []
    for value in results:
        if not isinstance(value, torch.Tensor) or value.shape != parts[0].shape:
            out.append(value)
            continue
        accumulates = _accumulates(value.dtype)
        # (a sum already infinite in this order stays as it is: every order overflows there)
        over = (torch.maximum(*parts) > torch.finfo(accumulates).max) & value.isfinite()
        out.append(torch.where(over, torch.nan, value) if bool(over.any()) else value)
    return out


def _magnitude(tensors: list[torch.Tensor]) -> float:
    """The largest finite magnitude among `tensors`' elements (0 where there is none)."""
    finite = [t.detach().abs()[torch.isfinite(t)] for t in tensors if t.numel()]
    return max((float(f.max()) for f in finite if f.numel()), default=0.0)


def _term_magnitudes(args: tuple[Any, ...], kwargs: dict[str, Any]) -> torch.Tensor | None:
    """The scale of a plain sum's partial sums, one per result element: the largest finite
    magnitude among its own terms (a row of exact zeros beside a row of +-800 is not moved by
    that row's scale); None where the summed dimensions cannot be read from the arguments
    (sum/nansum/mean over `dim`)."""
    source = args[0] if args else None
    dim = args[1] if len(args) > 1 else kwargs.get("dim")
    keepdim = args[2] if len(args) > 2 else kwargs.get("keepdim", False)
    dims = [dim] if isinstance(dim, int) else dim
    if (
        not isinstance(source, torch.Tensor)
        or source.layout != torch.strided
        or not source.numel()
        or not isinstance(dims, list | tuple)
        or not dims
        or not all(isinstance(d, int) for d in dims)
        or not isinstance(keepdim, bool)
    ):
        return None
    wide = source.detach().abs().to(torch.float64)
    wide = torch.where(torch.isfinite(wide), wide, 0.0)
    return torch.amax(wide, dim=list(dims), keepdim=keepdim)


def _product_terms(
    name: str, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[int, torch.Tensor] | None:
    """For a matrix product, the terms each result element sums (counted as `largest` is: the
    result's size times k) and the size its partial sums reach, per element, in float64: the
    norm of its terms (the square root of the same product of the arguments' squares: the size
    a walk of random-signed terms reaches) or the running sum over eighths of k (the size
    terms of one sign reach before others cancel them: cdist's -2 x.x before |x|^2 + |y|^2),
    whichever is more. Sum |a||b| takes every term as of one sign: it overstated a float32
    product of 512 random-signed terms 22 times, and excused a 1e-3 error in every output of
    an nn.Linear(512, 512). None for other operations or arguments this does not read."""
    left = _PRODUCTS.get(name)
    if left is None or len(args) <= left + 1 or not isinstance(args[left], torch.Tensor):
        return None
    factor, other = args[left], args[left + 1]
    if factor.layout != torch.strided or not factor.dim() or not isinstance(other, torch.Tensor):
        return None
    try:
        norm = func(*_squares(_widened(args)), **_squares(_widened(kwargs))).abs().sqrt()
        a, b = _widened(factor.detach()), _widened(other.detach())
        alpha, beta = kwargs.get("alpha", 1), kwargs.get("beta", 1)
        running = beta * _widened(args[0].detach()) if left else torch.zeros_like(norm)
        reach = torch.zeros_like(norm) + running.abs()
        k = factor.shape[-1]
        step = max(1, math.ceil(k / _BLOCKS))
        for start in range(0, k, step):
            rows = b[start : start + step] if b.dim() == 1 else b[..., start : start + step, :]
            running = running + alpha * torch.matmul(a[..., start : start + step], rows)
            reach = torch.maximum(reach, running.abs())
    except Exception:  # a dtype, layout or shape the float64 products do not take
        return None
    return norm.numel() * k, torch.maximum(norm, reach)


def _squares(value: Any) -> Any:
    """`value` with its floating tensors squared, through tuples, lists and dicts (scalars
    too: a product's alpha and beta, whose terms are alpha * a * b)."""
    if isinstance(value, torch.Tensor):
        return value.detach().square() if value.is_floating_point() else value
    if isinstance(value, int | float) and not isinstance(value, bool):
        return value * value
    if isinstance(value, tuple | list):
        return type(value)(_squares(item) for item in value)
    if isinstance(value, dict):
        return {key: _squares(item) for key, item in value.items()}
    return value


def _widened(value: Any) -> Any:
    """`value` with its floating tensors in float64, through tuples, lists and dicts."""
    if isinstance(value, torch.Tensor):
        return value.to(torch.float64) if value.is_floating_point() else value
    if isinstance(value, tuple | list):
        return type(value)(_widened(item) for item in value)
    if isinstance(value, dict):
        return {key: _widened(item) for key, item in value.items()}
    return value


def _floating_tensors(value: Any) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value] if value.is_floating_point() else []
    if isinstance(value, tuple | list):
        return [t for item in value for t in _floating_tensors(item)]
    if isinstance(value, dict):
        return [t for item in value.values() for t in _floating_tensors(item)]
    return []


class RoundingNoise(_compat.dispatch_mode_base()):  # type: ignore[misc]
    """A dispatch mode under which computed floating results carry rounding-level noise.

    Deterministic for one `seed`; `opposite` moves every value the other way: the mirrored
    sample. Where a difference of two rounded values sits exactly on a kink (a channel's
    interior minus its mean, 0 in bfloat16), one sample may leave it on one side; its mirror
    then takes it to the other. Views, in-place and out= operations are left alone (their
    result is an argument), as are results of operations with no floating tensor argument
    (constants are exact) and sparse results. With `noise=False` it only decomposes: the same
    program without the noise, the base the noise is measured from (so that a decomposition's
    own systematic difference from the fused kernel is never mistaken for noise). With `ties`,
    the operations that order values take near-equal ones in that other order (`running.ties`).
    """

    def __init__(
        self,
        seed: int,
        *,
        noise: bool = True,
        opposite: bool = False,
        ties: TieOrder | None = None,
        decompositions: Mapping[Any, Callable[..., Any]] | None = None,
    ) -> None:
        super().__init__()
        self.seed = seed
        self.noise = noise
        self.opposite = opposite
        self.ties = ties
        self.decompositions = decompositions or {}
        self.calls = 0

    def __torch_dispatch__(
        self,
        func: Any,
        types: Any,
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        kwargs = kwargs or {}
        if self.ties and (taken := reordered(func, args, kwargs, self.ties)) is not None:
            return taken
        decomposition = self.decompositions.get(func)
        if decomposition is not None:
            with self:  # the decomposition's own operations go through this mode
                result = decomposition(*args, **kwargs)
            if result is not NotImplemented:
                return result
        result = func(*args, **kwargs)
        inputs = _floating_tensors((args, kwargs))
        if not self.noise or not inputs or not _compat.computes(func):
            return result
        if any(t.is_nested or t.layout != torch.strided for t in inputs):
            return result  # a nested tensor's values get their noise from the ops it runs on them
        self.calls += 1
        salt = self.seed * 1_000_003 + self.calls
        name = _compat.op_name(func)
        selects = name in _SELECTIONS
        largest = 1 if selects else max(t.numel() for t in inputs)
        results = list(result) if isinstance(result, tuple | list) else [result]
        exact = _exact_in_float64(func, args, kwargs, results)
        magnitude: list[float | torch.Tensor] = []  # the terms' scale, where a result sums
        products = _product_terms(name, func, args, kwargs)
        if products is not None:
            largest, scale = products
            magnitude.append(scale)

        def move(value: Any, exact: torch.Tensor | None) -> Any:
            if (
                isinstance(value, torch.Tensor)
                and value.is_floating_point()
                and value.layout == torch.strided  # sparse values are left as they are
                and value.numel()
            ):
                terms = max(1.0, largest / value.numel())
                if terms > 1 and name in _SUMS and not magnitude:
                    own = _term_magnitudes(args, kwargs)
                    if own is not None and own.shape == value.shape:
                        magnitude.append(own)
                    else:  # the inputs' largest
                        magnitude.append(
                            _magnitude([t for t in inputs if t.layout == torch.strided])
                        )
                scale = magnitude[0] if magnitude else 0.0
                if name == "mean":  # the sum's error of another order, over the count
                    scale = scale / terms
                moved = _moved(value, salt, terms, self.opposite, scale)
                if exact is not None and _positive(scale):
                    exact = exact & ~_absorbs(value, scale)
                return moved if exact is None else torch.where(exact, value, moved)
            return value

        if name in _SUMS and largest > 1:
            results = _overflowing(func, args, kwargs, results, averages=name == "mean")
        moved = [move(value, mask) for value, mask in zip(results, exact, strict=True)]
        return type(result)(moved) if isinstance(result, tuple | list) else moved[0]


def _exact_in_float64(
    func: Any, args: tuple[Any, ...], kwargs: dict[str, Any], results: list[Any]
) -> list[torch.Tensor | None]:
    """For each result, where it equals the operation computed in float64 on the same arguments:
    no rounding happened there (a difference of representable values that is representable, a
    multiple by a power of two), so no other order or precision could change it, and it is left
    alone. None where that is unknown (float64 results, which nothing wider checks, included):
    everything is rounded then. Random operations are never recomputed (that would draw from the
    generator)."""
    unknown: list[torch.Tensor | None] = [None] * len(results)
    if torch.Tag.nondeterministic_seeded in getattr(func, "tags", ()):
        return unknown

    try:
        again = func(*_widened(args), **_widened(kwargs))
    except Exception:  # an operation without float64 support, or with a dtype it insists on
        return unknown
    agains = list(again) if isinstance(again, tuple | list) else [again]
    if len(agains) != len(results):
        return unknown
    return [
        a.eq(r)
        if isinstance(a, torch.Tensor)
        and isinstance(r, torch.Tensor)
        and a.dtype == torch.float64  # not a result converted to a dtype the operation names
        and a.shape == r.shape
        and r.is_floating_point()
        and r.dtype != torch.float64  # computed in float64 already: no wider check
        and r.layout == torch.strided
        else None
        for a, r in zip(agains, results, strict=True)
    ]
