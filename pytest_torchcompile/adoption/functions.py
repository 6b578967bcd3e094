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

A function is intercepted in place, not rebound: `FunctionSites` swaps each function's
`__code__` for a trampoline with the same parameters, file and line (`inspect.signature`,
`inspect.getsource` and TorchScript see the original) that hands the call to the test's wrapper,
which runs a copy of the original. The function object stays the one every holder has: an
object made at import that holds it still pickles by name, `is` and registries keyed by it
still match, and a call through any reference is intercepted. Generator and coroutine functions
are listed, not wrapped (their calls return iterators: no values to compare, and a trampoline
would change what `inspect` says they are). Every original `__code__` is put back after the test
body, and while a replay runs, so Dynamo traces the originals.
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

# a function's qualified name and the copy of it the wrapper runs -> the wrapper
WrapperFactory = Callable[[str, types.FunctionType], Callable[..., Any]]
Namespace = dict[str, Any]


@dataclass(frozen=True)
class Found:
    """The functions of some packages: what is wrapped, and what is not wrapped and why."""

    functions: dict[str, types.FunctionType]  # qualified name (pkg.mod.f) -> function
    unwrapped: dict[str, str]  # qualified name -> why it is not wrapped


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
            found = Found({}, dict.fromkeys(packages, why))
        cache[key] = found
    return found


def _walk(modules: list[types.ModuleType], packages: tuple[str, ...]) -> Found:
    """What the modules' namespaces bind, read statically: no attribute of a value is looked
    up through its class's code (a lazy loader's `__getattr__` imports, or asks on stdin)."""
    functions: dict[str, types.FunctionType] = {}
    unwrapped: dict[str, str] = {}
    for module in modules:
        namespace = vars(module)
        for name, value in list(namespace.items()):
            origin = _origin(value)
            if origin is None or not _inside(origin, packages):
                continue
            if type(value) is types.FunctionType:
                if _public(value.__name__):
                    qualified = f"{origin}.{value.__qualname__}"
                    why = None if qualified in functions else _unhookable(value)
                    if why is None:
                        functions.setdefault(qualified, value)
                    else:
                        unwrapped.setdefault(qualified, why)
            elif _public(name) and callable(value) and not _a_module_class(value):
                unwrapped.setdefault(f"{origin}.{_qualname(value, name)}", _what(value))
        for name in _lazy_names(module, namespace):
            unwrapped.setdefault(f"{module.__name__}.{name}", LAZY)
    return Found(functions, unwrapped)


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


_ITERATING = (
    inspect.CO_GENERATOR
    | inspect.CO_COROUTINE
    | inspect.CO_ASYNC_GENERATOR
    | inspect.CO_ITERABLE_COROUTINE
)
_CALL = "__pytest_torchcompile_called"  # the trampoline's own locals, besides the parameters
_OWN_LOCALS = {_CALL, "__tracebackhide__"}


@dataclass
class _Hook:
    """One function's interception: its own code, the trampoline set in its place, the copy of
    it that the wrapper runs, and the wrapper while a test body runs (None otherwise)."""

    function: types.FunctionType
    code: types.CodeType
    trampoline: types.CodeType
    copy: types.FunctionType
    wrapper: Callable[..., Any] | None = None

    @classmethod
    def of(cls, fn: types.FunctionType) -> _Hook:
        """The function's hook, made once for the process: the copy a wrapper runs is the same
        object in every test, so the session's compile of it serves every test."""
        hook = _HOOKS.get(id(fn))
        if hook is None or hook.function is not fn:
            hook = _HOOKS[id(fn)] = cls(fn, fn.__code__, _trampoline(fn), _copy(fn))
        return hook

    def set(self, wrapped: bool) -> None:
        """The trampoline or the original code, unless something else replaced the code."""
        current = self.function.__code__
        if current is self.code or current is self.trampoline:
            self.function.__code__ = self.trampoline if wrapped else self.code


# id of a function -> its hook. A trampoline reaches its wrapper only through this: a code
# object sees its function's globals (the library's, which must stay as they are), its
# constants (Dynamo cannot trace a function held as one) and what it imports.
_HOOKS: dict[int, _Hook] = {}


def _called(key: int, /, *args: Any, **kwargs: Any) -> Any:
    """What a trampoline calls: the wrapper, or the original where none is set (a trampoline
    some other code kept running past the test body)."""
    __tracebackhide__ = True
    hook = _HOOKS[key]
    return (hook.wrapper or hook.copy)(*args, **kwargs)


def _unhookable(fn: types.FunctionType) -> str | None:
    """Why `fn` cannot be intercepted in place, or None."""
    if fn.__code__.co_flags & _ITERATING:
        return "not wrapped: a generator or coroutine function (its calls return iterators)"
    try:
        _Hook.of(fn)
    except Exception as exc:  # the plugin's own limit: the function runs as plain
        return f"not wrapped: no trampoline can stand in for its code ({type(exc).__name__}: {exc})"
    return None


def _trampoline(fn: types.FunctionType) -> types.CodeType:
    """Code with `fn`'s parameters, free variables (their count must match its closure), file,
    name and first line that passes every argument on to `_called`, positionally where `fn`
    takes it so (the function object fills in its defaults, as it did for the original)."""
    code = fn.__code__
    names = code.co_varnames
    positional = list(names[: code.co_argcount])
    keyword = list(names[code.co_argcount : code.co_argcount + code.co_kwonlyargcount])
    rest = iter(names[code.co_argcount + code.co_kwonlyargcount :])
    star = next(rest) if code.co_flags & inspect.CO_VARARGS else None
    stars = next(rest) if code.co_flags & inspect.CO_VARKEYWORDS else None
    if _OWN_LOCALS & {*positional, *keyword, star, stars}:
        raise ValueError("a parameter has the name of one of the trampoline's locals")
    params = positional[:]
    if code.co_posonlyargcount:
        params.insert(code.co_posonlyargcount, "/")
    if star or keyword:
        params.append(f"*{star or ''}")
    params += keyword + ([f"**{stars}"] if stars else [])
    passed = positional + ([f"*{star}"] if star else []) + [f"{k}={k}" for k in keyword]
    passed += [f"**{stars}"] if stars else []
    free = ", ".join(code.co_freevars)
    source = "\n".join(
        [
            "def outer():",
            f"    {free.replace(', ', ' = ')} = None" if free else "",
            f"    def trampoline({', '.join(params)}):",
            f"        nonlocal {free}" if free else "",
            "        __tracebackhide__ = True",
            f"        from {__name__} import _called as {_CALL}",
            f"        return {_CALL}({', '.join([str(id(fn)), *passed])})",
            "    return trampoline",
        ]
    )
    namespace: Namespace = {}
    exec(compile(source, code.co_filename, "exec"), namespace)
    made: types.CodeType = namespace["outer"]().__code__
    if made.co_freevars != code.co_freevars:
        raise ValueError(f"free variables {made.co_freevars} for {code.co_freevars}")
    return made.replace(
        co_name=code.co_name,
        co_qualname=code.co_qualname,
        co_firstlineno=code.co_firstlineno,
    )


def _copy(fn: types.FunctionType) -> types.FunctionType:
    """`fn` as another function object with the original code: what the wrapper runs while
    `fn` itself runs the trampoline. Its attributes are `fn`'s own (one shared `__dict__`)."""
    copy = types.FunctionType(
        fn.__code__, fn.__globals__, fn.__name__, fn.__defaults__, fn.__closure__
    )
    copy.__kwdefaults__ = fn.__kwdefaults__
    copy.__qualname__ = fn.__qualname__
    copy.__module__ = fn.__module__
    copy.__doc__ = fn.__doc__
    copy.__annotations__ = fn.__annotations__
    copy.__dict__ = fn.__dict__
    return copy


class FunctionSites(Patches):
    """The trampolines in the found functions, while one test body runs."""

    def __init__(self, found: Found, make_wrapper: WrapperFactory) -> None:
        self._hooks = [(name, _Hook.of(fn)) for name, fn in found.functions.items()]
        self._make_wrapper = make_wrapper

    def install(self) -> None:
        for name, hook in self._hooks:
            hook.wrapper = self._make_wrapper(name, hook.copy)
        self._set(wrapped=True)

    def remove(self) -> None:
        self._set(wrapped=False)
        for _, hook in self._hooks:
            hook.wrapper = None

    def _set(self, *, wrapped: bool) -> None:
        for _, hook in self._hooks:
            hook.set(wrapped)


__all__ = ["Found", "FunctionSites", "find"]
