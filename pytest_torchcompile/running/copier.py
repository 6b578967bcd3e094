"""The one copier: copy what a call can change, share what it cannot or must not copy.

Every copy the checker makes of a call (the compiled side's, the control's, each re-run's, the
state kept before the call) comes from `clone_tree`, so identity relations hold in every copy as
they do in the original:

- shared, never copied: immutable values, classes, functions and modules, and the objects a
  module's globals or a class's attributes reach (sentinels, enum-like singletons, shared
  configs, registry entries), so `s.mode is MODE_A` is as true of a copy as of the original.
  The modules looked into are those the copied objects' classes come from (where a library
  keeps its sentinels), outside torch and the standard library. A call can still change a
  shared object's attributes: the checker puts them back before each run (`shared_objects`);
- copied: tensors with their strides, storage offsets and aliasing (views of one storage stay
  views of one copied storage); non-leaf tensors anywhere, as non-leaves whose gradient flows to a
  copy of the leaf behind them; parameters with their `.grad` and attributes; nested tensors;
- objects through the copy protocol (`__deepcopy__`, `copyreg`, `__reduce_ex__`), walked by this
  copier so every part of them gets the rules above; a class whose `__new__` wants arguments, or
  that refuses the protocol, is rebuilt from `object.__new__` and its state.

Only what truly cannot be copied (a lock, a generator, a C handle) raises UncopyableInputError,
with the attribute path that leads to it.
"""

from __future__ import annotations

import contextlib
import copy
import copyreg
import enum
import functools
import inspect
import sys
import types
import weakref
from collections import OrderedDict
from collections.abc import Callable, Iterator
from typing import Any

import torch

from pytest_torchcompile import _compat, _paths
from pytest_torchcompile.errors import UncopyableInputError
from pytest_torchcompile.running.trees import object_attributes, set_attributes, static_dict

# What deepcopy treats as atomic, and torch's own immutable singletons.
_ATOMIC: tuple[type, ...] = (
    type(None),
    int,
    float,
    bool,
    complex,
    str,
    bytes,
    range,
    slice,
    type(Ellipsis),
    type(NotImplemented),
    types.CodeType,
    types.FunctionType,
    types.BuiltinFunctionType,
    types.ModuleType,
    weakref.ref,
    property,
    torch.dtype,
    torch.device,
    torch.layout,
    torch.memory_format,
    torch.Size,
)
# Their ids, looked up by every copy of every object: a set, safe for any type (a metaclass
# may make its classes unhashable); these types live as long as the process.
_ATOMIC_IDS = frozenset(map(id, _ATOMIC))
_REACH_DEPTH = 3  # from a module's globals: its objects, and what they and its classes hold
_REACH_LIMIT = 20_000  # objects indexed per module at most, so one huge global cannot stall a copy
_CODE_DEPTH = 6  # parts followed from a copy, through the code it shares, to an original
_CODE_LIMIT = 5_000  # parts looked at at most, so one large attribute cannot stall a sync


def clone_tree(tree: Any, memo: dict[int, Any] | None = None) -> Any:
    """A copy of `tree` (a call's `(module, args, kwargs)`, or any value) by the rules above.

    `memo` maps the id of an original to what stands for it in the copy (a module's long-lived
    copy, a tensor kept from before); it is filled with every object copied, so a caller can
    find the copy of each original tensor in it. What cannot be copied raises
    UncopyableInputError naming it.
    """
    return _Copier({} if memo is None else memo).call(tree)


def is_atomic(x: Any) -> bool:
    """Whether every copy holds `x` itself: immutable values, classes, functions, modules (a
    lazy module's class, such as transformers' `_LazyModule`, is a subclass of the module's)."""
    return id(type(x)) in _ATOMIC_IDS or isinstance(x, (type, types.ModuleType))


def is_shared(x: Any) -> bool:
    """Whether every copy holds `x` itself: a module-level object (or what one reaches)."""
    return _MODULE_LEVEL.view().holds(x)


def shared_objects(tree: Any, depth: int = 4) -> list[Any]:
    """The module-level objects with attributes that copies of `tree` share rather than copy:
    a call can change their attributes on every side, so the checker puts those back before
    each run as it does the containers the callable reaches."""
    view = _MODULE_LEVEL.view()
    seen: set[int] = set()
    found: list[Any] = []
    pending = [(tree, depth)]
    while pending:
        x, left = pending.pop()
        if left < 0 or id(x) in seen or is_atomic(x) or isinstance(x, _NEVER_SHARED):
            continue
        seen.add(id(x))
        held = getattr(x, "__dict__", None)
        if view.holds(x):
            if isinstance(held, dict) and not isinstance(x, enum.Enum):  # members never change
                found.append(x)
            continue
        if type(x) in (list, tuple, set, frozenset):
            pending += [(item, left - 1) for item in x]
        elif isinstance(x, dict):
            pending += [(item, left - 1) for item in x.values()]
        elif isinstance(held, dict):
            pending += [(item, left - 1) for item in held.values()]
    return found


def reaching_original(copied: Any, memo: dict[int, Any], path: str) -> str | None:
    """Where `copied` (made with `memo`, named `path`) reaches an original that `memo` has a copy
    of: the path to it (`update.__wrapped__.__self__`), or None. Code is shared, never copied: a
    closure is rebuilt over copies of what it closes over, but one whose parts cannot be copied
    is held as it is, and so is a weak reference: calling such a copy runs on, or changes, the
    original (a metric's `update` wrapped in a closure over the metric and a lock).
    Module-level objects are shared by design: not followed."""
    pending: list[tuple[Any, str, int]] = [(copied, path, _CODE_DEPTH)]
    seen: set[int] = set()
    while pending and len(seen) < _CODE_LIMIT:
        x, where, left = pending.pop()
        if id(x) in seen or left < 0:
            continue
        seen.add(id(x))
        if id(x) in memo and memo[id(x)] is not x:
            return where
        pending += [(part, name, left - 1) for part, name in _parts(x, where)]
    return None


def _parts(x: Any, where: str) -> Iterator[tuple[Any, str]]:
    """What a copy's part holds that may lead back to an original."""
    kind = type(x)
    if kind is types.FunctionType:
        names = x.__code__.co_freevars
        for name, cell in zip(names, x.__closure__ or (), strict=False):
            try:
                yield cell.cell_contents, f"{where}.<closure variable {name}>"
            except ValueError:  # an empty cell
                continue
        for i, default in enumerate(x.__defaults__ or ()):
            yield default, f"{where}.__defaults__[{i}]"
        for name, value in {**(x.__kwdefaults__ or {}), **vars(x)}.items():
            yield value, f"{where}.{name}"
    elif kind is types.MethodType:
        yield x.__self__, f"{where}.__self__"
        yield x.__func__, where
    elif kind is functools.partial:
        yield from ((part, where) for part in (x.func, *x.args, *x.keywords.values()))
    elif kind is weakref.ref:
        yield x(), f"{where}()"
    elif kind in (list, tuple, set, frozenset):
        yield from ((item, f"{where}[{i}]") for i, item in enumerate(x))
    elif isinstance(x, dict):
        yield from ((value, f"{where}[{key!r}]") for key, value in list(x.items()))
    elif not (is_atomic(x) or isinstance(x, torch.Tensor) or is_shared(x)):
        yield from ((value, f"{where}.{name}") for name, value in object_attributes(x).items())


class _Refused(Exception):
    """A part of the tree no rule can copy, with the path that leads to it."""

    def __init__(self, path: str, value: Any, cause: BaseException) -> None:
        super().__init__(path)
        self.path, self.value, self.cause = path, value, cause


class _Copier:
    """One copy: the memo of what is copied already, and the module-level objects it shares."""

    def __init__(self, memo: dict[int, Any]) -> None:
        self.memo = memo
        # Originals memoized by id, kept alive with the memo (as deepcopy keeps them) so no id
        # is reused while the memo serves later copies (a module's copy, synced call by call).
        self.alive: list[Any] = memo.setdefault(id(memo), [])
        self.shared = _MODULE_LEVEL.view()
        self.module_names: dict[int, str] = {}  # id of a module -> its path, for messages

    def call(self, tree: Any) -> Any:
        """`tree` copied; a call-shaped tuple's parts named as the user knows them."""
        try:
            if _call_shaped(tree):
                *module, args, kwargs = tree
                copied = [self.copy(m, "the module") for m in module]
                return tuple(
                    [
                        *copied,
                        tuple(self.copy(a, f"input {i}") for i, a in enumerate(args)),
                        {k: self.copy(v, f"input {k!r}") for k, v in kwargs.items()},
                    ]
                )
            return self.copy(tree, "the call's inputs")
        except _Refused as refused:
            raise UncopyableInputError(_refusal(refused)) from refused.cause

    def copy(self, x: Any, path: str) -> Any:
        found = self.memo.get(id(x), _MISSING)
        if found is not _MISSING:
            return found
        kind = type(x)
        if kind is dict or kind is list or kind is set:  # never shared (_ModuleLevel)
            return self._container(x, path)
        if kind is types.FunctionType and x.__closure__ and not self.shared.holds(x):
            return self._closure(x, path)
        if is_atomic(x):
            return x
        if isinstance(x, torch.Tensor):
            return self.remember(x, self._tensor(x, path))
        if self.shared.holds(x):
            return x
        if kind is types.MethodType:  # as deepcopy: the function, bound to the object's copy
            return self.remember(x, types.MethodType(x.__func__, self.copy(x.__self__, path)))
        if kind is tuple or kind is frozenset or _plain_ordered_dict(x):
            return self._container(x, path)
        return _Objects(self).copy(x, path)  # made per object: held here, it would be a cycle

    def remember(self, x: Any, y: Any) -> Any:
        self.memo[id(x)] = y
        self.alive.append(x)
        return y

    # closures -----------------------------------------------------------------------------------

    def _closure(self, fn: types.FunctionType, path: str) -> Any:
        """A function made at run time that an object holds (`self.update = wrapped`, a closure
        over the object itself, as torchmetrics wraps a metric's `update`): where what it
        closes over, its defaults or attributes reach an original being copied, the copy holds
        the same code over copies of them, so calling it runs on the copy, not the caller's
        object. Otherwise the function itself is held; where a part cannot be copied, a twin of
        it over the same originals (copies made meanwhile may hold the twin already)."""
        if reaching_original(fn, self.memo, path) is None:
            return fn
        old_cells = fn.__closure__ or ()
        fresh = [id(cell) not in self.memo for cell in old_cells]
        cells = tuple(
            self.remember(cell, types.CellType()) if new else self.memo[id(cell)]
            for cell, new in zip(old_cells, fresh, strict=True)
        )
        rebuilt = types.FunctionType(fn.__code__, fn.__globals__, fn.__name__, None, cells)
        self.remember(fn, rebuilt)  # before its parts: a closure may reach itself
        try:
            for name, old, cell, new in zip(
                fn.__code__.co_freevars, old_cells, cells, fresh, strict=True
            ):
                try:
                    contents = old.cell_contents
                except ValueError:  # an empty cell
                    continue
                if new:
                    cell.cell_contents = self.copy(contents, f"{path}.<closure variable {name}>")
            rebuilt.__defaults__ = self.copy(fn.__defaults__, path)
            rebuilt.__kwdefaults__ = self.copy(fn.__kwdefaults__, path)
            rebuilt.__dict__.update(self.copy(vars(fn), path))
        except _Refused:
            # Held as it is: the copy runs on the originals. The rebuilt function may already be
            # held by copies made while filling its cells (a hook reached again through a
            # submodule), so it becomes the original's twin, never a half-filled closure.
            for cell, old, new in zip(cells, old_cells, fresh, strict=True):
                if new:
                    with contextlib.suppress(ValueError):  # an empty cell stays empty
                        cell.cell_contents = old.cell_contents
            rebuilt.__defaults__, rebuilt.__kwdefaults__ = fn.__defaults__, fn.__kwdefaults__
            rebuilt.__dict__.clear()
            rebuilt.__dict__.update(vars(fn))
        for name in ("__qualname__", "__module__", "__doc__", "__annotations__"):
            setattr(rebuilt, name, getattr(fn, name))
        return rebuilt

    # tensors -----------------------------------------------------------------------------------

    def _tensor(self, t: torch.Tensor, path: str) -> torch.Tensor:
        if type(t) is torch.nn.Parameter:
            return self._parameter(t, path)
        if t.is_nested or t.layout != torch.strided:
            # No storage to share with other inputs: a clone with its layout and flags.
            with torch.no_grad():
                cloned = t.detach().clone()
            return cloned.requires_grad_(t.requires_grad)
        if t.grad_fn is not None:
            return self._non_leaf(t)
        return self._deepcopied(t, path)

    def _deepcopied(self, t: torch.Tensor, path: str, *, temporary: bool = False) -> torch.Tensor:
        """torch's own copy: the storage copied once per copy (through the memo), so views of one
        storage stay views of one copied storage. A `temporary` (a detached alias made here)
        leaves no entry: a memo filtered to its tensors outlives the keep-alive list, and a
        later object given the temporary's id would be answered with this copy."""
        try:
            copied: torch.Tensor = copy.deepcopy(t, self.memo)
        except Exception as exc:
            raise _Refused(path, t, exc) from exc
        if temporary:
            del self.memo[id(t)]
        return copied

    def _parameter(self, p: torch.nn.Parameter, path: str) -> torch.nn.Parameter:
        """A parameter copied as a tensor is (its storage once, with the views on it), with its
        `.grad` and its attributes, which `Parameter.__deepcopy__` drops."""
        detached = self._deepcopied(p.detach(), path, temporary=True)
        copied = torch.nn.Parameter(detached, p.requires_grad)
        self.remember(p, copied)
        if p.grad is not None:
            copied.grad = self._deepcopied(p.grad, f"{path}.grad")
        copied.__dict__.update(self.copy(p.__dict__, path))
        return copied

    def _non_leaf(self, t: torch.Tensor) -> torch.Tensor:
        """A non-leaf's copy: a non-leaf too, with its strides, behind a copy of the leaf (or,
        for a view, of the tensor) it came from, so the call can write into it as into the
        original and its gradient is the original's. A view is rebuilt as a view of its base's
        copy (`x.t()` of a leaf `x` passed with `x` stays a view of `x`'s copy)."""
        base = t._base
        if base is not None:
            base_copy = self.copy(base, "a view's base")
            view: torch.Tensor = base_copy.as_strided(t.shape, t.stride(), t.storage_offset())
            return view
        behind = self._deepcopied(t.detach(), "a non-leaf tensor", temporary=True)
        behind.requires_grad_(t.requires_grad)
        out = torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device=t.device)
        return out.copy_(behind)

    # containers -----------------------------------------------------------------------------------

    def _container(self, x: Any, path: str) -> Any:
        if isinstance(x, list):
            out: list[Any] = self.remember(x, [])
            out.extend(self.copy(item, f"{path}[{i}]") for i, item in enumerate(x))
            return out
        if isinstance(x, dict):
            copied: dict[Any, Any] = self.remember(x, type(x)())
            for key, value in x.items():
                copied[self.copy(key, path)] = self.copy(value, f"{path}[{key!r}]")
            return copied
        if isinstance(x, set):
            members: set[Any] = self.remember(x, set())
            members.update(self.copy(item, path) for item in x)
            return members
        items = [self.copy(item, f"{path}[{i}]") for i, item in enumerate(x)]
        found = self.memo.get(id(x), _MISSING)  # a tuple reached again through its own items
        if found is not _MISSING:
            return found
        same = all(a is b for a, b in zip(items, x, strict=True))
        return self.remember(x, x if same else type(x)(items))


class _Objects:
    """Objects copied through their copy protocol (`__deepcopy__`, `copyreg`, `__reduce_ex__`)
    or rebuilt from their state, every part they hold copied by the copier's rules."""

    def __init__(self, copier: _Copier) -> None:
        self.copier = copier

    def copy(self, x: Any, path: str) -> Any:
        """An object through its own `__deepcopy__`, else the copy protocol walked here, else
        rebuilt from `object.__new__` and its state. The protocol runs the object's code: where
        that changes the object itself (pyro's `AutoGuide.__getstate__` clears fields of the
        live guide), its attributes are put back and it is rebuilt from its state instead."""
        cls = type(x)
        own = getattr(cls, "__deepcopy__", None)
        if own is not None:
            try:
                copied = _leaving_alone(x, lambda: own(x, self.copier.memo))
                return self.copier.remember(x, copied)
            except Exception:  # a class that refuses deepcopy: its state is copied instead
                pass
        try:
            reduced = _leaving_alone(x, lambda: _reduced(x))
        except Exception as exc:
            return self._from_state(x, path, exc)
        if isinstance(reduced, str):  # a global by name: the object itself
            return x
        return self._reconstruct(x, path, reduced)

    def _reconstruct(self, x: Any, path: str, reduced: tuple[Any, ...]) -> Any:
        func, args, state, listiter, dictiter = (*reduced, None, None, None)[:5]
        try:
            y = func(*self.copier.copy(args, path))
        except Exception as exc:
            if func not in _NEW_OBJECT:
                raise _Refused(path, x, exc) from exc
            return self._from_state(x, path, exc)  # a __new__ that wants arguments
        if type(y) is not type(x):  # a base's reduction: the copy would lose the class
            other = TypeError(
                f"its reduction rebuilds a {type(y).__qualname__}, not a {type(x).__qualname__} "
                f"(a base class's __reduce__: {getattr(func, '__qualname__', func)!s})"
            )
            return self._from_state(x, path, other)
        self.copier.remember(x, y)
        self._set_state(x, y, state, path)
        if listiter is not None:
            append = _filling(type(y), "append")
            for item in listiter:
                append(y, self.copier.copy(item, path))
        if dictiter is not None:
            setitem = _filling(type(y), "__setitem__")
            for key, value in dictiter:
                setitem(y, self.copier.copy(key, path), self.copier.copy(value, f"{path}[{key!r}]"))
        return y

    def _from_state(self, x: Any, path: str, exc: BaseException) -> Any:
        """`x` rebuilt without its class's `__new__` or reduction: `object.__new__` and a copy of
        its `__dict__` and slots. Only objects laid out as plain Python objects can be."""
        state = _state_of(x)
        try:
            y = object.__new__(type(x))
        except TypeError:
            raise _Refused(path, x, exc) from exc
        if state is None:
            raise _Refused(path, x, exc) from exc
        self.copier.remember(x, y)
        held, slots = state
        self._set_state(x, y, held or None, path)
        for key, value in slots.items():
            object.__setattr__(y, key, self.copier.copy(value, f"{path}.{key}"))
        return y

    def _set_state(self, x: Any, y: Any, state: Any, path: str) -> None:
        if state is None:
            return
        if isinstance(state, tuple) and len(state) == 2 and not hasattr(y, "__setstate__"):
            state, slots = state
        else:
            slots = None
        if isinstance(state, dict):
            owner = self._owner(x)
            state = {
                key: self.copier.copy(
                    value,
                    f"{path}.{key}" if owner is None else f"attribute {key!r} of module {owner!r}",
                )
                for key, value in state.items()
            }
        else:
            state = self.copier.copy(state, path)
        setstate = getattr(y, "__setstate__", None)
        if setstate is not None and not isinstance(y, type):
            setstate(state)
            return
        if state:
            y.__dict__.update(state)
        for key, value in (slots or {}).items():
            setattr(y, key, self.copier.copy(value, f"{path}.{key}"))

    def _owner(self, x: Any) -> str | None:
        """How the user knows a module whose attributes are copied: by the path `named_modules`
        gives it, its children named before they are copied (None for other objects, whose
        attributes are named by path). Read once per object: every attribute is labelled."""
        if not isinstance(x, torch.nn.Module):
            return None
        names = self.copier.module_names
        owner = names.setdefault(id(x), type(x).__name__)
        for name, child in vars(x).get("_modules", {}).items():
            names.setdefault(id(child), f"{owner}.{name}")
        return owner


_MISSING = object()
# The reductions that build an object with its class's `__new__` (copyreg's, private to typeshed).
_NEW_OBJECT = tuple(vars(copyreg)[name] for name in ("__newobj__", "__newobj_ex__"))


def _call_shaped(tree: Any) -> bool:
    """Whether `tree` is the (module, args, kwargs) or (args, kwargs) of a call."""
    return (
        type(tree) is tuple
        and len(tree) in (2, 3)
        and type(tree[-1]) is dict
        and type(tree[-2]) is tuple
    )


def _plain_ordered_dict(x: Any) -> bool:
    """Whether `x` is an OrderedDict its copy protocol would rebuild as a dict is copied: its
    class (whose C methods no one can replace) called with no arguments, then its items, with
    no state of its own. A module holds eleven (its hooks), mostly empty: the protocol's
    generic path, run for each, was most of the time copying a model took."""
    return type(x) is OrderedDict and not vars(x) and OrderedDict not in copyreg.dispatch_table


def _reduced(x: Any) -> tuple[Any, ...] | str:
    """What pickling and deepcopy build `x` back from (copyreg's table first)."""
    reductor = copyreg.dispatch_table.get(type(x))
    if reductor is not None:
        return reductor(x)
    return x.__reduce_ex__(4)  # type: ignore[no-any-return]


def _filling(cls: type, name: str) -> Callable[..., Any]:
    """How a container's copy takes its items: its builtin base's `name` (`dict.__setitem__`,
    `list.append`) where the class keeps the builtin's reduction, whose state is its whole
    `__dict__`: that state holds what an override of `name` keeps about the items already (an
    LRU dict's list of its keys), and replaying the override would count each item twice, once
    more per copy of a copy. A class with a reduction of its own gets its own `name`."""
    builtin = [base for base in cls.__mro__ if not _in_python(base, name)]
    own = any(_in_python(cls, n) for n in ("__reduce_ex__", "__reduce__", "__getstate__"))
    return getattr(cls if own or not builtin else builtin[0], name)  # type: ignore[no-any-return]


def _in_python(cls: type, name: str) -> bool:
    """Whether `cls`'s `name` is a Python function (defined by a class in Python)."""
    return isinstance(
        inspect.getattr_static(cls, name, None), (types.FunctionType, classmethod, staticmethod)
    )


class _ChangedByCopying(Exception):
    """An object's copy protocol changed the object itself; it was put back."""


def _leaving_alone(x: Any, protocol: Callable[[], Any]) -> Any:
    """`protocol()` (an object's `__deepcopy__` or `__reduce_ex__`), which must leave `x` as it
    found it: where it rebinds or removes an attribute of `x`, they are put back and
    _ChangedByCopying is raised."""
    before = object_attributes(x)
    result = protocol()
    after = object_attributes(x)
    if after.keys() != before.keys() or any(after[k] is not v for k, v in before.items()):
        set_attributes(x, before)
        raise _ChangedByCopying(f"copying it changed the {type(x).__qualname__} itself")
    return result


def _state_of(x: Any) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """An object's `__dict__` and slot values; None where it keeps its state elsewhere (C)."""
    held = getattr(x, "__dict__", None)
    slots: dict[str, Any] = {}
    for cls in type(x).__mro__:
        names = cls.__dict__.get("__slots__", ())
        for name in (names,) if isinstance(names, str) else names:
            if name not in ("__dict__", "__weakref__") and hasattr(x, name):
                slots[name] = getattr(x, name)
    if held is None and not slots:
        return None
    return (dict(held or {}), slots)


def _refusal(refused: _Refused) -> str:
    """What could not be copied, where, why the checker copies, and what to do instead."""
    what, value, exc = refused.path, refused.value, refused.cause
    advice = (
        "pass the values it would produce (a list or a tensor) instead"
        if inspect.isgenerator(value)
        else "keep it out of the module and the inputs (for example at module level, where "
        "copies share it), or give its class a __deepcopy__"
    )
    return (
        f"compile_parity cannot copy {what} ({type(value).__qualname__}): "
        f"{type(exc).__name__}: {exc}. The checker runs the compiled side on copies of the "
        "module and inputs, so both sides start from the same state and your objects end as a "
        f"plain call leaves them; {advice}."
    )


# --- module-level objects ------------------------------------------------------------------------


class _ModuleLevel:
    """The objects reachable from the globals (and classes' attributes) of modules outside torch
    and the standard library, indexed per module and again whenever its globals are rebound.
    Tensors, modules and optimizers are never shared (a call changes them), nor mutable
    containers (the checker restores those the callable reaches), though what they hold is."""

    def __init__(self) -> None:
        self._modules: dict[str, tuple[tuple[int, ...], dict[int, Any]]] = {}
        self._top: tuple[Any, dict[int, Any]] = (None, {})  # _mark(), found

    def view(self) -> _Shared:
        """What one copy shares: the module-level objects of the modules its objects' classes
        come from (where a library keeps its sentinels and registries), looked up as it meets
        them."""
        return _Shared(self)

    def index(self, name: str) -> dict[int, Any]:
        module = sys.modules.get(name)
        namespace = getattr(module, "__dict__", None)
        if module is None or not isinstance(namespace, dict) or not _is_indexed(module):
            return {}
        signature = tuple(map(id, list(namespace.values())))
        kept = self._modules.get(name)
        if kept is not None and kept[0] == signature:
            return kept[1]
        found: dict[int, Any] = {}
        for value in list(namespace.values()):
            _reach(value, found, _REACH_DEPTH)
        self._modules[name] = (signature, found)
        return found

    def top_level(self) -> dict[int, Any]:
        """The objects every program module binds at its top level, whatever their class (a
        sentinel `A = object()` of a test file, held by a `SimpleNamespace`), indexed again
        whenever the modules change (one imported, removed or put in another's place). A stand-in
        that is no module (`monkeypatch.setitem(sys.modules, "x", fake)`) is shared itself."""
        mark, found = self._top
        now = _mark()
        if now == mark:
            return found
        found = {}
        for module in list(sys.modules.values()):
            if not isinstance(module, types.ModuleType):
                if _shareable(module):
                    found[id(module)] = module
                continue
            namespace = static_dict(module)
            if namespace is None or not _is_program(module):
                continue
            for value in list(namespace.values()):
                if _shareable(value):
                    found[id(value)] = value
        self._top = (now, found)
        return found


class _Shared:
    """The module-level objects one copy shares."""

    def __init__(self, level: _ModuleLevel) -> None:
        self._level = level
        # The level's own indexes, looked into rather than merged: a copy of each would cost
        # every copy (and every `is_shared`) time in proportion to the program's globals.
        self._indexes: list[dict[int, Any]] = [level.top_level()]
        self._seen: set[str] = set()
        self._kinds: dict[int, type] = {}  # the classes met (by id: any class, hashable or not)

    def holds(self, x: Any) -> bool:
        kind = type(x)
        if self._kinds.get(id(kind)) is not kind:  # its module is indexed once per copy
            self._kinds[id(kind)] = kind
            module = vars(kind).get("__module__")
            if isinstance(module, str) and module not in self._seen:
                self._seen.add(module)
                index = self._level.index(module)
                if index:
                    self._indexes.append(index)
        key = id(x)
        return any(index.get(key) is x for index in self._indexes)


def _mark() -> Any:
    """Where `sys.modules` stands, read in constant time (every copy asks): its version, which
    every change of it moves, `sys.modules[name] = other` included. Where torch cannot read
    it, the modules themselves: a scan of every module, which costs a small check's time."""
    version = _compat.dict_version(sys.modules)
    return tuple(sys.modules.values()) if version is None else version


def _is_indexed(module: types.ModuleType) -> bool:
    """Modules outside torch and the standard library (whose objects a call never copies)."""
    filename = vars(module).get("__file__")
    return isinstance(filename, str) and not _paths.is_torch_or_stdlib(filename)


def _is_program(module: types.ModuleType) -> bool:
    """The program's modules, the user's and its libraries' (not the infrastructure's)."""
    filename = vars(module).get("__file__")
    return isinstance(filename, str) and _paths.is_followed(filename)


def _shareable(value: Any) -> bool:
    """A module-level value that copies share: an object, not code, a class, a container or
    anything a call changes (tensors, modules, optimizers)."""
    kind = type(value)
    return not (
        kind in _ATOMIC
        or issubclass(kind, (type, types.ModuleType, list, dict, set, *_NEVER_SHARED))
        or kind in (types.MethodType, types.BuiltinMethodType)
    )


_NEVER_SHARED = (torch.Tensor, torch.nn.Module, torch.optim.Optimizer)


def _reach(value: Any, found: dict[int, Any], depth: int) -> None:
    """Index `value` and what it holds, `depth` levels down."""
    if len(found) >= _REACH_LIMIT or id(value) in found or type(value) in _ATOMIC:
        return
    if issubclass(type(value), _NEVER_SHARED):
        return
    mutable = type(value) in (list, dict, set)
    if not mutable:
        found[id(value)] = value
    if depth == 0:
        return
    for child in _held(value):
        _reach(child, found, depth - 1)


def _held(value: Any) -> Iterator[Any]:
    """What a module-level value holds: a container's items, a class's attributes, an object's
    instance attributes."""
    kind = type(value)
    if issubclass(kind, dict):
        yield from list(value.values())
    elif issubclass(kind, (list, tuple, set, frozenset)):
        yield from list(value)
    elif issubclass(kind, type):
        yield from (v for k, v in list(vars(value).items()) if not k.startswith("__"))
    else:
        yield from list((static_dict(value) or {}).values())


_MODULE_LEVEL = _ModuleLevel()  # a cache of what modules' globals reach, rebuilt as they change

__all__ = ["clone_tree", "is_atomic", "is_shared", "reaching_original", "shared_objects"]
