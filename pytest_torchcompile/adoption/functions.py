"""--compile-parity-functions: the public functions of named packages, intercepted as module calls are.

A functional library's suite calls functions, not modules, so `nn.Module.__call__` never sees it.
`find` imports each named package and reads the namespaces of its modules already imported: a
public name (not starting with `_`) whose value is a plain Python function defined in the package
(`fn.__module__` inside it) is wrapped at every binding in those namespaces, and `including` adds
the bindings a test module made (`from pkg.mod import f` binds `f` in the test's globals). Anything
else public and callable defined there (a builtin or C extension function, an autograd
`Function.apply`, a TorchScript function, a class other than `nn.Module`) is listed with what it is,
not wrapped: it has no Python frame to replace without changing what the test calls.

Finding runs no code of the packages' beyond importing the named package: every value is read
statically (a lazy loader's `__getattr__` would import an optional dependency, or ask on stdin
whether to install it), and the names a module makes on first use (a module `__getattr__`) are
listed as not classified.

`FunctionSites` sets the wrappers for one test body and puts every original back afterwards (and
while a replay runs, so Dynamo traces the originals), leaving each namespace as it found it.
"""

from __future__ import annotations

import importlib
import inspect
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
            if type(value) is types.FunctionType and id(value) in ours
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
        try:
            found = _walk(modules, packages)
        except Exception as exc:  # the plugin's own failure: the tests run as plain
            why = f"finding functions failed ({type(exc).__name__}: {exc}): none is wrapped"
            found = Found({}, (), dict.fromkeys(packages, why))
        cache[key] = found
    return found


def _walk(modules: list[types.ModuleType], packages: tuple[str, ...]) -> Found:
    """What the modules' namespaces bind, read statically: no attribute of a value is looked
    up through its class's code (a lazy loader's `__getattr__` imports, or asks on stdin)."""
    functions: dict[str, types.FunctionType] = {}
    bindings: list[tuple[Namespace, str, types.FunctionType]] = []
    unwrapped: dict[str, str] = {}
    for module in modules:
        namespace = vars(module)
        for name, value in list(namespace.items()):
            origin = _origin(value)
            if origin is None or not _inside(origin, packages):
                continue
            if type(value) is types.FunctionType:
                if _public(value.__name__):
                    functions.setdefault(f"{origin}.{value.__qualname__}", value)
                    bindings.append((namespace, name, value))
            elif _public(name) and callable(value) and not _a_module_class(value):
                unwrapped.setdefault(f"{origin}.{_qualname(value, name)}", _what(value))
        for name in _lazy_names(module, namespace):
            unwrapped.setdefault(f"{module.__name__}.{name}", LAZY)
    return Found(functions, tuple(bindings), unwrapped)


LAZY = (
    "not classified: the module makes it on first use (module __getattr__), and finding "
    "functions never runs library code"
)


def _lazy_names(module: types.ModuleType, namespace: Namespace) -> list[str]:
    """The public names a module with a `__getattr__` (PEP 562, a lazy loader) lists in
    `__all__` but has not made yet."""
    listed = namespace.get("__all__")
    if "__getattr__" not in namespace or not isinstance(listed, (list, tuple)):
        return []
    return [n for n in listed if type(n) is str and _public(n) and n not in namespace]


def _inside(module: str, packages: tuple[str, ...]) -> bool:
    return any(module == package or module.startswith(package + ".") for package in packages)


def _public(name: str) -> bool:
    """A name a user calls: not private, not a lambda's or comprehension's."""
    return name.isidentifier() and not name.startswith("_")


def _static(value: Any, name: str) -> Any:
    """`value.name` where reading it runs no code of the program's: an entry of a namespace, or
    a C-level slot or getset of a builtin type (a function's `__module__`, a bound builtin's
    `__self__`); None otherwise (a property, a proxy's `__getattr__`)."""
    try:
        found = inspect.getattr_static(value, name)
    except AttributeError:
        return None
    if type(found) in (types.GetSetDescriptorType, types.MemberDescriptorType):
        return found.__get__(value, type(value))
    return None if hasattr(type(found), "__get__") else found


def _owner(value: Any) -> type | None:
    """The class a method is bound to (`Function.apply`), read statically."""
    owner = _static(value, "__self__")
    return owner if type(owner) is not type(None) and issubclass(type(owner), type) else None


def _origin(value: Any) -> str | None:
    """The module that defined `value`; for a method bound to a class (`Function.apply`), the
    class's."""
    owner = _owner(value)
    if owner is not None:
        module = vars(owner).get("__module__")
    elif issubclass(type(value), type):
        module = vars(value).get("__module__")
    else:
        module = _static(value, "__module__")
    return module if type(module) is str else None


def _qualname(value: Any, name: str) -> str:
    """`F.apply` for a method bound to class `F`, else the value's own qualified name."""
    owner = _owner(value)
    if owner is not None:
        method = _static(value, "__name__") or _static(_static(value, "__func__"), "__name__")
        return f"{owner.__qualname__}.{method or name}"
    qualname = vars(value).get("__qualname__") if issubclass(type(value), type) else None
    qualname = qualname or _static(value, "__qualname__")
    return qualname if type(qualname) is str else name


def _a_module_class(value: Any) -> bool:
    """An `nn.Module` class: its calls are intercepted as module calls already."""
    return issubclass(type(value), type) and issubclass(value, torch.nn.Module)


def _what(value: Any) -> str:
    """Why a callable is not wrapped, as the coverage table says it."""
    owner = _owner(value)
    kind = type(value)
    if owner is not None and issubclass(owner, torch.autograd.Function):
        what = f"torch.autograd.Function.apply of {owner.__qualname__}"
    elif issubclass(kind, type):
        what = "a class"
    elif issubclass(kind, types.BuiltinFunctionType):
        what = "a builtin or C extension function"
    elif issubclass(kind, torch.jit.ScriptFunction):
        what = "a TorchScript function"
    else:
        what = f"a {kind.__module__}.{kind.__qualname__}"
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
