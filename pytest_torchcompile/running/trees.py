"""The walks into a call's values: one home for every room that looks inside.

A call's inputs are walked through tuples, lists and dicts (`containers`, `leaves`, `tensors`):
that is where inputs sit, and what copies and re-runs must reach. Its outputs are walked further
(`children`), to every part that can be compared.

Containers (dataclasses, named tuples and structseqs, tuples, lists, dicts) are walked as ever;
beyond them, what a library returns is looked into the ways it offers: a type registered with
torch's pytree, a traceable tensor subclass's inner tensors (`__tensor_flatten__`), a
distribution's tensors, and a dense view (`to_dense()`, e.g. GPyTorch's `LinearOperator`). What
is left and compares by identity alone is compared by what it holds (`held`); where it holds
nothing the checker can see, it cannot be compared, and the checker says so rather than comparing
identities.
"""

from __future__ import annotations

import copy
import dataclasses
import enum
import types
from collections.abc import Iterator
from typing import Any

import torch
from torch import Tensor

from pytest_torchcompile import _compat

Children = list[tuple[str, Any]]


def containers(value: Any) -> Children | None:
    """The items of a tuple, list or dict, each with its suffix (`[0]`, `['k']`); None otherwise."""
    if isinstance(value, (tuple, list)):
        return [(f"[{i}]", item) for i, item in enumerate(value)]
    if isinstance(value, dict):
        return [(f"[{key_name(k, i)}]", item) for i, (k, item) in enumerate(value.items())]
    return None


def key_name(key: Any, position: int) -> str:
    """A dict key as a name both sides give alike: its repr, or where that is `object`'s (an
    address, which differs between a copy and its original: a cache keyed by objects) its type
    and position."""
    if getattr(type(key), "__repr__", None) is object.__repr__:
        return f"<{type(key).__qualname__} key {position}>"
    return repr(key)


def leaves(tree: Any) -> Iterator[Any]:
    """What sits inside tuples, lists and dicts, in order (a call's tensors and modules)."""
    items = containers(tree)
    if items is None:
        yield tree
        return
    for _, item in items:
        yield from leaves(item)


def tensors(tree: Any) -> list[Tensor]:
    """The tensors among `leaves(tree)`."""
    return [leaf for leaf in leaves(tree) if isinstance(leaf, Tensor)]


def children(value: Any, *, inner_tensors: bool = False) -> Children | None:
    """A node's children with the suffix each adds to its parent's name; None for a leaf.

    With `inner_tensors`, a tensor subclass that flattens (`__tensor_flatten__`) is a node of its
    inner tensors; otherwise every tensor is a leaf (what backward and copies need).
    """
    if isinstance(value, Tensor):
        return _inner_tensors(value) if inner_tensors else None
    if isinstance(value, torch.Size):
        return None
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return [(f".{f.name}", getattr(value, f.name)) for f in dataclasses.fields(value)]
    if isinstance(value, tuple):
        # namedtuples have _fields; torch.return_types (structseqs) have __match_args__. A
        # subclass may refuse len() or iteration (e3nn's Irrep raises NotImplementedError):
        # its items are read as a tuple's.
        cls = type(value)
        names: tuple[str, ...] = getattr(cls, "_fields", ()) or getattr(cls, "__match_args__", ())
        items = [tuple.__getitem__(value, i) for i in range(tuple.__len__(value))]
        if len(names) == len(items):
            return [(f".{n}", v) for n, v in zip(names, items, strict=True)]
        return [(f"[{i}]", v) for i, v in enumerate(items)]
    if isinstance(value, (list, dict)):
        return containers(value)
    registered = _compat.pytree_children(value)
    if registered is not None:
        return registered
    if isinstance(value, torch.distributions.Distribution):
        return _distribution(value)
    if _dense_view(value):
        return [(".to_dense()", value.to_dense())]
    return None


def by_identity(value: Any) -> bool:
    """Whether a leaf that is no tensor compares by identity alone: its class keeps the equality
    of `object`, or one that a copy of the value fails (`return self is other`, as
    `torch.distributions.Transform` has). Two runs always build two such objects: they are
    compared by what they hold (`held`). Singletons (dtypes, enum members, classes, functions),
    plain values and modules are not."""
    if value is None or isinstance(value, (*_PLAIN_TYPES, *_IDENTITY_TYPES, torch.nn.Module)):
        return False
    equality: Any = type(value).__eq__
    if equality is object.__eq__:
        return True
    try:
        return not bool(copy.copy(value) == value)
    except Exception:  # no copy, or an equality that raises: leave it to the equality
        return False


def held(value: Any) -> Children | None:
    """What an object that compares by identity holds, by attribute name: its instance state
    (`__dict__` and slots); None where it keeps none there (a C type), and cannot be compared."""
    if static_dict(value) is None and not slots(value):
        return None
    return [(f".{name}", item) for name, item in sorted(object_attributes(value).items())]


_PLAIN_TYPES = (bool, int, float, complex, str, bytes, torch.dtype, torch.device, torch.Size)
_IDENTITY_TYPES = (
    enum.Enum,
    type,
    types.FunctionType,
    types.BuiltinFunctionType,
    types.MethodType,
    types.ModuleType,
)


def _inner_tensors(value: Tensor) -> Children | None:
    if type(value) in (Tensor, torch.nn.Parameter) or not hasattr(value, "__tensor_flatten__"):
        return None
    attrs, _ = value.__tensor_flatten__()
    return [(f".{attr}", getattr(value, attr)) for attr in attrs]


def _distribution(value: torch.distributions.Distribution) -> Children:
    """Its shapes and the tensors (or dense-viewable operators) it holds, by attribute name."""
    held = [
        (f".{name}", item)
        for name, item in sorted(vars(value).items())
        if isinstance(item, Tensor | torch.distributions.Distribution) or _dense_view(item)
    ]
    return [(".batch_shape", value.batch_shape), (".event_shape", value.event_shape), *held]


def _dense_view(value: Any) -> bool:
    return not isinstance(value, Tensor | type) and callable(getattr(value, "to_dense", None))


# --- objects, read statically ---------------------------------------------------------------


def static_dict(obj: Any) -> dict[str, Any] | None:
    """An object's instance `__dict__`, read without its `__getattr__`, properties or proxies."""
    try:
        held = object.__getattribute__(obj, "__dict__")
    except Exception:
        return None
    return held if type(held) is dict else None


def slots(obj: Any) -> dict[str, Any]:
    """An object's slots, by the name its class's namespace holds (a private name mangled),
    each with its member descriptor."""
    found: dict[str, Any] = {}
    for cls in type(obj).__mro__:
        declared = vars(cls).get("__slots__", ())
        for name in (declared,) if isinstance(declared, str) else declared:
            if name.startswith("__") and not name.endswith("__"):
                name = f"_{cls.__name__.lstrip('_')}{name}"
            member = vars(cls).get(name)
            if type(member) is types.MemberDescriptorType:
                found.setdefault(name, member)
    return found


EMPTY: Any = object()  # what `slot_value` gives for a slot that holds nothing


def slot_value(obj: Any, member: Any) -> Any:
    """What one slot holds (`member`: its descriptor, from `slots`), or EMPTY."""
    try:
        return member.__get__(obj, type(obj))
    except AttributeError:  # an empty slot
        return EMPTY


def object_attributes(obj: Any) -> dict[str, Any]:
    """An object's attributes: its `__dict__` and the slots that hold a value."""
    held = dict(static_dict(obj) or {})
    for name, member in slots(obj).items():
        value = slot_value(obj, member)
        if value is not EMPTY:
            held[name] = value
    return held


def set_attributes(obj: Any, values: dict[str, Any]) -> None:
    """Make an object's attributes (its `__dict__` and slots) exactly `values`, each bound to
    the object given, without its `__setattr__`: the ones not in `values` go."""
    members = slots(obj)
    for name, member in members.items():
        now = slot_value(obj, member)
        if name in values and now is not values[name]:
            member.__set__(obj, values[name])
        elif name not in values and now is not EMPTY:
            member.__delete__(obj)
    held = static_dict(obj)
    if held is None:
        return
    for name in [name for name in held if name not in values]:
        del held[name]
    for name, value in values.items():
        if name not in members and (name not in held or held[name] is not value):
            held[name] = value


__all__ = [
    "EMPTY",
    "Children",
    "by_identity",
    "children",
    "containers",
    "held",
    "key_name",
    "leaves",
    "object_attributes",
    "set_attributes",
    "slot_value",
    "slots",
    "static_dict",
    "tensors",
]
