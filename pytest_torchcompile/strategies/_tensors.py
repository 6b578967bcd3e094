"""Tensors and groups of tensors: the dtype, shape, layout and values drawn together from one
swarm, and the spec that rebuilds each tensor."""

from __future__ import annotations

import dataclasses
import inspect
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypedDict, Unpack

import torch
from hypothesis import currently_in_test_context, note
from hypothesis import strategies as st

from pytest_torchcompile.strategies._checks import (
    Compact,
    DeviceLike,
    Shape,
    as_strategy,
    check,
    device_value,
    shape_value,
)
from pytest_torchcompile.strategies._dtypes import DtypesArg, check_grad, dtype_choice, dtype_value
from pytest_torchcompile.strategies._layouts import (
    LAYOUT_KINDS,
    ROW_MAJOR,
    Layout,
    LayoutsArg,
    layouts_arg,
)
from pytest_torchcompile.strategies._shapes import SHAPES, shape_groups
from pytest_torchcompile.strategies._swarm import Coins, swarm
from pytest_torchcompile.strategies._values import (
    EDGE_CLASSES,
    SIGNS,
    Plan,
    ValueOptions,
    Values,
    check_value_args,
    draw_values,
    group_plans,
)
from pytest_torchcompile.tensor_text import describe


@dataclass(frozen=True, repr=False)
class TensorSpec(Compact):
    """Everything that determines a generated tensor; :func:`build_tensor` makes it again."""

    shape: Shape
    dtype: torch.dtype
    layout: Layout = ROW_MAJOR
    values: Values = Values()  # noqa: RUF009 (frozen)
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


@dataclass(frozen=True)
class _TensorArgs:
    """:func:`tensors`' arguments, checked, as strategies of the swarm's classes on (`coins`)."""

    dtypes: Callable[[frozenset[str]], st.SearchStrategy[torch.dtype]]
    shapes: st.SearchStrategy[Shape]
    layouts: Callable[[Shape, frozenset[str]], st.SearchStrategy[Layout]]
    device: st.SearchStrategy[DeviceLike]
    requires_grad: st.SearchStrategy[bool]
    values: ValueOptions
    coins: Coins


@st.composite
def _tensors(
    draw: st.DrawFn,
    args: _TensorArgs,
    plan: Plan | None = None,
    on: frozenset[str] | None = None,
) -> torch.Tensor:
    where = device_value(draw(args.device), "device")
    on = draw(swarm(args.coins)) if on is None else on
    dtype = dtype_value(draw(args.dtypes(on)), where)
    shape = shape_value(draw(args.shapes), "shapes")
    grad = draw(args.requires_grad)
    check_grad(grad, dtype)
    layout = draw(args.layouts(shape, on))
    stored = math.prod(1 if d in layout.expanded else s for d, s in enumerate(shape))
    values = draw(draw_values(dtype, stored, args.values, plan, on))
    spec = TensorSpec(shape, dtype, layout, values, where, grad)
    tensor = build_tensor(spec)
    if currently_in_test_context():
        note(f"tensors() drew {describe(tensor)}; rebuild it with build_tensor({spec!r})")
    return tensor


def tensors(
    *,
    dtypes: torch.dtype | st.SearchStrategy[torch.dtype] | None = None,
    shapes: Shape | st.SearchStrategy[Shape] = SHAPES,
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
      integers and bool, those `device` supports (about two tensors in five are integers or
      bools; floating only where `requires_grad` is not False). Inductor often computes where
      eager raises on integers or bools (softmax, var, ceil of bool), which the plugin reports:
      a test of a floating-only function passes ``dtypes=tcst.float_dtypes()``.
    - `shapes`: a shape or a strategy of them (default :func:`shapes`, with its size classes).
    - `layouts`: layout kinds (see :func:`layouts`), each class of them (transposed, channels_last,
      sliced, expanded) switched on per draw, or a function from a shape to a strategy of
      :class:`Layout`, e.g. ``functools.partial(layouts, max_step=5)``. Storage outside the
      tensor's window holds NaN (or the dtype's maximum): a kernel reading past it diverges.
    - Values (see :class:`Values`) are finite, reproducible from a drawn seed, and every element
      of every dtype lies within `min_value` and `max_value` (``min_value=0, max_value=n - 1``
      for indices; a bool is True only above 0): a dtype none of whose values does is not
      drawn. Ordinary values are small integers, standard normal or wide (2**-10 to 2**10);
      `positive` makes them all positive, `zeros` about half of them 0 (one or the other).
    - Edge values (floating and complex; :mod:`pytest_torchcompile.strategies._edges`), where real
      miscompiles were found, each class switched off by its keyword: `ties` (a lattice ``k *
      c``, k in -2..2, c a common constant such as 0.1 or a float literal of the program,
      rounded to the dtype: equal elements, +-0, kinks, and tensors of a :func:`tensor_groups`
      group that differ by exactly c, e.g. a margin). The program's literals are those
      Hypothesis collects from the code under test and those of the running test (its function,
      what it nests, and the helpers and float constants of its module it names), which
      Hypothesis skips. `offsets` (a large common offset, ~1e5 in float32), `near_limits`
      (magnitudes whose squares overflow) and `exact_sums` (rows of decimals summing to an
      integer). Where edge classes are on, they take most of the floating tensors.
    - Special values (NaN, +-inf, -0.0, subnormals, the range's extremes, full-range integers)
      are planted at 1 to 3 positions, as two classes: NaN and infinities, and the others. With
      ``specials=None`` they are on in one draw of four and three, True in half, False never.
      `allow_nan`, `allow_infinity` and `allow_subnormal` remove those kinds; NaN needs no
      bounds and an infinity none on its side, as in ``st.floats``.
    - `device` and `requires_grad`: values or strategies; the tensor is a leaf.

    Shrinks to no class on: float32, shape ``()``, contiguous, offset 0, no specials or edge
    values, small integers in [-3, 3] from seed 0 (ties shrink towards the constant 1). Not to
    zeros, which would hide the divergence a shrunk example reports (0 * anything is 0); small
    integers still differ and are exact in every dtype. A failing test prints each tensor's
    :func:`describe` line and the :class:`TensorSpec` that rebuilds it.

    :raises InvalidArgument: when called, for any argument given as a value that does not fit:
        a dtype these strategies do not make, `device` does not support or that holds no value
        within the bounds, a shape that is not a sequence of non-negative integers, an unknown
        layout kind, a bound that is not a number or a `min_value` above `max_value`, a switch
        that is not a bool, ``requires_grad=True`` with a dtype that has no gradients. Values
        drawn from strategies are checked as they are drawn.

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
    where = device if isinstance(device, st.SearchStrategy) else device_value(device, "device")
    if not isinstance(dtypes, st.SearchStrategy | None):
        check_grad(requires_grad is True, dtype_value(dtypes, None))
    if not isinstance(shapes, st.SearchStrategy):
        shapes = shape_value(shapes, "shapes")
    check(
        isinstance(requires_grad, bool | st.SearchStrategy),
        f"requires_grad={requires_grad!r} must be a bool",
    )
    flags = {name: given[name] for name in ("allow_nan", "allow_infinity", "allow_subnormal")}
    switches: dict[str, object] = {name: given[name] for name in (*EDGE_CLASSES, *SIGNS)}
    check_value_args(
        given["min_value"], given["max_value"], {"specials": specials, **flags, **switches}
    )
    values = ValueOptions(
        given["min_value"],
        given["max_value"],
        specials,
        (flags["allow_nan"], flags["allow_infinity"], flags["allow_subnormal"]),
        tuple(edge for edge in EDGE_CLASSES if switches[edge]),
        tuple(sign for sign in SIGNS if switches[sign]),
    )
    dtypes_of, dtype_coins = dtype_choice(
        dtypes, where, requires_grad, (given["min_value"], given["max_value"])
    )
    layouts_of, layout_coins = layouts_arg(given["layouts"])
    return _TensorArgs(
        dtypes_of,
        as_strategy(shapes),
        layouts_of,
        as_strategy(where),
        as_strategy(requires_grad),
        values,
        layout_coins + dtype_coins + values.coins(),
    )


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
    on = draw(swarm(args.coins))
    if same_dtype:
        dtype = draw(args.dtypes(on))
        args = dataclasses.replace(args, dtypes=lambda _: st.just(dtype))
    members = [dataclasses.replace(args, shapes=st.just(s)) for s in draw(shape_group)]
    # One distribution for the group's floating tensors: ties on one lattice, one offset.
    plan = draw(group_plans(tuple(e for e in args.values.edges if e in on)))
    return tuple(draw(_tensors(member, plan, on)) for member in members)


_TENSOR_DEFAULTS = {name: p.default for name, p in inspect.signature(tensors).parameters.items()}


def tensor_groups(
    n: int,
    *,
    shapes: Shape | st.SearchStrategy[Shape] = SHAPES,
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
    where = device if isinstance(device, st.SearchStrategy) else device_value(device, "device")
    tensors(dtypes=dtypes, device=where, **options)  # only to check the options now, not when drawn
    return _tensor_groups(group, dtypes, same_dtype, as_strategy(where), options)
