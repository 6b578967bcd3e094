"""Shapes: sizes compilers specialize on (0 and 1) and sizes around vector widths and block
sizes, alone, in broadcastable groups, in sequences that drive recompiles, and as size probes."""

from __future__ import annotations

import functools
import math

from hypothesis import strategies as st

from pytest_torchcompile.strategies._checks import (
    Shape,
    check,
    check_bounds,
    check_int,
    shape_value,
)
from pytest_torchcompile.strategies._swarm import Coins, coin, swarm, weighted

MAX_SIDE = 1025
MAX_NUMEL = 4096
# Sizes just below, at and above vector widths and block sizes, where tail loops and masks live.
_EDGE_SIDES = tuple(s + d for s in (16, 32, 64, 128, 256, 512, 1024) for d in (-1, 0, 1))


# Size classes of shapes(): many sides of 1 (a size Dynamo specializes on) and sides one past a
# multiple of 16 (a vector loop's tail of one) in one shape of two, large sides (around vector
# widths and block sizes, or any size: 16 elements and more, which vectorized loops need) in
# three of four (at two in three, an int8 tensor of 16 or more all-positive elements, where an
# Inductor amin bug sits, was in the 100 examples of 5 of seeds 0-9; now 8), an empty shape in
# one of four (an empty tensor checks little else).
_SIZE_CLASSES = ("one", "large", "odd", "empty")
_SIZE_COINS: Coins = (("one", 1, 2), ("large", 3, 4), ("odd", 1, 2), ("empty", 1, 4))
_ALL_SIZES = frozenset(_SIZE_CLASSES)
_ODD_SIDES = tuple(16 * k + 1 for k in range(1, 65))  # 17, 33, ... 1025


@functools.lru_cache(maxsize=4096)
def _sides(low: int, high: int, on: frozenset[str] = _ALL_SIZES) -> st.SearchStrategy[int]:
    """One dimension's size: small (2 to 9) or 1 always, 1 more often with "one" on, around a
    power of two or any size with "large", 16k + 1 with "odd", and 0 with "empty" (if `low` is
    0). Where no size is in range, every class is on.

    A coin picks between the classes on and the plain sizes (see `simplest_last`) and shrinks to
    the plain ones, where 1 comes first, so sizes shrink to 1, not 0: an empty tensor shows no
    wrong values.
    """
    classes: list[tuple[str, int, tuple[int, ...] | None]] = [
        ("one", 4, (1,)),
        ("empty", 1, (0,)),
        ("large", 6, _EDGE_SIDES),
        ("odd", 10, _ODD_SIDES),
        ("large", 3, None),  # any other size in range
    ]
    switched: list[tuple[int, tuple[int, ...] | None]] = []
    for name, weight, sizes in classes:
        inside = None if sizes is None else tuple(s for s in sizes if low <= s <= high)
        if name in on and (inside or (sizes is None and max(low, 2) <= high)):
            switched.append((weight, inside))
    small = tuple(s for s in range(2, 10) if low <= s <= high)
    plain = [(9, small)] if small else []
    one = [(1, (1,))] if low <= 1 <= high else []  # the shrink target, whatever is on
    if not (switched or plain or one):
        return _sides(low, high, _ALL_SIZES)
    simple = weighted(*one, *plain)  # 1 first: sizes shrink to 1, not 0
    if switched and (one or plain):
        total = sum(weight for weight, _ in switched)
        extra = sum(weight for weight, _ in [*one, *plain])
        buckets = coin(2 * total, 2 * total + extra).flatmap(
            lambda on: weighted(*switched) if on else simple
        )
    else:
        buckets = weighted(*switched) if switched else simple
    return buckets.flatmap(
        lambda sizes: st.integers(max(low, 2), high) if sizes is None else st.sampled_from(sizes)
    )


@st.composite
def _shapes(
    draw: st.DrawFn, min_dims: int, max_dims: int, min_side: int, max_side: int, max_numel: int
) -> Shape:
    # The rank first, so the shrinker lowers it before it switches size classes off: a shape
    # that needs many elements shrinks to one large side, not to many small ones.
    ndim = draw(st.sampled_from(range(min_dims, max_dims + 1)))  # flatter than integers()
    on = draw(swarm(_SIZE_COINS)) if ndim else frozenset()  # a size class needs a side
    if max_side == 0:
        return (0,) * ndim
    floor = max(min_side, 1)
    budget, sides = max_numel, []
    for remaining in reversed(range(ndim)):
        # Innermost dimensions are drawn first, so they get the room, as in real tensors.
        side = draw(_sides(floor, min(max_side, budget // floor**remaining), on))
        sides.append(side)
        budget //= side
    # Emptiness is decided once per shape, so it is as likely at every rank.
    if min_side == 0 and ndim and "empty" in on:
        sides[draw(st.integers(0, ndim - 1))] = 0
    return tuple(reversed(sides))


def _check_shape_args(
    min_dims: int, max_dims: int, min_side: int, max_side: int, max_numel: int
) -> None:
    check_int(min_dims, "min_dims", 0)
    check_int(max_dims, "max_dims", 0)
    check_bounds(min_dims, max_dims, "dims")
    check_int(min_side, "min_side", 0)
    check_int(max_side, "max_side", 0)
    check_bounds(min_side, max_side, "side")
    check_int(max_numel, "max_numel", 1)
    check(
        max(min_side, 1) ** max_dims <= max_numel,
        f"max_numel={max_numel} is too small for max_dims={max_dims} sides of at least "
        f"min_side={min_side}",
    )


def shapes(
    *,
    min_dims: int = 0,
    max_dims: int = 4,
    min_side: int = 0,
    max_side: int = MAX_SIDE,
    max_numel: int = MAX_NUMEL,
) -> st.SearchStrategy[Shape]:
    """Tensor shapes whose sizes are those compilers treat specially.

    Sides are 1 (a size Dynamo specializes on) or small (2 to 9); each shape switches on a random
    subset of four size classes: many sides of 1, large sides (around a vector width or block
    size, 15, 16, 17, 31, ... 1025, or any size in range), sides one past a multiple of 16 (17,
    33, ... 1025: a vector loop's tail of one) and, when `min_side` is 0, an empty shape (a side
    of 0, about one shape in six); a shape with a class on has a dimension. The product of the
    non-zero sides is at most `max_numel`, so tests stay fast.

    A shape has `min_dims` to `max_dims` dimensions, each of `min_side` to `max_side`.

    Shrinks to `min_dims` sides of ``max(min_side, 1)``: ``()`` by default, ``(1, 1)`` for two
    dimensions. An empty shape is one step further, so an input that fails only when empty
    shrinks to ``(0,)``.

    :raises InvalidArgument: a bound that is not a non-negative integer (`max_numel` at least
        1), a minimum above its maximum, or a `max_numel` too small for `max_dims` sides of
        `min_side`.

    Example::

        @given(
            x=tcst.tensors(
                dtypes=tcst.float_dtypes(), shapes=tcst.shapes(min_dims=2, max_dims=3, min_side=1)
            )
        )
        def test_matmul_t(compile_parity, x):  # matmul has no bool kernel
            compile_parity(lambda t: t @ t.mT, x)
    """
    _check_shape_args(min_dims, max_dims, min_side, max_side, max_numel)
    return _shapes(min_dims, max_dims, min_side, max_side, max_numel)


SHAPES = shapes()


@st.composite
def _shape_groups(
    draw: st.DrawFn, n: int, shapes: st.SearchStrategy[Shape], broadcast: bool
) -> tuple[Shape, ...]:
    base = draw(shapes)
    if not broadcast:
        return (base,) * n
    group = []
    for _ in range(n):
        # One shape in three is broadcast (the rest keep their rank and sides, which a layout
        # needs: a transposed operand has two sides other than 1); equal shapes are simplest.
        if not draw(coin(1, 3)):
            group.append(base)
            continue
        dropped = draw(st.integers(0, len(base)))
        ones = [draw(st.booleans()) for _ in base]
        group.append(tuple(1 if one else s for one, s in zip(ones, base, strict=True))[dropped:])
    return tuple(group)


def shape_groups(
    n: int, *, shapes: Shape | st.SearchStrategy[Shape] = SHAPES, broadcast: bool = True
) -> st.SearchStrategy[tuple[Shape, ...]]:
    """Groups of `n` shapes drawn around one base shape from `shapes`.

    With `broadcast`, one shape in three drops leading dimensions and sets others to 1, so the
    group is mutually broadcastable to the base shape; without it, all shapes are equal. `shapes` is a
    shape or a strategy of them (default :func:`shapes`). Shrinks to `n` copies of the base
    shape, which shrinks as `shapes` does.

    :raises InvalidArgument: `n` is below 1, or `shapes` is neither a strategy nor a sequence
        of non-negative integers.

    Example::

        @given(shapes=tcst.shape_groups(2))
        def test_add(compile_parity, shapes):
            a, b = (torch.randn(s) for s in shapes)
            compile_parity(torch.add, a, b)
    """
    check_int(n, "n", 1)
    if not isinstance(shapes, st.SearchStrategy):
        shapes = st.just(shape_value(shapes, "shapes"))
    return _shape_groups(n, shapes, broadcast)


@st.composite
def _shape_sequences(
    draw: st.DrawFn,
    base: st.SearchStrategy[Shape],
    min_side: int,
    max_side: int,
    max_numel: int,
    min_size: int,
    max_size: int,
) -> tuple[Shape, ...]:
    sequence = [draw(base)]
    for _ in range(draw(st.integers(min_size, max_size)) - 1):
        shape = list(sequence[-1])
        dim = draw(st.integers(0, len(shape) - 1))
        others = math.prod(max(s, 1) for i, s in enumerate(shape) if i != dim)
        shape[dim] = draw(_sides(min_side, min(max_side, max_numel // others)))
        sequence.append(tuple(shape))
    return tuple(sequence)


def shape_sequences(
    *,
    min_dims: int = 1,
    max_dims: int = 4,
    min_side: int = 0,
    max_side: int = MAX_SIDE,
    max_numel: int = MAX_NUMEL,
    min_size: int = 2,
    max_size: int = 4,
) -> st.SearchStrategy[tuple[Shape, ...]]:
    """Sequences of shapes of one rank where each shape differs from the one before in at most one
    dimension: calls that drive a compiled function through recompiles, automatic dynamic shapes
    and cache hits (a repeated shape). Shape bounds are as for :func:`shapes`; the sequence has
    `min_size` to `max_size` shapes.

    Shrinks to `min_size` shapes that all equal the shrunk :func:`shapes` base.

    :raises InvalidArgument: as :func:`shapes` does for the shape bounds, or `min_dims` or
        `min_size` below 1, or `min_size` above `max_size`.

    Example::

        @given(sequence=tcst.shape_sequences())
        def test_recompiles(compile_parity, sequence):
            for shape in sequence:  # one compiled function, driven through its guards
                compile_parity(torch.relu, torch.randn(shape))
    """
    check_int(min_dims, "min_dims", 1)
    _check_shape_args(min_dims, max_dims, min_side, max_side, max_numel)
    check_int(min_size, "min_size", 1)
    check_int(max_size, "max_size", 1)
    check_bounds(min_size, max_size, "size")
    base = _shapes(min_dims, max_dims, min_side, max_side, max_numel)
    return _shape_sequences(base, min_side, max_side, max_numel, min_size, max_size)


@st.composite
def _size_probes(
    draw: st.DrawFn, min_dims: int, max_dims: int, max_side: int, max_numel: int
) -> tuple[Shape, ...]:
    # The other sides leave at least 2 for the probed one.
    base = list(draw(_shapes(min_dims, max_dims, 1, max_side, max_numel // 2)))
    dim = draw(st.integers(0, len(base) - 1))
    others = math.prod(s for i, s in enumerate(base) if i != dim)
    on = draw(swarm(_SIZE_COINS))  # switched off while shrinking: the general size goes to 2
    general = draw(_sides(2, min(max_side, max_numel // others), on))
    sequence = []
    for size in draw(st.permutations([general, 1, 0])):
        base[dim] = size
        sequence.append(tuple(base))
    return tuple(sequence)


def size_probes(
    *, min_dims: int = 1, max_dims: int = 4, max_side: int = MAX_SIDE, max_numel: int = MAX_NUMEL
) -> st.SearchStrategy[tuple[Shape, ...]]:
    """Three shapes of one rank that differ in one dimension only, which takes the sizes 0, 1 and
    one above 1, in a drawn order: one test meets, on one compiled function, the two sizes
    Dynamo specializes and a general one. A graph compiled for a symbolic size (guarded against
    0 and 1, or under ``dynamic_dims="unbacked"`` run for them too) and the graphs specialized
    for 0 and 1 all run, and the recompiles between them are counted. The other dimensions
    are drawn as :func:`shapes` draws them, at least 1; bounds are as for :func:`shapes`.

    Shrinks to ``((2,), (1,), (0,))``: the general size first, then 1, then 0.

    :raises InvalidArgument: as :func:`shapes` does for the bounds, `min_dims` below 1, or a
        `max_side` or `max_numel` that leaves no size above 1 to probe.

    Example::

        @pytest.mark.compile_parity(dynamic_dims="unbacked")
        @given(sizes=tcst.size_probes(max_dims=2))
        def test_softmax(compile_parity, sizes):
            for shape in sizes:  # one compiled function meets 0, 1 and a general size
                compile_parity(lambda t: t.softmax(-1), torch.randn(shape))
    """
    check_int(min_dims, "min_dims", 1)
    _check_shape_args(min_dims, max_dims, 1, max_side, max_numel)
    check(max_side >= 2, f"max_side={max_side} leaves no size above 1 to probe")
    check(max_numel >= 2, f"max_numel={max_numel} leaves no size above 1 to probe")
    return _size_probes(min_dims, max_dims, max_side, max_numel)
