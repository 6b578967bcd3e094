"""Memory layouts: where a tensor of a given shape sits in its storage (transposed, permuted,
sliced, offset, expanded, channels_last), independent of its values."""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Literal, TypeAlias, get_args

from hypothesis import strategies as st

from pytest_torchcompile.strategies._checks import Compact, Shape, check, check_int, shape_value
from pytest_torchcompile.strategies._swarm import Coins, simplest_last, weighted

LayoutKind = Literal[
    "contiguous",
    "transposed",
    "permuted",
    "sliced",
    "offset",
    "expanded",
    "channels_last",
    "channels_last_3d",
]
LAYOUT_KINDS: tuple[LayoutKind, ...] = get_args(LayoutKind)


@dataclass(frozen=True, repr=False)
class Layout(Compact):
    """Where a tensor of a given shape sits in memory, independent of its values.

    The tensor is a window on a dense buffer of extents ``starts + (size - 1) * steps + 1 + pads``
    per dimension, stored in `order` (logical dimensions from outermost to innermost in memory;
    None means row-major), beginning `offset` elements into the buffer. Dimensions in `expanded`
    have stride 0. ``Layout()`` is contiguous with offset 0.
    """

    order: Shape | None = None
    starts: Shape | None = None
    steps: Shape | None = None
    pads: Shape | None = None
    offset: int = 0
    expanded: Shape = ()

    def geometry(self, shape: Shape) -> tuple[Shape, int, int]:
        """(strides, storage offset, buffer size) of this layout for `shape`."""
        n = len(shape)
        order = self.order if self.order is not None else tuple(range(n))
        starts = self.starts if self.starts is not None else (0,) * n
        steps = self.steps if self.steps is not None else (1,) * n
        pads = self.pads if self.pads is not None else (0,) * n
        if (
            sorted(order) != list(range(n))
            or not len(starts) == len(steps) == len(pads) == n
            or min((*starts, *pads, self.offset), default=0) < 0
            or min(steps, default=1) < 1
            or not set(self.expanded) <= set(range(n))
        ):
            raise ValueError(f"{self!r} does not fit a tensor of shape {shape}")
        extents = [
            1 if d in self.expanded else starts[d] + (max(shape[d], 1) - 1) * steps[d] + 1 + pads[d]
            for d in range(n)
        ]
        dense, size = [0] * n, 1
        for d in reversed(order):
            dense[d] = size
            size *= extents[d]
        strides = tuple(0 if d in self.expanded else dense[d] * steps[d] for d in range(n))
        offset = self.offset + sum(starts[d] * dense[d] for d in range(n) if d not in self.expanded)
        return strides, offset, self.offset + size


ROW_MAJOR = Layout()


_MIN_RANK: dict[LayoutKind, int] = {"transposed": 2, "permuted": 3, "sliced": 1, "expanded": 1}
_RANK: dict[LayoutKind, int] = {"channels_last": 4, "channels_last_3d": 5}


def _applies(kind: LayoutKind, shape: Shape) -> bool:
    """Whether `kind` fits `shape`; a memory format only where it is not also contiguous (more
    than one channel, more than one spatial position, not empty)."""
    if kind in _RANK:
        rank = _RANK[kind]
        return len(shape) == rank and 0 not in shape and shape[1] > 1 and math.prod(shape[2:]) > 1
    return len(shape) >= _MIN_RANK.get(kind, 0)


@st.composite
def _sliced(draw: st.DrawFn, ndim: int, max_step: int) -> Layout:
    steps = [draw(st.integers(1, max_step)) for _ in range(ndim)]
    starts = tuple(draw(st.integers(0, 2)) for _ in range(ndim))
    pads = tuple(draw(st.integers(0, 2)) for _ in range(ndim))
    if max(steps) == 1 and not any(pads[1:]):
        steps[-1] = 2  # without a gap the window would be contiguous: that is the "offset" kind
    return Layout(
        starts=starts if any(starts) else None,
        steps=tuple(steps) if max(steps) > 1 else None,
        pads=pads if any(pads) else None,
    )


def _kind_layouts(
    kind: LayoutKind, shape: Shape, max_step: int, max_offset: int
) -> st.SearchStrategy[Layout]:
    ndim = len(shape)
    if kind == "transposed":
        # The last two dimensions other than 1: swapping a dimension of 1 moves nothing.
        wide = [d for d in range(ndim) if shape[d] != 1]
        first, second = wide[-2:] if len(wide) >= 2 else (ndim - 2, ndim - 1)
        order = list(range(ndim))
        order[first], order[second] = second, first
        return st.just(Layout(order=tuple(order)))
    if kind == "permuted":
        identity = list(range(ndim))
        return (
            st.permutations(identity)
            .filter(lambda p: p != identity)
            .map(lambda p: Layout(order=tuple(p)))
        )
    if kind == "sliced":
        return _sliced(ndim, max_step)
    if kind == "offset":
        return st.integers(1, max_offset).map(lambda offset: Layout(offset=offset))
    if kind == "expanded":
        # Broadcasting a dimension of size 1 changes nothing, so prefer the others.
        wide = [d for d in range(ndim) if shape[d] != 1] or list(range(ndim))
        dims = st.lists(st.sampled_from(wide), min_size=1, max_size=len(wide), unique=True)
        return dims.map(lambda ds: Layout(expanded=tuple(sorted(ds))))
    if kind == "channels_last":
        return st.just(Layout(order=(0, 2, 3, 1)))
    if kind == "channels_last_3d":
        return st.just(Layout(order=(0, 2, 3, 4, 1)))
    return st.just(ROW_MAJOR)


def _layout_strategy(
    shape: Shape, kinds: tuple[LayoutKind, ...], max_step: int, max_offset: int
) -> st.SearchStrategy[Layout]:
    applicable = [k for k in LAYOUT_KINDS if k in kinds and _applies(k, shape)]
    # Broadcast inputs and memory formats are the layouts real models use most after contiguous
    # ones, and the rarest by rank or size: drawn more often. A memory format applies to one
    # rank only, so it weighs most: 4-D inputs of 100 examples reach channels_last reliably.
    choices = [
        (4 if k.startswith("channels_last") else 2 if k == "expanded" else 1, k) for k in applicable
    ]
    return weighted(*choices or [(1, LAYOUT_KINDS[0])]).flatmap(
        lambda kind: _kind_layouts(kind, shape, max_step, max_offset)
    )


# Layout classes of tensors() and the kinds they draw; each is switched on in one example of two,
# transposed (where layouts and strides differ most) in two of three.
_LAYOUT_CLASSES: dict[str, tuple[LayoutKind, ...]] = {
    "transposed": ("transposed", "permuted"),
    "channels_last": ("channels_last", "channels_last_3d"),
    "sliced": ("sliced", "offset"),
    "expanded": ("expanded",),
}
# A kind's weight against contiguous (1) where its class is on: a memory format applies to one
# rank only, so it weighs most.
_SWARM_WEIGHTS: dict[LayoutKind, int] = {
    "transposed": 4,
    "permuted": 4,
    "sliced": 1,
    "offset": 1,
    "expanded": 2,
    "channels_last": 16,
    "channels_last_3d": 16,
}


def _layout_coins(kinds: tuple[LayoutKind, ...]) -> Coins:
    classes = _LAYOUT_CLASSES.items()
    odds = {"transposed": (2, 3)}
    return tuple(
        (name, *odds.get(name, (1, 2))) for name, members in classes if set(members) & set(kinds)
    )


@functools.lru_cache(maxsize=4096)
def _swarm_layouts(
    shape: Shape, kinds: tuple[LayoutKind, ...], on: frozenset[str]
) -> st.SearchStrategy[Layout]:
    """A layout of `kinds` whose class is on (or contiguous, if a kind), drawn by weight; where no
    class of `kinds` is on, contiguous if it is a kind, else any of `kinds` (as :func:`layouts`)."""
    open_kinds = [
        k
        for name, members in _LAYOUT_CLASSES.items()
        if name in on
        for k in members
        if k in kinds and _applies(k, shape)
    ]
    if not open_kinds and "contiguous" not in kinds:
        return _layout_strategy(shape, kinds, 3, 8)
    weighted = [(_SWARM_WEIGHTS[k], k) for k in LAYOUT_KINDS if k in open_kinds]
    contiguous: tuple[int, LayoutKind] | None = (1, "contiguous") if "contiguous" in kinds else None
    return simplest_last(weighted, contiguous).flatmap(
        lambda kind: _kind_layouts(kind, shape, 3, 8)
    )


def _kinds(kinds: LayoutKind | Collection[LayoutKind], name: str) -> tuple[LayoutKind, ...]:
    chosen = (kinds,) if isinstance(kinds, str) else tuple(kinds)
    check(
        chosen and all(k in LAYOUT_KINDS for k in chosen),
        f"{name}={kinds!r} must be one or more of {LAYOUT_KINDS}",
    )
    return chosen


def layouts(
    shape: Shape,
    *,
    kinds: LayoutKind | Collection[LayoutKind] = LAYOUT_KINDS,
    max_step: int = 3,
    max_offset: int = 8,
) -> st.SearchStrategy[Layout]:
    """Memory layouts for tensors of `shape`, one of `kinds` per draw among those that apply to the
    shape (``expanded`` twice and the channels_last kinds four times as likely as the others):

    - ``contiguous``: row-major, offset 0;
    - ``transposed``: the last two dimensions other than 1 (or the last two) swapped in memory
      (rank >= 2);
    - ``permuted``: any other non-row-major order of dimensions in memory (rank >= 3);
    - ``sliced``: a window with steps of up to `max_step`, leading and trailing gaps (rank >= 1);
    - ``offset``: contiguous but 1 to `max_offset` elements into its storage;
    - ``expanded``: some dimensions with stride 0, as ``expand`` makes them (rank >= 1);
    - ``channels_last`` (rank 4) and ``channels_last_3d`` (rank 5), where the shape has more than
      one channel and more than one spatial position (elsewhere they would be contiguous).

    If no kind applies to the shape the layout is contiguous. Shrinks to ``Layout()``: contiguous.

    :raises InvalidArgument: `shape` is not a sequence of non-negative integers, `kinds` names
        no kind or one not in :data:`LAYOUT_KINDS`, `max_step` is below 2 or `max_offset` below 1.

    Example::

        @given(x=tcst.tensors(layouts=functools.partial(tcst.layouts, max_step=5)))
        def test_exp(compile_parity, x):
            compile_parity(torch.exp, x)
    """
    shape = shape_value(shape, "shape")
    chosen = _kinds(kinds, "kinds")
    check_int(max_step, "max_step", 2)
    check_int(max_offset, "max_offset", 1)
    return _layout_strategy(shape, chosen, max_step, max_offset)


LayoutsArg: TypeAlias = (
    LayoutKind | Collection[LayoutKind] | Callable[[Shape], st.SearchStrategy[Layout]]
)


def layouts_arg(
    layouts: LayoutsArg,
) -> tuple[Callable[[Shape, frozenset[str]], st.SearchStrategy[Layout]], Coins]:
    """`layouts` as a strategy of the shape and the swarm's classes on, and the layout classes
    it leaves to the swarm (none for a function: it decides)."""
    if callable(layouts):
        return lambda shape, _: layouts(shape), ()
    kinds = _kinds(layouts, "layouts")
    return lambda shape, on: _swarm_layouts(shape, kinds, on), _layout_coins(kinds)
