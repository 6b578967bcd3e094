"""Hypothesis strategies for tensors that reach the inputs where compilers go wrong.

Generated tensors are deliberately unlike the contiguous float32 tensors with offset 0 that tests
usually build: shapes favour the sizes compilers specialize on (0 and 1) and sizes around vector
widths and block sizes, layouts cover transposes, slices with gaps, storage offsets, zero strides and
channels_last, dtypes include integers and bool, and values are all positive, many zeros, hold NaN,
infinities, -0.0, subnormals or extremes, or come from an edge class (`edges`): ties on a lattice
of common constants and the program's own literals, a large offset, magnitudes whose squares
overflow, rows that sum to a whole number.

The classes are drawn as a swarm (Groce et al., "Swarm Testing", ISSTA 2012): each example
switches a random subset of them on and draws only from those, so classes meet (a transposed
int8 tensor of positive values) and adding a class does not starve the others;
benchmarks/draws.py measures how often each is drawn. Everything shrinks toward no class on:
float32, contiguous, offset 0, small and low rank, so a failure ends on the simplest input that
still diverges.

Modelled on ``hypothesis.extra.numpy``: plural nouns, keyword-only ``min_``/``max_`` bounds, eager
validation raising ``InvalidArgument`` that names ``arg=value``.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import math
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias, TypedDict, TypeVar, Unpack, get_args

import torch
from hypothesis import currently_in_test_context, note
from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument

from pytest_torchcompile import _compat
from pytest_torchcompile.judging import edges
from pytest_torchcompile.tensor_text import describe

__all__ = [
    "BOOL_DTYPES",
    "COMPLEX_DTYPES",
    "EDGE_CLASSES",
    "FLOAT_DTYPES",
    "INTEGER_DTYPES",
    "LAYOUT_KINDS",
    "EdgeClass",
    "Layout",
    "LayoutKind",
    "Shape",
    "SpecialKind",
    "TensorOptions",
    "TensorSpec",
    "Values",
    "boolean_dtypes",
    "build_tensor",
    "complex_dtypes",
    "describe",
    "dtypes",
    "float_dtypes",
    "integer_dtypes",
    "layouts",
    "shape_groups",
    "shape_sequences",
    "shapes",
    "size_probes",
    "supported_dtypes",
    "tensor_groups",
    "tensors",
]

T = TypeVar("T")
Shape: TypeAlias = tuple[int, ...]
DeviceLike: TypeAlias = str | torch.device

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

SpecialKind = Literal["nan", "inf", "-inf", "-0.0", "subnormal", "max", "min"]
Distribution = Literal[
    "small", "normal", "wide", "full", "ties", "offsets", "near_limits", "exact_sums"
]
EdgeClass = Literal["ties", "offsets", "near_limits", "exact_sums"]
EDGE_CLASSES: tuple[EdgeClass, ...] = get_args(EdgeClass)

# Each family in shrink order: the first dtype is the simplest.
FLOAT_DTYPES = (torch.float32, torch.float64, torch.float16, torch.bfloat16)
INTEGER_DTYPES = (torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8)
BOOL_DTYPES = (torch.bool,)
COMPLEX_DTYPES = (torch.complex64, torch.complex128)
_ALL_DTYPES = FLOAT_DTYPES + INTEGER_DTYPES + BOOL_DTYPES + COMPLEX_DTYPES

# Dtypes a device type lacks; a device type not listed supports them all.
_UNSUPPORTED: dict[str, frozenset[torch.dtype]] = {
    "mps": frozenset({torch.float64, torch.complex64, torch.complex128}),
}

MAX_SIDE = 1025
MAX_NUMEL = 4096
# Sizes just below, at and above vector widths and block sizes, where tail loops and masks live.
_EDGE_SIDES = tuple(s + d for s in (16, 32, 64, 128, 256, 512, 1024) for d in (-1, 0, 1))


def _check(ok: object, message: str) -> None:
    if not ok:
        raise InvalidArgument(message)


def _weighted(*choices: tuple[int, T]) -> st.SearchStrategy[T]:
    """Draw `value` with probability proportional to `weight`; the first choice is the shrink target."""
    return st.sampled_from([value for weight, value in choices for _ in range(weight)])


@functools.lru_cache(maxsize=4096)
def _coin(on: int, out_of: int) -> st.SearchStrategy[bool]:
    """True in `on` draws of `out_of`; shrinks to False."""
    return _weighted((out_of - on, False), (on, True))


Coins: TypeAlias = tuple[tuple[str, int, int], ...]
"""Swarm classes, each switched on in `on` examples `out_of`: (name, on, out_of)."""


@functools.lru_cache(maxsize=4096)
def _swarm(coins: Coins) -> st.SearchStrategy[frozenset[str]]:
    """The classes switched on for one example: a swarm (Groce et al., "Swarm Testing", ISSTA
    2012). Drawing every class in every example at a small rate lets each new class dilute the
    others, and a feature that masks another (a NaN over a wrong value) is in nearly every
    example; switching a random subset on per example and drawing only from it keeps every class
    frequent and lets classes meet. Shrinks to no class on."""
    names = tuple(name for name, _, _ in coins)
    return st.tuples(*(_coin(on, out_of) for _, on, out_of in coins)).map(
        lambda bits: frozenset(name for name, on in zip(names, bits, strict=True) if on)
    )


def _simplest_last(
    classes: Sequence[tuple[int, T]], simplest: tuple[int, T] | None
) -> st.SearchStrategy[T]:
    """The classes a swarm switched on, weighted, and then the `simplest` choice; the simplest
    alone where none is on.

    Hypothesis replays mutated and misaligned choice sequences with each choice out of range
    replaced by the first one, which makes the first choice of a list several times as common
    as its weight says: kept first, the simplest would crowd out the classes switched on. Where
    none is on, it comes first, so shrinking (which switches classes off first) still ends on it.
    """
    if not classes and simplest is not None:
        return st.just(simplest[1])
    return _weighted(*classes, *([simplest] if simplest is not None else []))


def _strategy(value: T | st.SearchStrategy[T]) -> st.SearchStrategy[T]:
    return value if isinstance(value, st.SearchStrategy) else st.just(value)


def _check_int(value: object, name: str, minimum: int) -> int:
    _check(
        isinstance(value, int) and not isinstance(value, bool) and value >= minimum,
        f"{name}={value!r} must be an integer >= {minimum}",
    )
    return value  # type: ignore[return-value]


def _check_bounds(low: int, high: int, name: str) -> None:
    _check(low <= high, f"min_{name}={low} is larger than max_{name}={high}")


def _shape_value(shape: object, name: str) -> Shape:
    _check(
        isinstance(shape, Sequence)
        and all(isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in shape),
        f"{name}={shape!r} must be a sequence of integers >= 0",
    )
    return tuple(shape)  # type: ignore[arg-type]


def _device_value(device: object, name: str) -> str:
    if not isinstance(device, str | torch.device):
        raise InvalidArgument(f"{name}={device!r} must be a str or torch.device")
    try:
        return str(torch.device(device))
    except RuntimeError as err:
        raise InvalidArgument(f"{name}={device!r} is not a device: {err}") from None


class _Compact:
    """A dataclass repr that shows only fields that differ from their defaults: short and valid
    Python, also in Hypothesis's falsifying-example output."""

    def __repr__(self) -> str:
        shown = []
        for f in dataclasses.fields(self):  # type: ignore[arg-type]
            value = getattr(self, f.name)
            if f.default is dataclasses.MISSING or value != f.default:
                shown.append(f"{f.name}={value!r}")
        return f"{type(self).__name__}({', '.join(shown)})"

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(repr(self))


# --- dtypes ---------------------------------------------------------------------------------


def supported_dtypes(device: DeviceLike | None = None) -> tuple[torch.dtype, ...]:
    """Every dtype these strategies draw that `device`'s type supports, in shrink order.

    CPU and CUDA support them all (float16, bfloat16 and complex included); MPS lacks float64 and
    complex. ``device=None`` means no restriction. A plain function, not a strategy.

    :raises InvalidArgument: `device` is not a str or ``torch.device`` that names a device.

    Example::

        assert torch.float64 not in tcst.supported_dtypes("mps")
    """
    if device is None:
        return _ALL_DTYPES
    missing = _UNSUPPORTED.get(torch.device(_device_value(device, "device")).type, frozenset())
    return tuple(d for d in _ALL_DTYPES if d not in missing)


def _sizes(sizes: int | Sequence[int], valid: tuple[int, ...]) -> frozenset[int]:
    chosen = (sizes,) if isinstance(sizes, int) else tuple(sizes)
    _check(
        chosen and all(s in valid for s in chosen),
        f"sizes={sizes!r} must be one or more of {valid}",
    )
    return frozenset(chosen)


def _pick(
    candidates: Sequence[torch.dtype], device: DeviceLike | None, what: str
) -> st.SearchStrategy[torch.dtype]:
    allowed = supported_dtypes(device)
    chosen = [d for d in candidates if d in allowed]
    _check(chosen, f"no {what} dtype is supported on device={device!r}")
    return st.sampled_from(chosen)


def _bits(dtype: torch.dtype) -> int:
    return dtype.itemsize * 8


def float_dtypes(
    *, sizes: int | Sequence[int] = (16, 32, 64), device: DeviceLike | None = None
) -> st.SearchStrategy[torch.dtype]:
    """Floating dtypes of the given bit `sizes` (16 means float16 and bfloat16) that `device` supports.

    Shrinks to float32, then float64, float16, bfloat16.

    :raises InvalidArgument: a size other than 16, 32 or 64, or no dtype of these sizes on
        `device`.

    Example::

        @given(x=tcst.tensors(dtypes=tcst.float_dtypes(sizes=(16, 32))))
        def test_gelu(compile_parity, x):
            compile_parity(torch.nn.functional.gelu, x)
    """
    valid = _sizes(sizes, (16, 32, 64))
    return _pick([d for d in FLOAT_DTYPES if _bits(d) in valid], device, "float")


def integer_dtypes(
    *,
    sizes: int | Sequence[int] = (8, 16, 32, 64),
    unsigned: bool = True,
    device: DeviceLike | None = None,
) -> st.SearchStrategy[torch.dtype]:
    """Signed integer dtypes of the given bit `sizes`, plus uint8 when `unsigned` and 8 is a size.

    uint8 is the only unsigned dtype with full operator support in torch. Shrinks to int64 (torch's
    default integer), then int32, int16, int8, uint8.

    :raises InvalidArgument: a size other than 8, 16, 32 or 64, or no dtype left on `device`.

    Example::

        @given(x=tcst.tensors(dtypes=tcst.integer_dtypes(unsigned=False)))
        def test_floor_divide(compile_parity, x):
            compile_parity(lambda t: t // 3, x)
    """
    valid = _sizes(sizes, (8, 16, 32, 64))
    chosen = [d for d in INTEGER_DTYPES if _bits(d) in valid and (unsigned or d.is_signed)]
    return _pick(chosen, device, "integer")


def complex_dtypes(
    *, sizes: int | Sequence[int] = (64, 128), device: DeviceLike | None = None
) -> st.SearchStrategy[torch.dtype]:
    """Complex dtypes of the given total bit `sizes` that `device` supports. Shrinks to complex64.

    :raises InvalidArgument: a size other than 64 or 128, or no complex dtype on `device`.

    Example::

        @given(x=tcst.tensors(dtypes=tcst.complex_dtypes()))
        def test_abs(compile_parity, x):
            compile_parity(torch.abs, x)
    """
    valid = _sizes(sizes, (64, 128))
    return _pick([d for d in COMPLEX_DTYPES if _bits(d) in valid], device, "complex")


def boolean_dtypes() -> st.SearchStrategy[torch.dtype]:
    """torch.bool, for symmetry with the other families. Takes no arguments and raises nothing.

    Example::

        @given(mask=tcst.tensors(dtypes=tcst.boolean_dtypes()))
        def test_logical_not(compile_parity, mask):
            compile_parity(torch.logical_not, mask)
    """
    return st.just(torch.bool)


def dtypes(
    *,
    floats: bool = True,
    integers: bool = True,
    bools: bool = True,
    complex: bool = True,
    device: DeviceLike | None = None,
) -> st.SearchStrategy[torch.dtype]:
    """Dtypes of the chosen families that `device` supports.

    `floats`, `integers`, `bools` and `complex` switch each family (as :func:`float_dtypes`,
    :func:`integer_dtypes`, :func:`boolean_dtypes` and :func:`complex_dtypes` draw them) on or
    off. Shrinks to float32, then the other floats, integers, bool and complex, in that order.

    :raises InvalidArgument: every family is off, or `device` supports none of those chosen.

    Example::

        @given(x=tcst.tensors(dtypes=tcst.dtypes(complex=False)))
        def test_sum(compile_parity, x):
            compile_parity(torch.sum, x)
    """
    families = {"floats": floats, "integers": integers, "bools": bools, "complex": complex}
    groups = (FLOAT_DTYPES, INTEGER_DTYPES, BOOL_DTYPES, COMPLEX_DTYPES)
    chosen = [d for on, group in zip(families.values(), groups, strict=True) if on for d in group]
    _check(chosen, f"at least one family must be chosen, got {families}")
    return _pick(chosen, device, "chosen")


# The default mix of tensors(): float32, and each of these classes in the examples that switch it
# on (one in two each), drawn as often as float32 there. Byte-sized integers, where wrap-around
# and the widest vector lanes are, are a class of their own. A class listed later shrinks first:
# float64, then float16, bfloat16, int8 and uint8, the other integers, bool.
_DTYPE_CLASSES: dict[str, tuple[tuple[int, torch.dtype], ...]] = {
    "bool": ((8, torch.bool),),
    "integers": ((4, torch.int64), (2, torch.int32), (2, torch.int16)),
    "bytes": ((4, torch.int8), (4, torch.uint8)),
    "bfloat16": ((8, torch.bfloat16),),
    "float16": ((8, torch.float16),),
    "float64": ((8, torch.float64),),
}
_INEXACT_CLASSES = ("bfloat16", "float16", "float64")  # those that take gradients
# The order in the draw: the first class on is drawn more often than its weight says (see
# `_simplest_last`), so the bytes (int8/uint8 wrap-around and widest lanes) and bfloat16 go first.
_DTYPE_ORDER = ("bytes", "bfloat16", "float16", "float64", "integers", "bool")
# The integers (int64/32/16) are on in one example of three, every other class in one of two:
# about two default tensors in five are integers or bools (benchmarks/draws.py: 41% over ten seeds).
_DTYPE_ODDS = {name: (1, 3) if name == "integers" else (1, 2) for name in _DTYPE_CLASSES}


@functools.lru_cache(maxsize=4096)
def _default_dtypes(on: frozenset[str], device: str | None) -> st.SearchStrategy[torch.dtype]:
    """The dtype classes switched on that `device` supports, and float32 (the shrink target: last,
    see `_simplest_last`)."""
    allowed = supported_dtypes(device)
    choices = [
        (weight, dtype)
        for name in _DTYPE_ORDER
        if name in on
        for weight, dtype in _DTYPE_CLASSES[name]
        if dtype in allowed
    ]
    return _simplest_last(choices, (4, torch.float32))


# --- shapes ---------------------------------------------------------------------------------


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

    A coin picks between the classes on and the plain sizes (see `_simplest_last`) and shrinks to
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
    simple = _weighted(*one, *plain)  # 1 first: sizes shrink to 1, not 0
    if switched and (one or plain):
        total = sum(weight for weight, _ in switched)
        extra = sum(weight for weight, _ in [*one, *plain])
        buckets = _coin(2 * total, 2 * total + extra).flatmap(
            lambda on: _weighted(*switched) if on else simple
        )
    else:
        buckets = _weighted(*switched) if switched else simple
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
    on = draw(_swarm(_SIZE_COINS)) if ndim else frozenset()  # a size class needs a side
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
    _check_int(min_dims, "min_dims", 0)
    _check_int(max_dims, "max_dims", 0)
    _check_bounds(min_dims, max_dims, "dims")
    _check_int(min_side, "min_side", 0)
    _check_int(max_side, "max_side", 0)
    _check_bounds(min_side, max_side, "side")
    _check_int(max_numel, "max_numel", 1)
    _check(
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


_SHAPES = shapes()


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
        if not draw(_coin(1, 3)):
            group.append(base)
            continue
        dropped = draw(st.integers(0, len(base)))
        ones = [draw(st.booleans()) for _ in base]
        group.append(tuple(1 if one else s for one, s in zip(ones, base, strict=True))[dropped:])
    return tuple(group)


def shape_groups(
    n: int, *, shapes: Shape | st.SearchStrategy[Shape] = _SHAPES, broadcast: bool = True
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
    _check_int(n, "n", 1)
    if not isinstance(shapes, st.SearchStrategy):
        shapes = st.just(_shape_value(shapes, "shapes"))
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
    _check_int(min_dims, "min_dims", 1)
    _check_shape_args(min_dims, max_dims, min_side, max_side, max_numel)
    _check_int(min_size, "min_size", 1)
    _check_int(max_size, "max_size", 1)
    _check_bounds(min_size, max_size, "size")
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
    on = draw(_swarm(_SIZE_COINS))  # switched off while shrinking: the general size goes to 2
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
    _check_int(min_dims, "min_dims", 1)
    _check_shape_args(min_dims, max_dims, 1, max_side, max_numel)
    _check(max_side >= 2, f"max_side={max_side} leaves no size above 1 to probe")
    _check(max_numel >= 2, f"max_numel={max_numel} leaves no size above 1 to probe")
    return _size_probes(min_dims, max_dims, max_side, max_numel)


# --- layouts --------------------------------------------------------------------------------


@dataclass(frozen=True, repr=False)
class Layout(_Compact):
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


_ROW_MAJOR = Layout()


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
    return st.just(_ROW_MAJOR)


def _layout_strategy(
    shape: Shape, kinds: tuple[LayoutKind, ...], max_step: int, max_offset: int
) -> st.SearchStrategy[Layout]:
    applicable = [k for k in LAYOUT_KINDS if k in kinds and _applies(k, shape)]
    # Broadcast inputs and memory formats are the layouts real models use most after contiguous
    # ones, and the rarest by rank or size: drawn more often. A memory format applies to one
    # rank only, so it weighs most: 4-D inputs of 100 examples reach channels_last reliably.
    weighted = [
        (4 if k.startswith("channels_last") else 2 if k == "expanded" else 1, k) for k in applicable
    ]
    return _weighted(*weighted or [(1, LAYOUT_KINDS[0])]).flatmap(
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
    return _simplest_last(weighted, contiguous).flatmap(
        lambda kind: _kind_layouts(kind, shape, 3, 8)
    )


def _kinds(kinds: LayoutKind | Collection[LayoutKind], name: str) -> tuple[LayoutKind, ...]:
    chosen = (kinds,) if isinstance(kinds, str) else tuple(kinds)
    _check(
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
    shape = _shape_value(shape, "shape")
    chosen = _kinds(kinds, "kinds")
    _check_int(max_step, "max_step", 2)
    _check_int(max_offset, "max_offset", 1)
    return _layout_strategy(shape, chosen, max_step, max_offset)


# --- values ---------------------------------------------------------------------------------


def _float_info(dtype: torch.dtype) -> torch.finfo:
    return torch.finfo(dtype)  # complex dtypes report their component's finfo


def _bounds(
    dtype: torch.dtype, min_value: float | None, max_value: float | None
) -> tuple[float | None, float | None]:
    """The bounds that apply to `dtype`: integers always have them, floats keep None as unbounded."""
    if dtype.is_floating_point or dtype.is_complex:
        info = _float_info(dtype)
        low = None if min_value is None else min(max(min_value, info.min), info.max)
        high = None if max_value is None else max(min(max_value, info.max), info.min)
        return low, high
    iinfo = torch.iinfo(dtype)
    low_i = iinfo.min if min_value is None else max(math.ceil(min_value), iinfo.min)
    high_i = iinfo.max if max_value is None else min(math.floor(max_value), iinfo.max)
    if low_i > high_i:
        raise InvalidArgument(
            f"no {dtype} value lies between min_value={min_value} and max_value={max_value}"
        )
    return low_i, high_i


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
class Values(_Compact):
    """How a tensor's values are made: reproducible from a seed, with specials planted by position.

    `dist` is ``small`` (integers in [-3, 3], exact in every dtype), ``normal`` (standard normal;
    integers in [-100, 100]), ``wide`` (magnitudes 2**-10 to 2**10 with random signs; integers in
    [-10000, 10000]), ``full`` (integers over the dtype's whole range), or for floating and complex
    dtypes one of the edge classes of :mod:`pytest_torchcompile.judging.edges`: ``ties``, ``offsets``,
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
            return flags & ~self._zeros(shape) if self.zeros else flags
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
            out = (torch.complex(parts[:n], parts[n:]) if dtype.is_complex else parts).to(dtype)
        for position, kind in self.specials:
            out[position] = _special_value(kind, dtype, low, high)
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
            return edges.ties(n, self.seed, self.steps, real, self.literals)
        if self.dist == "offsets":
            return edges.offsets(n, self.seed, self.steps, real)
        if self.dist == "near_limits":
            return edges.near_limits(n, self.seed, real)
        if self.dist == "exact_sums":
            rows = (parts, *shape) if shape else (parts,)
            return edges.exact_sums(rows, self.seed, self.steps, real)
        return _ordinary(self.dist, n, False, gen)


@dataclass(frozen=True)
class _ValueOptions:
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
    ``small`` first among them (the shrink target, see `_simplest_last`); `ties` weighs that class
    more."""
    ordinary = list(_ORDINARY)
    if not inexact:
        return st.sampled_from([*ordinary, "full"] if full else ordinary)
    weights = {e: ties if e == "ties" else 1 for e in on}
    edges = [(len(ordinary) * _EDGE_SHARE * w, e) for e, w in weights.items()]
    each = max(sum(weights.values()), 1)  # the edge classes' share is the same however many are on
    if not edges:
        return st.sampled_from(ordinary)
    return _weighted(*edges, *((each, d) for d in ordinary))


_SEEDS = st.integers(0, 2**32 - 1)

# The program's own constants (a margin, a threshold) reach the ties lattice through Hypothesis:
# it collects the literals of the code under test (local modules other than test files) and
# returns one now and then where a strategy draws a float. Where this Hypothesis shows that
# collection, each ties draw puts all its short decimals on the lattice (there is nothing to
# draw: a margin written once in the model is on every ties lattice); elsewhere it draws this
# many floats and keeps the short decimals among them (about one float in fourteen is a local
# literal, so a program with a dozen float literals has any one of them in about half).
_LITERAL_DRAWS = 160
_LITERAL_LOW, _LITERAL_HIGH = 2.0**-10, 2.0**10  # the magnitudes of literals the lattice takes
_LITERAL_FLOATS = st.floats(min_value=_LITERAL_LOW, max_value=_LITERAL_HIGH)


def _literals(drawn: Iterable[float]) -> tuple[float, ...]:
    """The short decimals of `drawn` (three significant digits, not whole: the lattice of 1
    holds those) that are not lattice steps yet, as magnitudes within the literals' bounds."""
    magnitudes = {abs(x) for x in drawn if _LITERAL_LOW <= abs(x) <= _LITERAL_HIGH}
    short = {x for x in magnitudes if float(f"{x:.3g}") == x and x != round(x)}
    return tuple(sorted(short - set(edges.STEPS)))


@functools.lru_cache(maxsize=8)
def _collected_literals(collected: tuple[float, ...]) -> tuple[float, ...]:
    return _literals(collected)


_DRAWN_LITERALS = st.lists(_LITERAL_FLOATS, min_size=_LITERAL_DRAWS, max_size=_LITERAL_DRAWS).map(
    _literals
)


def _program_literals() -> st.SearchStrategy[tuple[float, ...]]:
    """The program's short decimals: those Hypothesis has collected so far (modules load as the
    tests run, so this is asked at each draw), or drawn as floats where it does not say."""
    collected = _compat.hypothesis_local_floats()
    return _DRAWN_LITERALS if collected is None else st.just(_collected_literals(collected))


@dataclass(frozen=True)
class _Plan:
    """One distribution for the floating tensors of a group, and what they share."""

    dist: Distribution
    steps: int = 0
    literals: tuple[float, ...] = ()


@functools.lru_cache(maxsize=4096)
@st.composite
def _plans(draw: st.DrawFn, on: tuple[EdgeClass, ...], ties: int) -> _Plan:
    """A distribution of `on` or an ordinary one, with the constants' seed a group shares and,
    for ties, the program's literals."""
    dist = draw(_distributions(True, False, on, ties))
    steps = draw(_SEEDS) if dist in _STEPPED else 0
    return _Plan(dist, steps, draw(_program_literals()) if dist == "ties" else ())


def _group_plans(on: tuple[EdgeClass, ...]) -> st.SearchStrategy[_Plan]:
    """One plan for every floating tensor of a group, so that their elements are related:
    multiples of one constant at each position, or around one offset. Ties are drawn three times
    as often as for one tensor: relations between tensors are the point of a group."""
    return _plans(on, ties=6)


@st.composite
def _values(
    draw: st.DrawFn,
    dtype: torch.dtype,
    n: int,
    options: _ValueOptions,
    plan: _Plan | None,
    on: frozenset[str],
) -> Values:
    if dtype == torch.bool:
        # As many choices as an ordinary float tensor's, so neither shrinks to the other by length.
        dist = draw(_distributions(False, False, ()))
        sign = draw(_sign(on, (True, True)))
        return Values(dist, draw(_SEEDS), positive=sign == "positive", zeros=sign == "zeros")
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
        chosen = _Plan(draw(_distributions(False, "specials" in on, ())))
    seed = draw(_SEEDS)
    planted: list[tuple[int, SpecialKind]] = []
    if planting:
        # NaN and infinities, where most special-value bugs live, are drawn most often.
        weights = {"nan": 3, "inf": 2, "-inf": 2}
        spot = st.tuples(st.integers(0, n - 1), _weighted(*((weights.get(k, 1), k) for k in kinds)))
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
    signs = [s for s, fit in zip(_SIGNS, fits, strict=True) if s in on and fit]
    return st.sampled_from(signs) if len(signs) > 1 else st.just(signs[0] if signs else None)


_STEPPED = ("ties", "offsets", "exact_sums")  # the classes whose constants a group shares
_NAN_INF = ("nan", "inf", "-inf")


# --- tensors --------------------------------------------------------------------------------


@dataclass(frozen=True, repr=False)
class TensorSpec(_Compact):
    """Everything that determines a generated tensor; :func:`build_tensor` makes it again."""

    shape: Shape
    dtype: torch.dtype
    layout: Layout = _ROW_MAJOR
    values: Values = Values()
    device: str = "cpu"
    requires_grad: bool = False


def _sentinel(dtype: torch.dtype) -> float | bool:
    """Fills the buffer outside a tensor's window, so a kernel reading outside it diverges visibly."""
    if dtype == torch.bool:
        return True
    if dtype.is_floating_point or dtype.is_complex:
        return math.nan
    return torch.iinfo(dtype).max


def build_tensor(spec: TensorSpec) -> torch.Tensor:
    """The tensor `spec` describes, built directly on its device with its strides and offset.

    Moving a strided tensor with ``.to(device)`` would make it dense again; instead the buffer is
    allocated on the device and the values are copied into the window. The result is a leaf and
    not a view (the buffer stays hidden), with the spec's strides and storage offset.

    :raises ValueError: the spec's layout does not fit its shape.

    Example (the spec as a failing test's output prints it)::

        x = tcst.build_tensor(tcst.TensorSpec(shape=(2, 3), dtype=torch.float16))
    """
    strides, offset, size = spec.layout.geometry(spec.shape)
    stored = tuple(1 if d in spec.layout.expanded else s for d, s in enumerate(spec.shape))
    buffer = torch.full((size,), _sentinel(spec.dtype), dtype=spec.dtype, device=spec.device)
    buffer.as_strided(stored, strides, offset).copy_(spec.values.generate(stored, spec.dtype))
    tensor = buffer.as_strided(spec.shape, strides, offset).detach()
    return tensor.requires_grad_() if spec.requires_grad else tensor


LayoutsArg: TypeAlias = (
    LayoutKind | Collection[LayoutKind] | Callable[[Shape], st.SearchStrategy[Layout]]
)


class TensorOptions(TypedDict, total=False):
    """The :func:`tensors` options that :func:`tensor_groups` passes on to each tensor."""

    layouts: LayoutsArg
    min_value: float | None
    max_value: float | None
    specials: bool | None
    allow_nan: bool
    allow_infinity: bool
    allow_subnormal: bool
    ties: bool
    offsets: bool
    near_limits: bool
    exact_sums: bool
    positive: bool
    zeros: bool
    requires_grad: bool | st.SearchStrategy[bool]


def _check_grad(requires_grad: bool, dtype: torch.dtype) -> None:
    _check(
        not requires_grad or dtype.is_floating_point or dtype.is_complex,
        f"requires_grad=True needs a floating or complex dtype, but dtypes={dtype}",
    )


DtypesArg: TypeAlias = torch.dtype | st.SearchStrategy[torch.dtype] | None


def _dtype_choice(
    dtypes: DtypesArg, device: str | st.SearchStrategy[DeviceLike], grad: object
) -> tuple[Callable[[frozenset[str]], st.SearchStrategy[torch.dtype]], Coins]:
    """`dtypes` as a strategy of the swarm's classes on, checked now where it is a value, and
    the dtype classes it leaves to the swarm: None means the default mix, floating only where
    `grad` may be True."""
    fixed_device = None if isinstance(device, st.SearchStrategy) else device
    if dtypes is None:
        names = _INEXACT_CLASSES if grad is not False else tuple(_DTYPE_CLASSES)
        coins = tuple((name, *_DTYPE_ODDS[name]) for name in names)
        return lambda on: _default_dtypes(on, fixed_device), coins
    chosen = (
        dtypes
        if isinstance(dtypes, st.SearchStrategy)
        else st.just(_dtype_value(dtypes, fixed_device))
    )
    return lambda _: chosen, ()


def _dtype_value(dtype: object, device: str | None) -> torch.dtype:
    _check(
        isinstance(dtype, torch.dtype) and dtype in _ALL_DTYPES,
        f"dtypes={dtype!r} is not one of the dtypes tensors() makes: {_ALL_DTYPES}",
    )
    _check(
        dtype in supported_dtypes(device),
        f"dtypes={dtype} is not supported on device={device!r}",
    )
    return dtype  # type: ignore[return-value]


@dataclass(frozen=True)
class _TensorArgs:
    """:func:`tensors`' arguments, checked, as strategies of the swarm's classes on (`coins`)."""

    dtypes: Callable[[frozenset[str]], st.SearchStrategy[torch.dtype]]
    shapes: st.SearchStrategy[Shape]
    layouts: Callable[[Shape, frozenset[str]], st.SearchStrategy[Layout]]
    device: st.SearchStrategy[DeviceLike]
    requires_grad: st.SearchStrategy[bool]
    values: _ValueOptions
    coins: Coins


@st.composite
def _tensors(
    draw: st.DrawFn,
    args: _TensorArgs,
    plan: _Plan | None = None,
    on: frozenset[str] | None = None,
) -> torch.Tensor:
    where = _device_value(draw(args.device), "device")
    on = draw(_swarm(args.coins)) if on is None else on
    dtype = _dtype_value(draw(args.dtypes(on)), where)
    shape = _shape_value(draw(args.shapes), "shapes")
    grad = draw(args.requires_grad)
    _check_grad(grad, dtype)
    layout = draw(args.layouts(shape, on))
    stored = math.prod(1 if d in layout.expanded else s for d, s in enumerate(shape))
    values = draw(_values(dtype, stored, args.values, plan, on))
    spec = TensorSpec(shape, dtype, layout, values, where, grad)
    tensor = build_tensor(spec)
    if currently_in_test_context():
        note(f"tensors() drew {describe(tensor)}; rebuild it with build_tensor({spec!r})")
    return tensor


def _layouts_arg(
    layouts: LayoutsArg,
) -> tuple[Callable[[Shape, frozenset[str]], st.SearchStrategy[Layout]], Coins]:
    """`layouts` as a strategy of the shape and the swarm's classes on, and the layout classes
    it leaves to the swarm (none for a function: it decides)."""
    if callable(layouts):
        return lambda shape, _: layouts(shape), ()
    kinds = _kinds(layouts, "layouts")
    return lambda shape, on: _swarm_layouts(shape, kinds, on), _layout_coins(kinds)


def _check_value_args(
    min_value: float | None, max_value: float | None, flags: dict[str, object]
) -> None:
    for name, bound in (("min_value", min_value), ("max_value", max_value)):
        _check(
            bound is None or (isinstance(bound, int | float) and not math.isnan(bound)),
            f"{name}={bound!r} must be a number or None",
        )
    if min_value is not None and max_value is not None:
        _check(
            min_value <= max_value, f"min_value={min_value} is larger than max_value={max_value}"
        )
    for name, flag in flags.items():
        _check(
            isinstance(flag, bool) or (name == "specials" and flag is None),
            f"{name}={flag!r} must be a bool",
        )


def tensors(
    *,
    dtypes: torch.dtype | st.SearchStrategy[torch.dtype] | None = None,
    shapes: Shape | st.SearchStrategy[Shape] = _SHAPES,
    layouts: LayoutsArg = LAYOUT_KINDS,
    min_value: float | None = None,
    max_value: float | None = None,
    specials: bool | None = None,
    allow_nan: bool = True,
    allow_infinity: bool = True,
    allow_subnormal: bool = True,
    ties: bool = True,
    offsets: bool = True,
    near_limits: bool = True,
    exact_sums: bool = True,
    positive: bool = True,
    zeros: bool = True,
    device: DeviceLike | st.SearchStrategy[DeviceLike] = "cpu",
    requires_grad: bool | st.SearchStrategy[bool] = False,
) -> st.SearchStrategy[torch.Tensor]:
    """Tensors of a drawn dtype, shape, memory layout and values, built on `device`.

    Each draw switches a random subset of the classes below on (a swarm: see the module's
    docstring) and draws from those only; a keyword that switches a class off keeps it off.

    - `dtypes`: a dtype or a strategy of them. None (the default) means float32 and, each in
      the draws that switch its class on, float16, bfloat16, float64, int8/uint8, the other
      integers and bool, those `device` supports: about two tensors in five are integers or
      bools. Floating dtypes only where `requires_grad` is not False. Eager raises on many
      functions of integers or bools, and the plugin rejects such an example where compiled
      raises alike; Inductor often computes a result instead (softmax, var, gelu, ceil of bool),
      which the plugin reports, so a test of a floating-only function passes
      ``dtypes=tcst.float_dtypes()``, as must one that converts a module with ``.to(x.dtype)``.
    - `shapes`: a shape or a strategy of them (default :func:`shapes`, with its size classes).
    - `layouts`: layout kinds to draw from (see :func:`layouts`), or a function from a shape to a
      strategy of :class:`Layout`, e.g. ``functools.partial(layouts, max_step=5)``. Of a
      collection of kinds, the classes transposed (and permuted), channels_last (and
      channels_last_3d), sliced (and offset) and expanded are switched on per draw, contiguous
      otherwise (if a kind). The tensor has the logical shape drawn and that memory layout;
      storage outside it holds NaN (or the dtype's maximum), so a kernel that reads past its
      view diverges.
    - Values (see :class:`Values`) are finite: reproducible from a drawn seed, so tensors of
      thousands of elements cost a few Hypothesis choices, and bounded by `min_value` and
      `max_value` (for integers too: e.g. ``min_value=0, max_value=n - 1`` for indices).
      Ordinary values are small integers, standard normal or wide (2**-10 to 2**10); `positive`
      makes them all positive, `zeros` about half of them 0 (one or the other per tensor).
    - Edge values (floating and complex dtypes; :mod:`pytest_torchcompile.judging.edges`), where real
      miscompiles were found, each class switched off by its keyword: `ties` (a lattice ``k *
      c``, k in -2..2, c a common constant such as 0.1, or a literal of the code under test that
      Hypothesis collected and drew, rounded to the dtype: equal elements, +-0, kinks, and
      tensors of a :func:`tensor_groups` group differing by exactly c, e.g. the program's
      margin), `offsets` (a large common offset with a unit spread, ~1e5 in float32),
      `near_limits` (magnitudes whose squares overflow, ~1e19 in float32) and `exact_sums` (rows
      of decimals whose exact sum is an integer, so a reduction lands a rounding step from it).
      Where edge classes are on, they take most of the floating tensors.
    - Special values -- NaN, +-inf, -0.0, subnormals, the extremes of the range, and full-range
      integers -- are planted at 1 to 3 positions (NaN and infinities most often), as two
      classes: NaN and infinities, and the others. With ``specials=None`` (the default) they are
      on in one draw of four and three, where the dtype and bounds allow; True switches each on
      in half the draws; False never (ordinary values only). `allow_nan`, `allow_infinity` and
      `allow_subnormal` remove those kinds; NaN needs no bounds and an infinity no bound on its
      side, as in ``st.floats``.
    - `device` and `requires_grad`: values or strategies; the tensor is a leaf.

    Shrinks to no class on: float32, shape ``()``, contiguous, offset 0, no specials, no edge
    values, and small integer values in [-3, 3] from seed 0 (a failure that needs a class
    shrinks within it, ties towards the constant 1). Values deliberately do not shrink to all
    zeros: zeros would make a shrunk example hide the very divergence it reports (0 * anything
    is 0), and a checker fed only zeros proves little. Small integers are the simplest values
    that still differ, and they are exact in every dtype, so a shrunk failure is not blurred by
    rounding.

    In a failing test, Hypothesis prints each drawn tensor's :func:`describe` line and the
    :class:`TensorSpec` that rebuilds it.

    :raises InvalidArgument: when called, not when drawn, for any argument given as a value that
        does not fit: a dtype these strategies do not make or `device` does not support, a shape
        that is not a sequence of non-negative integers, an unknown layout kind, a bound that is
        not a number or a `min_value` above `max_value`, a switch that is not a bool, or
        ``requires_grad=True`` with a dtype that has no gradients. Values drawn from strategies
        are checked as they are drawn.

    Example::

        @pytest.mark.compile_parity
        @given(x=tcst.tensors(dtypes=torch.float32, shapes=tcst.shapes(min_dims=1), specials=False))
        def test_softmax(compile_parity, x):
            compile_parity(lambda t: torch.softmax(t, -1), x)
    """
    return _tensors(_tensor_args(locals()))


def _tensor_args(given: dict[str, Any]) -> _TensorArgs:
    """:func:`tensors`' arguments (every one, by name) checked and made strategies."""
    dtypes, shapes, device = given["dtypes"], given["shapes"], given["device"]
    requires_grad, specials = given["requires_grad"], given["specials"]
    where = device if isinstance(device, st.SearchStrategy) else _device_value(device, "device")
    if not isinstance(dtypes, st.SearchStrategy | None):
        _check_grad(requires_grad is True, _dtype_value(dtypes, None))
    if not isinstance(shapes, st.SearchStrategy):
        shapes = _shape_value(shapes, "shapes")
    _check(
        isinstance(requires_grad, bool | st.SearchStrategy),
        f"requires_grad={requires_grad!r} must be a bool",
    )
    flags = {name: given[name] for name in ("allow_nan", "allow_infinity", "allow_subnormal")}
    switches: dict[str, object] = {name: given[name] for name in (*EDGE_CLASSES, *_SIGNS)}
    _check_value_args(
        given["min_value"], given["max_value"], {"specials": specials, **flags, **switches}
    )
    values = _ValueOptions(
        given["min_value"],
        given["max_value"],
        specials,
        (flags["allow_nan"], flags["allow_infinity"], flags["allow_subnormal"]),
        tuple(edge for edge in EDGE_CLASSES if switches[edge]),
        tuple(sign for sign in _SIGNS if switches[sign]),
    )
    dtype_choice, dtype_coins = _dtype_choice(dtypes, where, requires_grad)
    layout_choice, layout_coins = _layouts_arg(given["layouts"])
    return _TensorArgs(
        dtype_choice,
        _strategy(shapes),
        layout_choice,
        _strategy(where),
        _strategy(requires_grad),
        values,
        layout_coins + dtype_coins + values.coins(),
    )


_SIGNS = ("positive", "zeros")


@st.composite
def _tensor_groups(
    draw: st.DrawFn,
    shape_group: st.SearchStrategy[tuple[Shape, ...]],
    dtypes: DtypesArg,
    same_dtype: bool,
    device: st.SearchStrategy[DeviceLike],
    options: TensorOptions,
) -> tuple[torch.Tensor, ...]:
    where = draw(device)
    args = _tensor_args({**_TENSOR_DEFAULTS, **options, "dtypes": dtypes, "device": where})
    # One swarm for the group: its classes on for every tensor.
    on = draw(_swarm(args.coins))
    if same_dtype:
        dtype = draw(args.dtypes(on))
        args = dataclasses.replace(args, dtypes=lambda _: st.just(dtype))
    members = [dataclasses.replace(args, shapes=st.just(s)) for s in draw(shape_group)]
    # One distribution for the group's floating tensors: ties on one lattice, one offset.
    plan = draw(_group_plans(tuple(e for e in args.values.edges if e in on)))
    return tuple(draw(_tensors(member, plan, on)) for member in members)


_TENSOR_DEFAULTS = {name: p.default for name, p in inspect.signature(tensors).parameters.items()}


def tensor_groups(
    n: int,
    *,
    shapes: Shape | st.SearchStrategy[Shape] = _SHAPES,
    broadcast: bool = True,
    dtypes: torch.dtype | st.SearchStrategy[torch.dtype] | None = None,
    same_dtype: bool = True,
    device: DeviceLike | st.SearchStrategy[DeviceLike] = "cpu",
    **options: Unpack[TensorOptions],
) -> st.SearchStrategy[tuple[torch.Tensor, ...]]:
    """Tuples of `n` tensors on one device with shapes from :func:`shape_groups` (equal, or with
    `broadcast` mutually broadcastable), one dtype unless `same_dtype` is False (to exercise type
    promotion), and each tensor's layout and values drawn as :func:`tensors` does, with one
    swarm of classes switched on for the whole group (each tensor draws its own layout from
    them, so a transposed operand meets a contiguous one) and one distribution for the group's
    floating tensors: with ties (drawn most often in a group) their elements at one position
    are multiples of one constant, so tensors share elements and differ by exactly that
    constant, e.g. a margin of the code under test (``x1 - x2 == margin`` in bfloat16); with
    offsets they share the offset.

    `shapes` and `broadcast` are as for :func:`shape_groups`; `dtypes` and `device` as for
    :func:`tensors`; every other keyword (:class:`TensorOptions`) goes to :func:`tensors` for
    each tensor. Shrinks to `n` equal-shaped tensors of small integers, each shrinking as
    :func:`tensors` does.

    :raises InvalidArgument: as :func:`shape_groups` and :func:`tensors` do, when called.

    Example::

        @given(xs=tcst.tensor_groups(2, same_dtype=False))
        def test_mul_promotes(compile_parity, xs):
            compile_parity(torch.mul, *xs)
    """
    group = shape_groups(n, shapes=shapes, broadcast=broadcast)
    where = device if isinstance(device, st.SearchStrategy) else _device_value(device, "device")
    tensors(dtypes=dtypes, device=where, **options)  # only to check the options now, not when drawn
    return _tensor_groups(group, dtypes, same_dtype, _strategy(where), options)
