"""Python state a call can change besides tensors: part of parity where it can be seen.

Two kinds, each compared as the change each side made:

- plain attributes (numbers, strings, bools, None, and lists/dicts/tuples/sets of them) of the
  modules and objects among the arguments: each side has its own copy, so both are read after
  the call;
- mutable containers (list, dict, set) reachable from the callable: its closure cells and the
  globals its code names, and, through user-defined functions and classes found there, theirs.
  Both sides share these, so the checker snapshots them before the compiled run, reads them
  after it, puts the snapshot back for the eager run, and reads them again.

Only code in user files is followed (not torch, pytest or the standard library), a few levels
deep, so the walk stays small and never touches the plugin's or the test runner's own state.
"""

from __future__ import annotations

import copy
import inspect
import types
from collections.abc import Callable, Iterator
from typing import Any

import torch

from pytest_torchcompile import _paths
from pytest_torchcompile.running.copier import clone_tree

_CONTAINERS = (list, dict, set)
_SCALARS = (bool, int, float, complex, str, bytes, type(None))
_DEPTH = 3  # functions and classes followed from the callable


def is_plain(value: Any, depth: int = 0) -> bool:
    """Numbers, strings, bools, None, and containers of them (tensors inside containers too)."""
    if isinstance(value, _SCALARS) or (depth and isinstance(value, torch.Tensor)):
        return True
    if depth > 4:
        return False
    if isinstance(value, (list, tuple, set, frozenset)):
        return all(is_plain(item, depth + 1) for item in value)
    if isinstance(value, dict):
        return all(
            isinstance(key, _SCALARS) and is_plain(item, depth + 1) for key, item in value.items()
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


class SharedContainers:
    """The mutable containers a callable can reach, by a name the user recognises; and the
    module-level objects among a call's inputs, which every copy of the call shares
    (`copier.shared_objects`), by their attributes."""

    def __init__(self, fn: Callable[..., Any], objects: list[Any] | None = None) -> None:
        self.found: dict[str, Any] = dict(_reachable(fn))
        self.objects = objects or []

    def with_objects(self, objects: list[Any]) -> SharedContainers:
        """The same containers, with the shared objects of one call."""
        shared = copy.copy(self)
        shared.objects = objects
        return shared

    def snapshot(self) -> Snapshot:
        containers = {label: clone_tree(c) for label, c in self.found.items()}
        return containers, [_attributes(vars(obj)) for obj in self.objects]

    def restore(self, snapshot: Snapshot) -> None:
        """Put every container and shared object back to `snapshot`, in place (the program
        holds references to them)."""
        containers, attributes = snapshot
        for label, container in self.found.items():
            saved = clone_tree(containers[label])
            if isinstance(container, list):
                container[:] = saved
            else:
                container.clear()
                container.update(saved)
        for obj, saved_attributes in zip(self.objects, attributes, strict=True):
            held = vars(obj)
            held.clear()  # attributes rebound to other objects, and ones the call added
            held.update(_attributes(saved_attributes))

    def state(self) -> dict[str, Any]:
        """Each container as it is now, named for the failure message."""
        return {f"{label} after the call": clone_tree(c) for label, c in self.found.items()}


Snapshot = tuple[dict[str, Any], list[dict[str, Any]]]  # containers by label; objects' attributes


def _attributes(held: dict[str, Any]) -> dict[str, Any]:
    """An object's attributes as they are: each bound to the same object, plain values copied
    (a list the call appends to is put back as it was)."""
    return {name: copy_plain(value) if is_plain(value) else value for name, value in held.items()}


def _reachable(fn: Callable[..., Any]) -> Iterator[tuple[str, Any]]:
    """From a module: every method of its classes in user files (a library's `__call__` runs
    hooks a test overrides, not only `forward`); from a function: the function."""
    seen: set[int] = set()
    if not isinstance(fn, torch.nn.Module):
        yield from _function_containers(fn, seen, _DEPTH)
        return
    for cls in type(fn).__mro__:
        yield from _class_containers(cls, seen)
        if _defined_in_user_file(cls):
            for member in vars(cls).values():
                yield from _function_containers(member, seen, _DEPTH)


def _function_containers(fn: Any, seen: set[int], depth: int) -> Iterator[tuple[str, Any]]:
    fn = inspect.unwrap(fn) if callable(fn) else fn
    fn = getattr(fn, "__func__", fn)  # bound methods
    code = getattr(fn, "__code__", None)
    if not isinstance(fn, types.FunctionType) or code is None or id(fn) in seen:
        return
    seen.add(id(fn))
    if not _is_user_file(code.co_filename):
        return
    cells = zip(code.co_freevars, fn.__closure__ or (), strict=False)
    values = [(f"closure variable {name!r}", cell.cell_contents) for name, cell in _live(cells)]
    values += [
        (f"global {name!r}", fn.__globals__[name])
        for name in _names(code)
        if name in fn.__globals__
    ]
    for label, value in values:
        if isinstance(value, _CONTAINERS) and id(value) not in seen and is_plain(value):
            seen.add(id(value))
            yield label, value
        elif depth and isinstance(value, types.FunctionType):
            yield from _function_containers(value, seen, depth - 1)
        elif depth and isinstance(value, type) and id(value) not in seen:
            seen.add(id(value))
            yield from _class_containers(value, seen)
            for member in vars(value).values():
                yield from _function_containers(member, seen, depth - 1)


def _defined_in_user_file(cls: type) -> bool:
    module = getattr(inspect.getmodule(cls), "__file__", None)
    return module is not None and _is_user_file(module)


def _class_containers(cls: type, seen: set[int]) -> Iterator[tuple[str, Any]]:
    """Containers held as class attributes (`items = []` in the class body)."""
    if not _defined_in_user_file(cls):
        return
    for name, value in vars(cls).items():
        fresh = isinstance(value, _CONTAINERS) and id(value) not in seen
        if fresh and not name.startswith("_") and is_plain(value):
            seen.add(id(value))
            yield f"class attribute {cls.__qualname__}.{name}", value


def _live(cells: Iterator[tuple[str, Any]]) -> Iterator[tuple[str, Any]]:
    for name, cell in cells:
        try:
            cell.cell_contents  # noqa: B018 (an empty cell raises)
        except ValueError:
            continue
        yield name, cell


def _names(code: types.CodeType) -> Iterator[str]:
    """Global names a function's code uses, nested functions and comprehensions included."""
    yield from code.co_names
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _names(const)


def _is_user_file(filename: str) -> bool:
    return not _paths.is_under(filename, _paths.TORCH_AND_STDLIB + _paths.INSTALLED)
