"""Where module calls enter Python: `nn.Module.__call__` and every class that overrides it.

Libraries such as GPyTorch give their base module its own `__call__` (calling `forward` and
wrapping the result), so a call of one of their models never reaches `nn.Module.__call__`.
`CallSites` finds each class whose `__call__` differs from the one it inherits from
`nn.Module`'s, and wraps them all; `suspended()` puts the originals back while a replay runs, so
Dynamo traces nested calls as it would without the plugin. `Constructions` records the module
classes a test constructs, so the coverage table can name those no check reached: through
`nn.Module.__new__`, which every construction passes, `super().__init__()` or not.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import torch

# a class's original __call__ -> the wrapper installed in its place
WrapperFactory = Callable[[Callable[..., Any]], Callable[..., Any]]


def qualified_name(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def overriding_classes() -> list[type[torch.nn.Module]]:
    """`nn.Module` and each subclass that defines its own `__call__`, bases before subclasses.

    torch's own overrides are left alone: they are its machinery (`OptimizedModule`, the
    per-instance classes of fx `GraphModule`s, `ParameterList`, which refuses calls), not modules
    a test calls as a model.
    """
    base_call = torch.nn.Module.__dict__["__call__"]
    found: list[type[torch.nn.Module]] = [torch.nn.Module]
    for cls in _subclasses_outside_torch():
        own = cls.__dict__.get("__call__")
        if own is not None and own is not base_call and callable(own):
            found.append(cls)
    return found


def _subclasses_outside_torch() -> list[type[torch.nn.Module]]:
    """Every subclass of `nn.Module` defined outside torch, bases before subclasses."""
    found: list[type[torch.nn.Module]] = []
    seen: set[type] = {torch.nn.Module}
    pending = list(torch.nn.Module.__subclasses__())
    while pending:
        cls = pending.pop(0)
        if cls in seen:
            continue
        seen.add(cls)
        if not _in_torch(cls):
            found.append(cls)
        pending += cls.__subclasses__()
    return found


def _in_torch(cls: type) -> bool:
    return cls.__module__ == "torch" or cls.__module__.startswith("torch.")


class Patches:
    """Wrappers set in place of originals: `suspended()` puts the originals back while a replay
    runs, so Dynamo traces what the test would run without the plugin."""

    @contextmanager
    def suspended(self) -> Iterator[None]:
        self._set(wrapped=False)
        try:
            yield
        finally:
            self._set(wrapped=True)

    def _set(self, *, wrapped: bool) -> None:
        raise NotImplementedError


class CallSites(Patches):
    """The wrappers on `__call__` of `nn.Module` and of the classes that override it."""

    def __init__(self, make_wrapper: WrapperFactory) -> None:
        self._make_wrapper = make_wrapper
        # class -> (its original __call__, our wrapper)
        self._patched: dict[type, tuple[Callable[..., Any], Callable[..., Any]]] = {}

    @property
    def classes(self) -> list[type]:
        return list(self._patched)

    def install(self) -> None:
        for cls in overriding_classes():
            original = cls.__dict__["__call__"]
            self._patched[cls] = (original, self._make_wrapper(original))
        self._set(wrapped=True)

    def remove(self) -> None:
        self._set(wrapped=False)
        self._patched.clear()

    def _set(self, *, wrapped: bool) -> None:
        """Set each class's `__call__`, unless someone else (torch.fx tracing) replaced ours."""
        for cls, (original, wrapper) in self._patched.items():
            current = cls.__dict__.get("__call__")
            if current is original or current is wrapper:
                type.__setattr__(cls, "__call__", wrapper if wrapped else original)


class Constructions:
    """The module classes a test constructs while active (each instance once, by its class).

    Seen through `nn.Module.__new__`: it runs before any `__init__` (a class that skips
    `super().__init__()` is seen too) and has returned when `__init__` runs, so no frame is
    added to what an `__init__` sees of its caller (torch_geometric's `Sequential` reads the
    caller's module from `inspect.stack()`). Paused while the checker runs: the modules
    torch.compile builds (graph modules, the compiled wrapper) are the checker's, not the test's.
    """

    def __init__(self) -> None:
        self.classes: set[str] = set()
        self._paused = False

    @contextmanager
    def paused(self) -> Iterator[None]:
        paused, self._paused = self._paused, True
        try:
            yield
        finally:
            self._paused = paused

    def __enter__(self) -> Constructions:
        _install_new()
        _active.append(self)
        return self

    def __exit__(self, *exc: object) -> None:
        _active.remove(self)

    def _seen(self, cls: type) -> None:
        if not self._paused and _a_model(cls):
            self.classes.add(qualified_name(cls))


_active: list[Constructions] = []  # the Constructions recording now (the innermost last)


def _module_new(cls: type[torch.nn.Module], *args: Any, **kwargs: Any) -> torch.nn.Module:
    """`nn.Module.__new__` while the plugin observes constructions: after noting the class, the
    `__new__` the class would reach without it, the next after nn.Module in its MRO (a C base's
    own, as ptwt's wavelets subclass pywt's Cython `ContinuousWavelet`; a Python base's, which
    may do work), with the constructor's arguments; `object.__new__`, which takes none, where
    that is all there is."""
    if _active:
        _active[-1]._seen(cls)
    # Read from the MRO's dicts, not through super(): Dynamo traces this where a compiled
    # function builds a module, and hands super()'s bound __new__ back as something else.
    mro = cls.__mro__
    owner = next(base for base in mro[mro.index(torch.nn.Module) + 1 :] if "__new__" in vars(base))
    if owner is object:
        return object.__new__(cls)
    return owner.__new__(cls, *args, **kwargs)


def _install_new() -> None:
    """Set `_module_new` as `nn.Module.__new__`, once for the process: CPython cannot take a
    `__new__` back out of a class (its subclasses would keep calling it through a slot that then
    refuses their constructor's arguments), so it stays, passing straight through between
    tests. A `__new__` someone else set is left alone (and nothing is seen)."""
    own = torch.nn.Module.__dict__.get("__new__")
    if own is None:
        type.__setattr__(torch.nn.Module, "__new__", staticmethod(_module_new))


def _a_model(cls: type) -> bool:
    """Whether constructing `cls` is building a model: torch's own compile and tracing machinery
    (graph modules, compiled and scripted wrappers, a bare `nn.Module` root) is not."""
    if cls is torch.nn.Module:
        return False
    return not _in_torch(cls) or cls.__module__.startswith("torch.nn.")


__all__ = ["CallSites", "Constructions", "Patches", "overriding_classes", "qualified_name"]
