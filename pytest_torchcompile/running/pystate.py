"""Python state a call can change besides tensors: plain values, and what holds other objects.

Plain attributes (numbers, strings, bools, None, and lists/dicts/tuples/sets of them) of the
modules and objects among the arguments are part of parity: each side has its own copy, so both
are read after the call. What the callable reaches outside its copies (globals, closures,
containers) is the world around the call (world.py).
"""

from __future__ import annotations

from typing import Any

import torch

from pytest_torchcompile.running.copier import clone_tree

_CONTAINERS = (list, dict, set)
_SCALARS = (bool, int, float, complex, str, bytes, type(None))
_DEPTH = 3  # functions and classes followed from the callable


def is_plain(value: Any, depth: int = 0, *, tensors: bool = True) -> bool:
    """Numbers, strings, bools, None, and containers of them (with `tensors`, tensors inside
    containers too). Read from types alone: a proxy's `__class__` is never asked."""
    kind = type(value)
    if issubclass(kind, _SCALARS) or (depth and tensors and issubclass(kind, torch.Tensor)):
        return True
    if depth > 4:
        return False
    if issubclass(kind, (list, tuple, set, frozenset)):
        return all(is_plain(item, depth + 1, tensors=tensors) for item in value)
    if issubclass(kind, dict):
        return all(
            issubclass(type(key), _SCALARS) and is_plain(item, depth + 1, tensors=tensors)
            for key, item in value.items()
        )
    return False


def plain_attributes(obj: Any) -> dict[str, Any]:
    """The public plain attributes of an object (a module's training flag, a counter, a log)."""
    return {
        name: value
        for name, value in vars(obj).items()
        if not name.startswith("_") and is_plain(value)
    }


def bound_attributes(obj: Any) -> dict[str, Any]:
    """The public attributes of a module that hold anything but a plain value, tensor or module:
    an object it switches between (`self.current = self.right`), a function, a config."""
    return {
        name: value
        for name, value in vars(obj).items()
        if not name.startswith("_")
        and not isinstance(value, (torch.Tensor, torch.nn.Module))
        and not is_plain(value)
    }


def copy_plain(value: Any) -> Any:
    """A copy of a plain value that later writes to the original cannot reach.

    Scalars, and tuples and frozensets of them, are their own copy: copying would only spend
    time (most module attributes are flags, sizes and tuples of sizes). The rest goes through
    the checker's one copier, which takes the non-leaf tensors a list may hold.
    """
    return value if _immutable(value) else clone_tree(value)


def _immutable(value: Any, depth: int = 0) -> bool:
    if type(value) in _SCALARS:
        return True
    if isinstance(value, (tuple, frozenset)) and depth < 4:
        return all(_immutable(item, depth + 1) for item in value)
    return False
