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
        return [(f"[{k!r}]", item) for k, item in value.items()]
    return None


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
    """What an object that compares by identity holds, by attribute name: its instance state;
    None where it keeps none in a `__dict__` (slots, or a C type), and cannot be compared."""
    try:
        state = getattr(value, "__dict__", None)
    except Exception:  # a __dict__ that refuses to be read
        return None
    if not isinstance(state, dict):
        return None
    return [(f".{name}", item) for name, item in sorted(state.items())]


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


__all__ = ["Children", "by_identity", "children", "containers", "held", "leaves", "tensors"]
