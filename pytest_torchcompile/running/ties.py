"""Near ties: the operations that order values, run as if near-equal values had come out the
other way round.

Which of two values a topk, sort, argmin or max takes first is decided by their last bits where
they are within rounding of each other: a compiler that rounds otherwise (another reduction
order for a distance, a fused multiply-add) may order them otherwise, and returns other indices
(the pairs a metric-learning miner keeps at two distances one unit apart; the code a vector
quantizer's argmin picks). Rounding noise moves each value by a hash of itself, so it cannot
swap every such pair. `reordered` computes an ordering operation with each group of near-equal
neighbours (in eager's order) taken in another order (`TieOrder`): eager's own answer, had it
rounded those values otherwise. A group of two has one other order; a longer one (two pairs of
equal distances a few units apart) may come out in any, so three orders are tried, and together
they take every member of a group of three, and each of a longer group's pairs, to each other's
place. Exactly equal values are a near tie too where torch leaves their order
open (topk; sort unless stable); argmax, argmin, max and min promise the first of equal values,
so a group of exactly equal values keeps eager's order there.
"""

from __future__ import annotations

from typing import Any, Literal

import torch

from pytest_torchcompile import _compat

NEAR_UNITS = 16.0
"""Values closer than this many units of the precision they were computed in (float32 for
float16 and bfloat16, which accumulate in it; at least two units of their own) are near equal:
the spread of a sum of a few hundred terms in another order (sqrt(256) units)."""

TieOrder = Literal["reversed", "pairs", "pairs shifted"]
"""How each group of near-equal neighbours is taken: reversed; swapped two by two from its
first member; swapped two by two from its second (the first stays)."""
TIE_ORDERS: tuple[TieOrder, ...] = ("reversed", "pairs", "pairs shifted")

_OPEN = frozenset({"topk", "sort"})  # the order of exactly equal values is left open
_FIRST = frozenset({"argmax", "argmin", "max", "min"})  # the first of equal values is promised
_DESCENDING = frozenset({"argmax", "max"})


def reordered(
    func: Any, args: tuple[Any, ...], kwargs: dict[str, Any], order: TieOrder = "reversed"
) -> Any:
    """The result of ordering operation `func` with each group of near-equal values taken in
    `order`; None where `func` orders nothing (or not along one dimension this reads: a stable
    sort, a reduction over several dimensions, a sparse or empty input), so that it runs as
    it is."""
    name = _compat.op_name(func)
    if name not in _OPEN | _FIRST:
        return None
    source = args[0] if args else None
    if (
        not isinstance(source, torch.Tensor)
        or source.layout != torch.strided
        or not source.numel()
        or source.is_complex()
        or source.dtype == torch.bool
    ):
        return None
    argument = _argument_reader(func, args, kwargs)
    dim = argument("dim")
    if name == "sort" and argument("stable"):
        return None
    if name in {"max", "min"} and not isinstance(dim, int):
        return None  # the whole-tensor reduction or the elementwise maximum: no index to take
    flat = dim is None  # argmax/argmin over the flattened input
    values = source.reshape(-1) if flat else source
    axis = 0 if flat else dim
    if not isinstance(axis, int) or not values.dim():
        return None
    if name == "sort":
        descending = bool(argument("descending"))
    elif name == "topk":
        descending = bool(argument("largest"))
    else:
        descending = name in _DESCENDING
    keepdim = bool(argument("keepdim"))
    actual = func(*args, **kwargs)
    given = actual[1] if isinstance(actual, tuple | list) else actual
    if flat:  # one index into the flattened input, whatever keepdim shaped it as
        given = given.reshape(1)
    elif name not in _OPEN and not keepdim:  # one index per row: along `axis` again
        given = given.unsqueeze(axis)
    indices = _tie_order(values, axis, descending, given, order, exact_ties=name in _OPEN)
    if indices is None:
        return None
    if name == "sort":
        return values.gather(axis, indices), indices
    if name == "topk":
        taken = indices.narrow(axis, 0, int(argument("k")))
        return values.gather(axis, taken), taken
    first = indices.narrow(axis, 0, 1)
    if flat:
        first = first.reshape([1] * source.dim() if keepdim else [])
    elif not keepdim:
        first = first.squeeze(axis)
    if name in {"argmax", "argmin"}:
        return first
    return values.gather(axis, first if keepdim else first.unsqueeze(axis)).reshape(
        first.shape
    ), first


def _argument_reader(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    return lambda name: _compat.argument(func, args, kwargs, name)


def _tie_order(
    values: torch.Tensor,
    axis: int,
    descending: bool,
    given: torch.Tensor,
    order: TieOrder,
    *,
    exact_ties: bool,
) -> torch.Tensor | None:
    """Indices along `axis` ordering `values` as eager did (`given`: the indices eager's
    operation returned, its first ones, in its order; the rest by value, equal values by index)
    except that each run of neighbours nearer than `NEAR_UNITS` to the next is taken in `order`
    (runs of exactly equal values only where `exact_ties`). None where a value is not finite (NaN
    orders apart from every rule here)."""
    if values.is_floating_point() and not bool(torch.isfinite(values).all()):
        return None
    moved = values.movedim(axis, -1)
    eager = _eager_order(moved, descending, given.movedim(axis, -1))
    ordered = moved.gather(-1, eager).to(torch.float64)
    gaps = (ordered[..., 1:] - ordered[..., :-1]).abs()
    near = gaps <= _nearness(values.dtype) * torch.maximum(
        ordered[..., 1:].abs(), ordered[..., :-1].abs()
    )
    if not exact_ties:
        near &= gaps > 0
    width = moved.shape[-1]
    positions = torch.arange(width, device=values.device).expand(moved.shape)
    edge = torch.ones_like(near[..., :1])
    starts = torch.cat([edge, ~near], dim=-1)
    ends = torch.cat([~near, edge], dim=-1)
    start = torch.where(starts, positions, -1).cummax(dim=-1).values
    last = torch.where(ends.flip(-1), positions, -1).cummax(dim=-1).values.flip(-1)
    end = width - 1 - last
    if order == "reversed":
        partner = start + end - positions
    else:  # two by two from the run's first member (or its second), a last odd one staying
        offset = positions - start - int(order == "pairs shifted")
        partner = torch.where(offset % 2 == 0, positions + 1, positions - 1)
        partner = torch.where((offset < 0) | (partner > end), positions, partner)
    return eager.gather(-1, partner).movedim(-1, axis)


def _eager_order(moved: torch.Tensor, descending: bool, given: torch.Tensor) -> torch.Tensor:
    """A whole order along the last dimension of `moved` that starts with the indices eager's
    operation returned (`given`, in its order: a topk's or sort's order of equal values is its
    own, not the index order) and goes on by value, equal values by index."""
    width, taken = moved.shape[-1], given.shape[-1]
    by_value = torch.sort(moved, dim=-1, descending=descending, stable=True).indices
    rank = torch.empty_like(by_value)
    steps = torch.arange(width, device=moved.device).expand(moved.shape)
    rank.scatter_(-1, by_value, steps + taken)  # after every index eager returned
    rank.scatter_(-1, given, steps[..., :taken])
    return torch.sort(rank, dim=-1, stable=True).indices


def _nearness(dtype: torch.dtype) -> float:
    """How near, relative to their magnitude, two values of `dtype` are near equal (0 for
    integers: only equal integers tie)."""
    if not dtype.is_floating_point:
        return 0.0
    computed = torch.float64 if dtype == torch.float64 else torch.float32
    return max(2 * torch.finfo(dtype).eps, NEAR_UNITS * torch.finfo(computed).eps)
