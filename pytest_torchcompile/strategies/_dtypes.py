"""Dtypes: the families the strategies draw, what each device supports, and the default mix of
:func:`tensors` (float32, and each other class in the examples that switch it on)."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import TypeAlias

import torch
from hypothesis import strategies as st

from pytest_torchcompile.strategies._checks import DeviceLike, check, device_value
from pytest_torchcompile.strategies._swarm import Coins, simplest_last
from pytest_torchcompile.strategies._values import holds

# Each family in shrink order: the first dtype is the simplest.
FLOAT_DTYPES = (torch.float32, torch.float64, torch.float16, torch.bfloat16)
INTEGER_DTYPES = (torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8)
BOOL_DTYPES = (torch.bool,)
COMPLEX_DTYPES = (torch.complex64, torch.complex128)
ALL_DTYPES = FLOAT_DTYPES + INTEGER_DTYPES + BOOL_DTYPES + COMPLEX_DTYPES

# Dtypes a device type lacks; a device type not listed supports them all.
_UNSUPPORTED: dict[str, frozenset[torch.dtype]] = {
    "mps": frozenset({torch.float64, torch.complex64, torch.complex128}),
}


def supported_dtypes(device: DeviceLike | None = None) -> tuple[torch.dtype, ...]:
    """Every dtype these strategies draw that `device`'s type supports, in shrink order.

    CPU and CUDA support them all (float16, bfloat16 and complex included); MPS lacks float64 and
    complex. ``device=None`` means no restriction. A plain function, not a strategy.

    :raises InvalidArgument: `device` is not a str or ``torch.device`` that names a device.

    Example::

        assert torch.float64 not in tcst.supported_dtypes("mps")
    """
    if device is None:
        return ALL_DTYPES
    missing = _UNSUPPORTED.get(torch.device(device_value(device, "device")).type, frozenset())
    return tuple(d for d in ALL_DTYPES if d not in missing)


def _sizes(sizes: int | Sequence[int], valid: tuple[int, ...]) -> frozenset[int]:
    chosen = (sizes,) if isinstance(sizes, int) else tuple(sizes)
    check(
        chosen and all(s in valid for s in chosen),
        f"sizes={sizes!r} must be one or more of {valid}",
    )
    return frozenset(chosen)


def _pick(
    candidates: Sequence[torch.dtype], device: DeviceLike | None, what: str
) -> st.SearchStrategy[torch.dtype]:
    allowed = supported_dtypes(device)
    chosen = [d for d in candidates if d in allowed]
    check(chosen, f"no {what} dtype is supported on device={device!r}")
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
    check(chosen, f"at least one family must be chosen, got {families}")
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
# `simplest_last`), so the bytes (int8/uint8 wrap-around and widest lanes) and bfloat16 go first.
_DTYPE_ORDER = ("bytes", "bfloat16", "float16", "float64", "integers", "bool")
# The integers (int64/32/16) are on in one example of three, every other class in one of two:
# about two default tensors in five are integers or bools (benchmarks/draws.py: 41% over ten seeds).
_DTYPE_ODDS = {name: (1, 3) if name == "integers" else (1, 2) for name in _DTYPE_CLASSES}


Bounds: TypeAlias = tuple[float | None, float | None]
"""min_value and max_value."""


@functools.lru_cache(maxsize=4096)
def _default_dtypes(
    on: frozenset[str], device: str | None, bounds: Bounds, names: tuple[str, ...]
) -> st.SearchStrategy[torch.dtype]:
    """The dtype classes switched on that `device` supports and whose values meet `bounds`, and
    float32 (the shrink target: last, see `simplest_last`); where none of those does, every
    class of the mix (`names`) that does."""
    allowed = supported_dtypes(device)
    choices = [
        (weight, dtype)
        for name in _DTYPE_ORDER
        if name in on
        for weight, dtype in _DTYPE_CLASSES[name]
        if dtype in allowed and holds(dtype, *bounds)
    ]
    simplest = (4, torch.float32) if holds(torch.float32, *bounds) else None
    if not choices and simplest is None:  # beyond float32's range: float64 alone holds them
        return _default_dtypes(frozenset(names), device, bounds, names)
    return simplest_last(choices, simplest)


def check_grad(requires_grad: bool, dtype: torch.dtype) -> None:
    check(
        not requires_grad or dtype.is_floating_point or dtype.is_complex,
        f"requires_grad=True needs a floating or complex dtype, but dtypes={dtype}",
    )


DtypesArg: TypeAlias = torch.dtype | st.SearchStrategy[torch.dtype] | None


def dtype_choice(
    dtypes: DtypesArg, device: str | st.SearchStrategy[DeviceLike], grad: object, bounds: Bounds
) -> tuple[Callable[[frozenset[str]], st.SearchStrategy[torch.dtype]], Coins]:
    """`dtypes` as a strategy of the swarm's classes on, checked now where it is a value, and
    the dtype classes it leaves to the swarm: None means the default mix, floating only where
    `grad` may be True. A dtype none of whose values meets `bounds` is not drawn (uint8 under
    ``max_value=-0.5``), and is an error where given as a value."""
    fixed_device = None if isinstance(device, st.SearchStrategy) else device
    where = f"min_value={bounds[0]} and max_value={bounds[1]}"
    if dtypes is None:
        names = _INEXACT_CLASSES if grad is not False else tuple(_DTYPE_CLASSES)
        mix = [torch.float32, *(d for name in names for _, d in _DTYPE_CLASSES[name])]
        check(any(holds(d, *bounds) for d in mix), f"no dtype holds a value between {where}")
        coins = tuple((name, *_DTYPE_ODDS[name]) for name in names)
        return lambda on: _default_dtypes(on, fixed_device, bounds, names), coins
    if not isinstance(dtypes, st.SearchStrategy):
        dtype = dtype_value(dtypes, fixed_device)
        check(holds(dtype, *bounds), f"dtypes={dtype} holds no value between {where}")
        return lambda _: st.just(dtype), ()
    given = dtypes if bounds == (None, None) else dtypes.filter(lambda d: holds(d, *bounds))
    return lambda _: given, ()


def dtype_value(dtype: object, device: str | None) -> torch.dtype:
    check(
        isinstance(dtype, torch.dtype) and dtype in ALL_DTYPES,
        f"dtypes={dtype!r} is not one of the dtypes tensors() makes: {ALL_DTYPES}",
    )
    check(
        dtype in supported_dtypes(device),
        f"dtypes={dtype} is not supported on device={device!r}",
    )
    return dtype  # type: ignore[return-value]
