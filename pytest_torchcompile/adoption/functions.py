"""--compile-parity-functions: the public functions of named packages, intercepted as module calls are.

A functional library's suite calls functions, not modules, so `nn.Module.__call__` never sees it.
`find` imports each named package and reads the namespaces of its modules already imported: a
public name (not starting with `_`) whose value is a plain Python function defined in the package
(`fn.__module__` inside it) is wrapped at every binding in those namespaces, and `including` adds
the bindings a test module made (`from pkg.mod import f` binds `f` in the test's globals). Anything
else public and callable defined there (a builtin or C extension function, an autograd
`Function.apply`, a TorchScript function, a class other than `nn.Module`) is listed with what it is,
not wrapped: it has no Python frame to replace without changing what the test calls.

`FunctionSites` sets the wrappers for one test body and puts every original back afterwards (and
while a replay runs, so Dynamo traces the originals), leaving each namespace as it found it.
"""

from __future__ import annotations

import importlib
import sys
import types
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any

import torch

from pytest_torchcompile.adoption.callsites import Patches

# a function's qualified name and the function -> the wrapper installed in its place
WrapperFactory = Callable[[str, types.FunctionType], Callable[..., Any]]
Namespace = dict[str, Any]


@dataclass(frozen=True)
class Found:
    """The functions of some packages: what is wrapped, where it is bound, what is not wrapped."""

    functions: dict[str, types.FunctionType]  # qualified name (pkg.mod.f) -> function
    bindings: tuple[tuple[Namespace, str, types.FunctionType], ...]  # namespace, name, function
    unwrapped: dict[str, str]  # qualified name -> why it is not wrapped

    def including(self, namespace: Namespace) -> Found:
        """The same functions, also wrapped where `namespace` (a test module's globals) binds
        them."""
        ours = {id(fn) for fn in self.functions.values()}
        extra = tuple(
            (namespace, name, value)
            for name, value in namespace.items()
            if isinstance(value, types.FunctionType) and id(value) in ours
        )
        return Found(self.functions, self.bindings + extra, self.unwrapped)


def find(packages: tuple[str, ...], cache: dict[Hashable, Found]) -> Found:
    """The functions of `packages` (imported here if the test has not); ImportError if one
    cannot be imported.

    `cache` (the session's) keeps what was found until more of the packages' modules are
    imported, so each test pays for a walk of `sys.modules`' names, not of every namespace.
    """
    for package in packages:
        importlib.import_module(package)
    modules = [
        module
        for name, module in list(sys.modules.items())
        if module is not None and _inside(name, packages)
    ]
    key = (packages, len(modules))
    found = cache.get(key)
    if found is None:
        found = cache[key] = _walk(modules, packages)
    return found


def _walk(modules: list[types.ModuleType], packages: tuple[str, ...]) -> Found:
    functions: dict[str, types.FunctionType] = {}
    bindings: list[tuple[Namespace, str, types.FunctionType]] = []
    unwrapped: dict[str, str] = {}
    for module in modules:
        namespace = vars(module)
        for name, value in list(namespace.items()):
            origin = _origin(value)
            if origin is None or not _inside(origin, packages):
                continue
            if isinstance(value, types.FunctionType):
                if _public(value.__name__):
                    functions.setdefault(f"{origin}.{value.__qualname__}", value)
                    bindings.append((namespace, name, value))
            elif _public(name) and callable(value) and not _a_module_class(value):
                unwrapped.setdefault(f"{origin}.{_qualname(value, name)}", _what(value))
    return Found(functions, tuple(bindings), unwrapped)


def _inside(module: str, packages: tuple[str, ...]) -> bool:
    return any(module == package or module.startswith(package + ".") for package in packages)


def _public(name: str) -> bool:
    """A name a user calls: not private, not a lambda's or comprehension's."""
    return name.isidentifier() and not name.startswith("_")


def _origin(value: Any) -> str | None:
    """The module that defined `value`; for a method bound to a class (`Function.apply`), the
    class's."""
    owner = getattr(value, "__self__", None)
    if isinstance(owner, type):
        return owner.__module__
    module = getattr(value, "__module__", None)
    return module if isinstance(module, str) else None


def _qualname(value: Any, name: str) -> str:
    """`F.apply` for a method bound to class `F`, else the value's own qualified name."""
    owner = getattr(value, "__self__", None)
    if isinstance(owner, type):
        return f"{owner.__qualname__}.{getattr(value, '__name__', name)}"
    return str(getattr(value, "__qualname__", name))


def _a_module_class(value: Any) -> bool:
    """An `nn.Module` class: its calls are intercepted as module calls already."""
    return isinstance(value, type) and issubclass(value, torch.nn.Module)


def _what(value: Any) -> str:
    """Why a callable is not wrapped, as the coverage table says it."""
    owner = getattr(value, "__self__", None)
    if isinstance(owner, type) and issubclass(owner, torch.autograd.Function):
        what = f"torch.autograd.Function.apply of {owner.__qualname__}"
    elif isinstance(value, type):
        what = "a class"
    elif isinstance(value, types.BuiltinFunctionType):
        what = "a builtin or C extension function"
    elif isinstance(value, torch.jit.ScriptFunction):
        what = "a TorchScript function"
    else:
        what = f"a {type(value).__module__}.{type(value).__qualname__}"
    return f"not a plain Python function: {what}"


def _scriptable(wrapper: Callable[..., Any], original: types.FunctionType) -> Callable[..., Any]:
    """`wrapper`, which TorchScript compiles as `original`: scripting a module whose code calls a
    wrapped function (or scripting the function) reads the wrapper from its globals, and would
    otherwise compile the wrapper's `*args` with the original's source."""
    wrapper.__prepare_scriptable__ = lambda: original  # type: ignore[attr-defined]
    return wrapper


class FunctionSites(Patches):
    """The wrappers at every binding of the found functions, while one test body runs."""

    def __init__(self, found: Found, make_wrapper: WrapperFactory) -> None:
        self._found = found
        self._make_wrapper = make_wrapper
        self._wrappers: dict[int, Callable[..., Any]] = {}  # id of a function -> its wrapper

    def install(self) -> None:
        self._wrappers = {
            id(fn): _scriptable(self._make_wrapper(name, fn), fn)
            for name, fn in self._found.functions.items()
        }
        self._set(wrapped=True)

    def remove(self) -> None:
        self._set(wrapped=False)
        self._wrappers.clear()

    def _set(self, *, wrapped: bool) -> None:
        """Bind each wrapper or original, unless the test rebound the name itself."""
        for namespace, name, original in self._found.bindings:
            wrapper = self._wrappers.get(id(original))
            current = namespace.get(name)
            if wrapper is not None and (current is original or current is wrapper):
                namespace[name] = wrapper if wrapped else original


__all__ = ["Found", "FunctionSites", "find"]
