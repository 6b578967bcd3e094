"""The world around a call: what every run of it reaches besides its own copies.

The copier gives each run (eager, the compiled side, the control, every re-run and triage's
replays) its own module and inputs. What the copies share, every run reaches: the global random
generators, the bindings of the globals the call's code names, the containers, objects, tensors
and generators its code, closures and hooks reach, the module-level objects among its inputs,
process-wide switches; and the generators among the call's own objects, which re-runs copy.
`World.of` finds those once per callable; its `capture` and `restore` are the one place that puts
them back, so every run starts from the state before the call and the test sees what one call
leaves (coverage.py's rule: measuring never changes the program).

The walk reads code and namespaces statically (`vars`, types, code objects): it never calls a
property, a `__getattr__` or anything else of the program's. It follows the code of user files
and of libraries (not torch's, the standard library's or the test runner's) a few levels deep.
What no run can put back (a tensor too large to keep a copy of, written in place) is named
(`unrestored`), so the call can say so.
"""

from __future__ import annotations

import collections
import dis
import functools
import random
import sys
import types
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import torch

from pytest_torchcompile import _compat, _paths
from pytest_torchcompile.running.copier import clone_tree, is_atomic, shared_objects
from pytest_torchcompile.running.kept import KeptFor
from pytest_torchcompile.running.pystate import is_plain
from pytest_torchcompile.running.trees import object_attributes, set_attributes, slots, static_dict

_DEPTH = 3  # functions, classes and objects followed from the callable
_OBJECT_DEPTH = 4  # containers and objects followed into a call's objects for generators
_PARTS_LIMIT = 5_000  # parts one walk keeps at most, so a huge registry cannot stall a call
_TENSOR_BYTES = 64 << 20  # copies of reachable tensors kept at most, per callable
_SCALARS = (bool, int, float, complex, str, bytes, type(None))
_CONTAINERS = (list, dict, set, collections.deque)
_MISSING: Any = object()


# --- generators ---------------------------------------------------------------------------------


@dataclass
class RngState:
    """The global generators' states: torch's CPU and CUDA ones, Python's `random` and, where
    the program imported it, NumPy's. Restored before each run of a call, so every run (eager,
    compiled, re-runs, triage's replays) draws the same random numbers from each."""

    cpu: torch.Tensor
    cuda: list[torch.Tensor] | None
    python: object
    numpy: object | None  # NumPy's legacy global state, where numpy is imported

    @classmethod
    def capture(cls) -> RngState:
        cuda = torch.cuda.get_rng_state_all() if torch.cuda.is_initialized() else None  # type: ignore[no-untyped-call]
        numpy = sys.modules.get("numpy")  # never imported here: a program without it draws none
        numpy_state = numpy.random.get_state() if numpy is not None else None
        return cls(torch.random.get_rng_state(), cuda, random.getstate(), numpy_state)

    def restore(self) -> None:
        torch.random.set_rng_state(self.cpu)
        if self.cuda is not None:
            torch.cuda.set_rng_state_all(self.cuda)
        random.setstate(self.python)  # type: ignore[arg-type]
        if self.numpy is not None:
            sys.modules["numpy"].random.set_state(self.numpy)


def generator_state(value: Any) -> Any:
    """The state of a generator the program holds (torch's, NumPy's `Generator` and
    `RandomState`, Python's `random.Random`), as a value parity can compare; _MISSING for
    anything else."""
    kind = type(value)
    if kind is torch.Generator:
        return value.get_state()
    if issubclass(kind, random.Random):
        return value.getstate()
    numpy = sys.modules.get("numpy")
    if numpy is not None and issubclass(kind, numpy.random.Generator):
        return value.bit_generator.state
    if numpy is not None and issubclass(kind, numpy.random.RandomState):
        name, key, *rest = value.get_state()
        return (name, torch.from_numpy(key.copy()), *rest)
    return _MISSING


def is_generator(value: Any) -> bool:
    return generator_state(value) is not _MISSING


def generator_fingerprint(value: Any) -> Any:
    """A generator's state as a plain value parity compares exactly, or None for anything else."""
    state = generator_state(value)
    if state is _MISSING:
        return None
    if isinstance(state, torch.Tensor):
        return bytes(state.numpy())
    if isinstance(state, tuple) and any(isinstance(part, torch.Tensor) for part in state):
        return tuple(bytes(p.numpy()) if isinstance(p, torch.Tensor) else p for p in state)
    return state


def _set_generator(value: Any, state: Any) -> None:
    kind = type(value)
    if kind is torch.Generator:
        value.set_state(state)
    elif issubclass(kind, random.Random):
        value.setstate(state)
    elif hasattr(value, "bit_generator"):
        value.bit_generator.state = state
    else:
        name, key, *rest = state
        value.set_state((name, key.numpy(), *rest))


# --- what a walk finds ----------------------------------------------------------------------------

_Binding = tuple[dict[str, Any], str]  # a namespace (a module's globals) and a name in it


@dataclass
class _Found:
    """The parts of the world around one callable, each by the name the report gives it."""

    containers: dict[str, Any] = field(default_factory=dict)  # list, dict, set, deque
    bindings: dict[str, _Binding] = field(default_factory=dict)
    cells: dict[str, types.CellType] = field(default_factory=dict)  # closures' (`nonlocal`)
    classes: dict[str, type] = field(default_factory=dict)  # their data attributes
    objects: dict[str, Any] = field(default_factory=dict)  # their attributes and slots
    tensors: dict[str, torch.Tensor] = field(default_factory=dict)
    generators: dict[str, Any] = field(default_factory=dict)
    compared: set[str] = field(default_factory=set)  # what parity compares: user files' plain parts
    seen: set[int] = field(default_factory=set)

    def copy(self) -> _Found:
        return _Found(
            dict(self.containers),
            dict(self.bindings),
            dict(self.cells),
            dict(self.classes),
            dict(self.objects),
            dict(self.tensors),
            dict(self.generators),
            set(self.compared),
            set(self.seen),
        )

    def parts(self) -> int:
        return sum(map(len, (self.containers, self.bindings, self.objects, self.tensors)))


@dataclass
class WorldState:
    """The world as it was at one moment (`World.capture`)."""

    rng: RngState
    switches: _compat.ProcessSwitches
    containers: dict[str, Any]
    bindings: dict[str, Any]
    cells: dict[str, Any]
    namespaces: dict[str, dict[str, tuple[Any, Any]]]  # classes' and objects' attributes
    tensors: dict[str, int | None]  # version counters; the copies are the World's
    generators: dict[str, Any]


class World:
    """Everything outside the copies that a callable's runs reach, found once."""

    def __init__(self, found: _Found, shared: tuple[Any, ...] = ()) -> None:
        self._found = found
        self._shared = shared  # module-level objects among one call's inputs
        # (label, version) -> a copy of the tensor at that version
        self._tensor_copies: dict[tuple[str, int], torch.Tensor] = {}
        self._kept_bytes = 0
        self.unrestored: list[str] = []  # parts a run changed that no run can put back
        # What some run left not plain (a memo keyed by types): compared on no side, so that a
        # side that left it plain (empty: the library memoizes only when not compiling) is not
        # "present in compiled only"
        self.unjudged: set[str] = set()
        self._code: list[Any] = []  # the hooks and code attributes walked from (`of`), held

    @classmethod
    def of(cls, fn: Callable[..., Any]) -> World:
        """The world around calls of `fn` (a module or a function)."""
        walk = _Walk(_Found())
        walk.callable(fn)
        walk.generators(fn, "the module")
        world = cls(walk.found)
        world._code = _code_around(fn)
        return world

    def walked_from(self, fn: Callable[..., Any]) -> bool:
        """Whether `fn`'s hooks and the code its modules hold are still those this world was
        walked from: a hook registered since (a new closure over a new dict, as a layer
        attribution registers per call) reaches what this world does not put back."""
        now = _code_around(fn)
        return len(now) == len(self._code) and all(
            a is b for a, b in zip(now, self._code, strict=True)
        )

    def for_call(self, args: tuple[Any, ...], kwargs: Any) -> World:
        """This world with the parts one call's inputs add: the code among them (a callback),
        their generators, and the module-level objects among them, which every copy of the call
        shares (`copier.shared_objects`)."""
        leaves = list(_leaves((args, kwargs)))
        if all(isinstance(value, torch.Tensor) for value in leaves):
            return World(self._found)  # tensors add nothing of the three: the walks are skipped
        walk = _Walk(self._found.copy())
        for i, value in enumerate(leaves):
            walk.callable(value)
            walk.generators(value, f"input {i}")
        return World(walk.found, tuple(shared_objects((args, kwargs))))

    def capture(self) -> WorldState:
        found = self._found
        namespaces = {label: _keep_all(object_attributes(obj)) for label, obj in self._objects()}
        namespaces |= {label: _keep_all(_class_data(c)) for label, c in found.classes.items()}
        return WorldState(
            RngState.capture(),
            _compat.ProcessSwitches.capture(),
            {label: _contents(c) for label, c in found.containers.items()},
            {label: ns.get(name, _MISSING) for label, (ns, name) in found.bindings.items()},
            {label: _cell_contents(cell) for label, cell in found.cells.items()},
            namespaces,
            {label: self._keep_tensor(label, t) for label, t in found.tensors.items()},
            {label: generator_state(g) for label, g in found.generators.items()},
        )

    def restore(self, state: WorldState) -> None:
        """Put every part back to `state`, in place (the program holds references to them)."""
        found = self._found
        state.rng.restore()
        state.switches.restore()
        for label, container in found.containers.items():
            _put_back(container, state.containers[label])
        for label, (namespace, name) in found.bindings.items():
            _rebind(namespace, name, state.bindings[label])
        for label, cell in found.cells.items():
            _refill(cell, state.cells[label])
        for label, obj in self._objects():
            _restore_object(obj, state.namespaces[label])
        for label, cls in found.classes.items():
            _restore_class(cls, state.namespaces[label])
        for label, tensor in found.tensors.items():
            if _compat.version_counter(tensor) != state.tensors[label]:
                self._put_tensor_back(label, tensor, state.tensors[label])
        for label, generator in found.generators.items():
            _set_generator(generator, state.generators[label])

    def state(self) -> dict[str, Any]:
        """What parity compares, as the last run left it, by the name the report gives each:
        the containers, globals and closure variables of plain values that user files' code
        reaches."""
        found = self._found
        state: dict[str, Any] = {}
        for label in sorted(found.compared):
            if label in found.containers:
                value = found.containers[label]
            elif label in found.cells:
                value = _cell_contents(found.cells[label])
            else:
                namespace, name = found.bindings[label]
                value = namespace.get(name, _MISSING)
            if value is not _MISSING and is_plain(value):
                state[f"{label} after the call"] = clone_tree(value)
            elif value is not _MISSING:
                self.unjudged.add(f"{label} after the call")
        return {name: value for name, value in state.items() if name not in self.unjudged}

    def _objects(self) -> Iterator[tuple[str, Any]]:
        yield from self._found.objects.items()
        for i, obj in enumerate(self._shared):
            yield f"module-level object {i} among the inputs", obj

    def _keep_tensor(self, label: str, tensor: torch.Tensor) -> int | None:
        """The tensor's version now; a copy of it is kept once per version (a call's runs go
        back to the state before it, and on to the one the test's call left) while the copies
        stay within the World's bound."""
        version = _compat.version_counter(tensor)
        if version is None or (label, version) in self._tensor_copies:
            return version
        if tensor.layout == torch.strided and self._kept_bytes + tensor.nbytes <= _TENSOR_BYTES:
            with torch.no_grad():
                self._tensor_copies[label, version] = tensor.detach().clone()
            self._kept_bytes += tensor.nbytes
        return version

    def _put_tensor_back(self, label: str, tensor: torch.Tensor, version: int | None) -> None:
        kept = None if version is None else self._tensor_copies.get((label, version))
        if kept is None:
            if label not in self.unrestored:
                self.unrestored.append(label)
            return
        with torch.no_grad():
            tensor.copy_(kept)


@contextmanager
def unseen() -> Iterator[None]:
    """Around a run besides the test's own: the warnings it issues are kept from the test (each
    replay would repeat one the test sees once). The filters stay the test's, so a warning the
    test turns into an error still raises: that is part of what the run does."""
    with warnings.catch_warnings(record=True):
        yield


# --- keeping and putting back ---------------------------------------------------------------------


def _contents(container: Any) -> Any:
    """A container's items as they are (the containers among them are parts of their own)."""
    return dict(container) if isinstance(container, dict) else list(container)


def _put_back(container: Any, items: Any) -> None:
    if isinstance(container, list):
        if len(container) != len(items) or any(
            a is not b for a, b in zip(container, items, strict=True)
        ):
            container[:] = items
    elif isinstance(container, dict):
        if container.keys() != items.keys() or any(container[k] is not items[k] for k in items):
            container.clear()
            container.update(items)
    else:
        container.clear()
        container.update(items) if isinstance(container, set) else container.extend(items)


def _cell_contents(cell: types.CellType) -> Any:
    try:
        return cell.cell_contents
    except ValueError:  # an empty cell
        return _MISSING


def _refill(cell: types.CellType, value: Any) -> None:
    if value is _MISSING:
        if _cell_contents(cell) is not _MISSING:
            del cell.cell_contents
    elif _cell_contents(cell) is not value:
        cell.cell_contents = value


def _rebind(namespace: dict[str, Any], name: str, value: Any) -> None:
    if value is _MISSING:
        namespace.pop(name, None)
    elif namespace.get(name, _MISSING) is not value:
        namespace[name] = value


def _keep_all(held: dict[str, Any]) -> dict[str, tuple[Any, Any]]:
    """Each attribute's object, and its contents where it is a container (put back in place)."""
    return {
        name: (value, _contents(value) if isinstance(value, _CONTAINERS) else None)
        for name, value in held.items()
    }


def _put_all(saved: dict[str, tuple[Any, Any]]) -> dict[str, Any]:
    values = {}
    for name, (value, contents) in saved.items():
        if contents is not None:
            _put_back(value, contents)
        values[name] = value
    return values


def _restore_object(obj: Any, saved: dict[str, tuple[Any, Any]]) -> None:
    """Put an object's attributes and slots back; attributes the call added go."""
    set_attributes(obj, _put_all(saved))


def _restore_class(cls: type, saved: dict[str, tuple[Any, Any]]) -> None:
    values = _put_all(saved)
    for name in _class_data(cls).keys() - values.keys():
        delattr(cls, name)
    for name, value in values.items():
        if vars(cls).get(name, _MISSING) is not value:
            setattr(cls, name, value)


_CLASS_NAMES = frozenset({"__dict__", "__weakref__", "__doc__", "__module__", "__qualname__"})


def _class_data(cls: type) -> dict[str, Any]:
    """A class's data attributes: not its functions, descriptors or Python's own names."""
    return {
        name: value
        for name, value in vars(cls).items()
        if name not in _CLASS_NAMES and not _code_or_descriptor(value)
    }


def _code_or_descriptor(value: Any) -> bool:
    kind = type(value)
    return issubclass(kind, type) or hasattr(kind, "__get__")


class Worlds:
    """The world around each module or function called, walked at its first call and again
    where the code around it has changed since (`World.walked_from`)."""

    def __init__(self) -> None:
        self._kept = KeptFor(World.of)

    def of(self, fn: Callable[..., Any]) -> World:
        world = self._kept.of(fn)
        return world if world.walked_from(fn) else self._kept.renew(fn)


def _module_code(module: torch.nn.Module) -> Iterator[tuple[Any, str]]:
    """The code a call of `module` itself runs besides its classes' methods, each with what it
    is: its hooks and the code it holds in attributes (a `forward` swapped for a partial, a
    callback). Its submodules' are theirs; the global module hooks run around every call."""
    yield from ((hook, "a hook") for hook in _compat.module_call_hooks(module))
    for name, value in vars(module).items():
        if _code_like(value):
            yield value, f"attribute {name!r}"


def _code_around(fn: Any) -> list[Any]:
    """The code a call of module `fn` runs besides its classes' methods (`_module_code` of
    each of its modules, and the global module hooks); [] for a function."""
    if not isinstance(fn, torch.nn.Module):
        return []
    code = [code for module in fn.modules() for code, _ in _module_code(module)]
    return code + _compat.global_module_hooks()


# --- the walk ---------------------------------------------------------------------------------------


class _Walk:
    """One walk from a callable, or a call's inputs; what it finds goes into `found`."""

    def __init__(self, found: _Found) -> None:
        self.found = found

    def callable(self, fn: Any, depth: int = _DEPTH) -> None:
        """From a module: the methods and data of its classes, its hooks, and the code its
        modules hold in attributes (a `forward` swapped for a partial, a callback); from a
        function, a bound method or a partial: itself. Anything else adds nothing."""
        if isinstance(fn, torch.nn.Module):
            for module in fn.modules():
                for cls in type(module).__mro__:
                    self._class(cls, depth)
                for code, what in _module_code(module):
                    self._value(code, what, depth, user=False)
            for hook in _compat.global_module_hooks():
                self._value(hook, "a global module hook", depth, user=False)
        elif _code_like(fn):
            self._value(fn, "the function", depth, user=False)

    def generators(self, root: Any, name: str) -> None:
        """The generators among a call's objects: its inputs, their containers and attributes,
        its modules' attributes. They are copied with the call; re-runs copy them again."""
        pending: list[tuple[Any, str, int]] = [(root, name, _OBJECT_DEPTH)]
        seen: set[int] = set()
        while pending:
            value, label, depth = pending.pop()
            if id(value) in seen or depth < 0 or is_atomic(value):
                continue
            seen.add(id(value))
            kind = type(value)
            if is_generator(value):
                self.found.generators.setdefault(f"generator {label}", value)
            elif kind in (tuple, list, set, frozenset):
                pending += [(v, f"{label}[{i}]", depth - 1) for i, v in enumerate(value)]
            elif kind is dict:
                pending += [(v, f"{label}[{k!r}]", depth - 1) for k, v in value.items()]
            elif isinstance(value, torch.nn.Module):
                for path, module in value.named_modules():
                    owner = f"{label}.{path}" if path else label
                    for key, held in vars(module).items():
                        if key not in _compat.MODULE_INTERNALS:
                            pending.append((held, f"{owner}.{key}", depth - 1))
            elif not issubclass(kind, torch.Tensor):
                held_items = object_attributes(value).items()
                pending += [(v, f"{label}.{k}", depth - 1) for k, v in held_items]

    def _value(self, value: Any, label: str, depth: int, *, user: bool) -> None:
        """Anything code reaches: functions, methods, partials and classes are followed;
        containers, objects, tensors and generators are parts of the world."""
        found = self.found
        kind = type(value)
        if kind in _SCALARS or issubclass(kind, types.ModuleType):
            return
        if issubclass(kind, type):
            self._class(value, depth)
            return
        if id(value) in found.seen or found.parts() >= _PARTS_LIMIT:
            return
        found.seen.add(id(value))
        if kind is types.FunctionType:
            self._function(value, depth)
        elif kind is types.MethodType:
            self._value(value.__func__, label, depth, user=user)
            self._value(value.__self__, f"the object of {label}", depth, user=user)
        elif kind is functools.partial:
            for part in (value.func, *value.args, *value.keywords.values()):
                self._value(part, label, depth, user=user)
        elif issubclass(kind, _CONTAINERS):
            label = _unique(found.containers, label)
            found.containers[label] = value
            if user and is_plain(value):
                found.compared.add(label)
            items = value.values() if isinstance(value, dict) else value
            for i, item in enumerate(list(items)) if depth else ():
                self._value(item, f"{label}[{i}]", depth - 1, user=False)
        elif is_generator(value):
            found.generators[_unique(found.generators, label)] = value
        elif issubclass(kind, torch.Tensor):
            if kind in (torch.Tensor, torch.nn.Parameter) and not value.is_inference():
                found.tensors[_unique(found.tensors, label)] = value
        elif issubclass(kind, torch.nn.Module):  # a module the code holds: its state, its code
            for name, tensor in (*value.named_parameters(), *value.named_buffers()):
                self._value(tensor, f"{label}.{name}", 0, user=False)
            for path, module in value.named_modules():
                found.objects[f"{label}.{path}" if path else label] = module
            if depth:
                self.callable(value, depth - 1)
        elif not is_atomic(value) and (static_dict(value) is not None or slots(value)):
            label = _unique(found.objects, label)
            found.objects[label] = value
            for name, held in list(object_attributes(value).items()) if depth else ():
                self._value(held, f"{label}.{name}", depth - 1, user=False)

    def _function(self, fn: types.FunctionType, depth: int) -> None:
        fn = _unwrapped(fn)
        code = fn.__code__
        if not _paths.is_followed(code.co_filename):
            return
        user = _paths.is_user_file(code.co_filename)
        for name, cell in zip(code.co_freevars, fn.__closure__ or (), strict=False):
            label = _unique(self.found.cells, f"closure variable {name!r}")
            if id(cell) in self.found.seen:
                continue
            self.found.seen.add(id(cell))
            self.found.cells[label] = cell  # `nonlocal counter; counter += 1` rebinds it
            value = _cell_contents(cell)
            if user and is_plain(value):
                self.found.compared.add(label)
            if value is not _MISSING:
                self._value(value, label, depth, user=user)
        attributes = vars(fn)  # what code set on the function (a callback, a counter)
        if attributes:
            label = _unique(self.found.objects, f"function {fn.__qualname__}")
            self.found.objects[label] = fn
            for name, value in list(attributes.items()):
                self._value(value, f"{label}.{name}", depth, user=user)
        namespace = fn.__globals__
        owner = namespace.get("__name__", "?")
        for name in _global_names(code):
            label = f"global {name!r}" if user else f"global {owner}.{name}"
            if self.found.bindings.setdefault(label, (namespace, name))[0] is not namespace:
                label = f"global {owner}.{name}"
                self.found.bindings.setdefault(label, (namespace, name))
            value = namespace.get(name, _MISSING)
            if user and value is not _MISSING and is_plain(value):
                self.found.compared.add(label)
            if value is not _MISSING and depth:
                self._value(value, label, depth - 1, user=user)

    def _class(self, cls: type, depth: int) -> None:
        if id(cls) in self.found.seen or not _class_followed(cls):
            return
        self.found.seen.add(id(cls))
        label = f"class {cls.__module__}.{cls.__qualname__}"
        self.found.classes[label] = cls
        user = _paths.is_user_file(_class_file(cls) or "")
        for name, member in list(vars(cls).items()):
            if name.startswith("__") and name.endswith("__") and name != "__call__":
                continue
            if type(member) in (staticmethod, classmethod):
                member = member.__func__
            if type(member) is property:
                for part in (member.fget, member.fset, member.fdel):
                    if part is not None:
                        self._value(part, label, depth, user=user)
            elif type(member) is types.FunctionType:
                self._value(member, label, depth, user=user)
            elif depth:  # class data: a container or object held at class level
                where = f"class attribute {cls.__qualname__}.{name}"
                self._value(member, where, depth - 1, user=user)


def _unique(kept: dict[str, Any], label: str) -> str:
    """`label`, or where another part has it, `label` with a number."""
    number = 2
    unique = label
    while unique in kept:
        unique, number = f"{label} ({number})", number + 1
    return unique


def _leaves(tree: Any) -> Iterator[Any]:
    if type(tree) in (tuple, list):
        for item in tree:
            yield from _leaves(item)
    elif type(tree) is dict:
        for item in tree.values():
            yield from _leaves(item)
    else:
        yield tree


def _code_like(value: Any) -> bool:
    """A function, bound method or partial: code the program runs."""
    return type(value) in (types.FunctionType, types.MethodType, functools.partial)


def _unwrapped(fn: types.FunctionType) -> types.FunctionType:
    """The function a decorator wrapped (`functools.wraps`' `__wrapped__`), read statically."""
    for _ in range(8):
        inner = vars(fn).get("__wrapped__")
        if type(inner) is not types.FunctionType:
            return fn
        fn = inner
    return fn


@functools.lru_cache(maxsize=8192)
def _global_names(code: types.CodeType) -> tuple[str, ...]:
    """The global names a function's code reads, writes or deletes, nested code included."""
    names = dict.fromkeys(
        instruction.argval
        for instruction in dis.get_instructions(code)
        if instruction.opname in ("LOAD_GLOBAL", "STORE_GLOBAL", "DELETE_GLOBAL")
    )
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names.update(dict.fromkeys(_global_names(const)))
    return tuple(name for name in names if isinstance(name, str))


def _class_file(cls: type) -> str | None:
    module = sys.modules.get(vars(cls).get("__module__") or "")
    filename = vars(module).get("__file__") if module is not None else None
    return filename if isinstance(filename, str) else None


def _class_followed(cls: type) -> bool:
    filename = _class_file(cls)
    return filename is not None and _paths.is_followed(filename)


__all__ = [
    "RngState",
    "World",
    "WorldState",
    "Worlds",
    "generator_fingerprint",
    "generator_state",
    "is_generator",
    "unseen",
]
