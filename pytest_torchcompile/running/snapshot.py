"""A call's state: copying it faithfully, watching what a call changes, keeping what re-runs need.

The checker runs the compiled side on copies of the caller's modules and inputs and keeps the call's
state as it was before the call (copies made by `copier.clone_tree`), so every re-run (the second eager run, the float64 reference, the
rounding-noise runs, triage's replays) starts from exactly the state the first runs started from:
strides, storage offsets, aliasing between inputs and parameters, module and optimizer state
(including optimizer state a first step creates), and plain Python attributes.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import torch

from pytest_torchcompile import _compat
from pytest_torchcompile.running import pystate
from pytest_torchcompile.running.copier import clone_tree, is_atomic, reaching_original
from pytest_torchcompile.running.trees import leaves
from pytest_torchcompile.running.world import is_generator

_UPCAST = {
    torch.float16: torch.float64,
    torch.bfloat16: torch.float64,
    torch.float32: torch.float64,
    torch.complex32: torch.complex128,
    torch.complex64: torch.complex128,
}


class Unfaithful(Exception):
    """A re-run could not rebuild the call exactly, so the rule that needed it is not applied;
    it says nothing about eager or the compiler."""


def upcast_tree(tree: Any, memo: dict[int, Any] | None = None) -> Any:
    """A copy with floating tensors and modules in float64 (complex in complex128), for the reference.

    Each floating storage is upcast once and every tensor on it becomes a view of that one
    float64 storage with its own sizes, strides and offset: inputs that alias each other or a
    module's parameters alias in the reference run too, as they did in the real call. `memo` is
    clone_tree's.
    """
    memo = {} if memo is None else memo
    copied = clone_tree(tree, memo)
    made = {id(value) for value in memo.values()}  # what the copy made: its objects are its own
    upcast: dict[tuple[int, int], tuple[torch.dtype, torch.Tensor]] = {}

    def tensor(t: torch.Tensor) -> torch.Tensor:
        target = _UPCAST.get(t.dtype)
        if target is None:
            return t
        storage = t.untyped_storage() if t.layout == torch.strided else None
        if storage is None or storage.nbytes() == 0:
            return t.detach().to(target).requires_grad_(t.requires_grad)
        key = storage.data_ptr(), storage.nbytes()
        seen = upcast.get(key)
        if seen is None:
            flat = torch.empty(0, dtype=t.dtype, device=t.device).set_(storage)
            seen = upcast[key] = (t.dtype, flat.detach().to(target))
        elif seen[0] != t.dtype:
            raise Unfaithful(f"one storage is viewed both as {seen[0]} and as {t.dtype}")
        view = seen[1].as_strided(t.shape, t.stride(), t.storage_offset())
        return view.detach().requires_grad_(t.requires_grad)

    def convert(obj: Any) -> Any:
        if isinstance(obj, torch.Tensor):
            return tensor(obj)
        if isinstance(obj, torch.nn.Module):
            return _compat.map_module_tensors(obj, tensor)
        if isinstance(obj, (tuple, list)):
            converted = [convert(item) for item in obj]
            return type(obj)(converted) if isinstance(obj, list) else rebuild_tuple(obj, converted)
        if isinstance(obj, dict) and id(obj) in made:  # the copy's own: a defaultdict keeps
            obj.update({key: convert(value) for key, value in obj.items()})  # its factory
            return obj
        if isinstance(obj, dict):
            return type(obj)((key, convert(value)) for key, value in obj.items())
        held = getattr(obj, "__dict__", None)
        plain_object = not isinstance(obj, (type, torch.optim.Optimizer))  # an optimizer's
        # parameters are its module's, upcast with it; its state follows them as before
        if id(obj) in made and isinstance(held, dict) and plain_object:
            made.discard(id(obj))  # once: objects may hold each other
            for name, value in list(held.items()):  # an object among the inputs: a cache's tensors
                held[name] = convert(value)
        return obj

    return convert(copied)


def tensors_within(tree: Any) -> Iterator[torch.Tensor]:
    for leaf in leaves(tree):
        if isinstance(leaf, torch.Tensor):
            yield leaf
        elif isinstance(leaf, torch.nn.Module):
            yield from leaf.parameters()
            yield from leaf.buffers()


def _bindings(call: Any) -> tuple[tuple[torch.nn.Module, str, Any], ...]:
    """Each attribute of the call's modules bound to an object (`pystate.bound_attributes`)."""
    modules = {
        id(m): m
        for leaf in leaves(call)
        if isinstance(leaf, torch.nn.Module)
        for m in leaf.modules()
    }
    return tuple(
        (m, name, value)
        for m in modules.values()
        for name, value in pystate.bound_attributes(m).items()
    )


def holds_objects(call: Any) -> bool:
    """Whether a call's inputs hold an object with attributes of its own (beside tensors,
    modules, optimizers and plain values): state no watch over tensors and plain attributes
    covers."""
    _, args, kwargs = call
    return any(
        is_generator(leaf)
        or (
            not isinstance(leaf, (torch.Tensor, torch.nn.Module, torch.optim.Optimizer, enum.Enum))
            and not is_atomic(leaf)
            and not pystate.is_plain(leaf)
            and (hasattr(leaf, "__dict__") or hasattr(type(leaf), "__slots__"))
        )
        for leaf in leaves((args, kwargs))
    )


def rebuild_tuple(original: tuple[Any, ...], items: list[Any]) -> tuple[Any, ...]:
    if hasattr(original, "_fields"):  # namedtuple
        return type(original)(*items)
    return type(original)(items)


def sync_module(source: torch.nn.Module, target: torch.nn.Module, memo: dict[int, Any]) -> None:
    """Make `target` (a long-lived copy of a module like `source`) hold `source`'s state, keeping
    its identity and its tensors' addresses, completely: Restructured where it cannot.

    Parameters and buffers are copied in place; every other attribute of every submodule is
    brought over (private ones, tensors outside the buffers, a `forward` swapped for a partial),
    attributes `source` lacks are removed, and an attribute holding an object is copied afresh
    with each of `source`'s modules and tensors standing for `target`'s (a partial bound to a
    submodule is bound to the copy's), so the compiled module's guards see what the caller's
    module holds, as they would if the caller had compiled it directly. Hooks cannot be brought
    over: a module whose hooks differ is Restructured. Nor can code that reaches `source` (a
    closure over the module or its bound methods, as torchmetrics wraps a metric's `update`):
    functions are shared, not copied, so the synced copy would run on `source`. That is
    Unsynced, found before any attribute is brought over. `memo` is the one `target` was copied
    with (it keeps the originals alive).
    """
    source_modules = dict(source.named_modules(remove_duplicate=False))
    target_modules = dict(target.named_modules(remove_duplicate=False))
    if source_modules.keys() != target_modules.keys():
        raise Restructured
    # One memo for the whole tree, so objects two attributes share stay shared in the copy
    # (`self.current is self.left`).
    standing = _standing_for(source_modules, target_modules)
    synced: list[tuple[dict[str, Any], dict[str, Any]]] = []  # target's attributes, the values
    with torch.no_grad():
        for name, src in source_modules.items():
            dst = target_modules[name]
            if _compat.module_call_hooks(src) != _compat.module_call_hooks(dst):
                raise Restructured
            _sync_tensors(src, dst)
            synced.append((dst.__dict__, _attributes_for(name, src.__dict__, standing)))
    for held, attributes in synced:
        for key in [key for key in held if key not in attributes and key not in _SYNCED_ELSEWHERE]:
            del held[key]
        for key, value in attributes.items():
            if held.get(key) is not value:
                held[key] = value


def _standing_for(
    source_modules: dict[str, torch.nn.Module], target_modules: dict[str, torch.nn.Module]
) -> dict[int, Any]:
    """A copier memo: each of the source's modules and tensors -> the target's."""
    memo: dict[int, Any] = {}
    for name, src in source_modules.items():
        dst = target_modules[name]
        memo[id(src)] = dst
        for kind in ("_parameters", "_buffers"):
            for key, tensor in getattr(src, kind).items():
                other = getattr(dst, kind).get(key)
                if tensor is not None and other is not None:
                    memo[id(tensor)] = other
    return memo


def _sync_tensors(src: torch.nn.Module, dst: torch.nn.Module) -> None:
    for kind in ("_parameters", "_buffers"):
        src_tensors, dst_tensors = getattr(src, kind), getattr(dst, kind)
        if src_tensors.keys() != dst_tensors.keys():
            raise Restructured
        for key, tensor in src_tensors.items():
            other = dst_tensors[key]
            if tensor is None or other is None:
                if (tensor is None) != (other is None):
                    raise Restructured
                continue
            if tensor.shape != other.shape or tensor.dtype != other.dtype:
                raise Restructured
            if other is tensor:
                # The copy holds the program's own tensor (a module that takes its parameter
                # from a store each call, as Pyro's do): nothing to sync, and writing it would
                # bump its version under the test's autograd graph.
                continue
            other.copy_(tensor)
            other.requires_grad_(tensor.requires_grad)
            if isinstance(tensor, torch.nn.Parameter):
                other.grad = None if tensor.grad is None else tensor.grad.clone()


def _attributes_for(module: str, src: dict[str, Any], standing: dict[int, Any]) -> dict[str, Any]:
    """Every attribute but a module's tensors, submodules and hooks, copied for the target;
    Unsynced where a copy holds code that reaches an original. A plain value (numbers, strings,
    and containers of them, copied without `standing`) holds no code and reaches none."""
    attributes: dict[str, Any] = {}
    for name, value in src.items():
        if name in _SYNCED_ELSEWHERE:
            continue
        if pystate.is_plain(value) and not isinstance(value, (list, dict, set)):
            attributes[name] = pystate.copy_plain(value)
            continue
        copied = attributes[name] = clone_tree(value, standing)
        where = reaching_original(copied, standing, name)
        if where is not None:
            raise Unsynced(module, name, where)
    return attributes


# A module's tensors and submodules are synced by name, its hooks compared; the compiler's marks
# on the compiled copy stay.
_SYNCED_ELSEWHERE = (_compat.MODULE_INTERNALS - {"training"}) | _compat.COMPILE_MARKS


def tensor_pairs(
    module: torch.nn.Module, copied: torch.nn.Module
) -> Iterator[tuple[int, torch.Tensor]]:
    """(id of each parameter and buffer of `module`, the same one of its copy)."""
    originals = dict(module.named_parameters()) | dict(module.named_buffers())
    copies = dict(copied.named_parameters()) | dict(copied.named_buffers())
    return ((id(originals[name]), copies[name]) for name in originals)


class Copies:
    """The compiled side's copy of each of the caller's tensors, keyed by the original's id,
    with what each copy was (writes, requires_grad, its .grad) before the compiled call."""

    def __init__(self, memo: Mapping[int, Any]) -> None:
        self._copies = {key: t for key, t in memo.items() if isinstance(t, torch.Tensor)}
        self._marks = {key: _Mark.of(t) for key, t in self._copies.items()}
        self._unchanged: dict[int, Any] | None = None

    def unchanged(self) -> dict[int, Any]:
        """A clone_tree memo: each caller tensor whose copy the compiled call did not touch.
        Read after the call (and kept: the copies are not run again)."""
        if self._unchanged is None:
            same = {key: t for key, t in self._copies.items() if self._marks[key].same(_Mark.of(t))}
            # Views that deepcopy rebuilt do not share a version counter: a copy whose memory
            # a written copy shares was written through it.
            written = {_memory(t) for key, t in self._copies.items() if key not in same}
            self._unchanged = {key: t for key, t in same.items() if _memory(t) not in written}
        return self._unchanged

    def changed(self) -> bool:
        """Whether the compiled call wrote, re-flagged or gave a .grad to any copy."""
        return len(self.unchanged()) < len(self._copies)

    def written(self) -> set[int]:
        """Ids of the caller's tensors whose copies the compiled call changed."""
        return self._copies.keys() - self.unchanged().keys()

    def originals(self) -> set[int]:
        """Ids of every caller's tensor that has a copy."""
        return set(self._copies)

    def rebound(self, now: Mapping[str, Any]) -> list[str]:
        """Names in `now` (the compiled side's state after the call) that hold a tensor none of
        the copies is: a buffer or `.grad` the call bound anew, state it created."""
        keys = {view_key(t) for t in self._copies.values() if t.layout == torch.strided}
        return [
            name
            for name, t in now.items()
            if isinstance(t, torch.Tensor)
            and (t.layout != torch.strided or view_key(t) not in keys)
        ]


@dataclass(frozen=True)
class StateBefore:
    """The call's state before it ran, for re-runs, kept as cheaply as the compiled run allows.

    Taken after the compiled run and before eager's, while the caller's objects still hold it:
    nothing when the compiled run changed nothing in place (re-runs copy the caller's objects);
    copies of just the tensors it wrote when those are the caller's parameters, buffers or
    input tensors (re-runs copy the caller's objects with those replaced: no deep copy of the
    module's structure on every call that updates a running statistic); else a snapshot of
    the whole call, sharing each tensor the compiled run left as it found it, whenever the
    inputs hold objects of their own (`holds_objects`).
    """

    snapshot: Any  # (module, args, kwargs) as they were, or None
    written: dict[int, torch.Tensor]  # id of a caller tensor -> a copy of it before the call
    kept: frozenset[tuple[Any, ...]] = frozenset()  # view_key of each of those caller tensors
    # Each module's attributes bound to objects, as they were: what eager rebinds is bound back
    # in every copy (re-runs copy the caller's modules after eager's run).
    bindings: tuple[tuple[torch.nn.Module, str, Any], ...] = ()

    @classmethod
    def take(cls, call: Any, copies: Copies, attributes_moved: bool) -> StateBefore:
        # Objects among the inputs are kept whole: what eager changes of them (an attribute
        # rebound to another object) no watch sees, and re-runs must start from it as it was.
        whole = attributes_moved or holds_objects(call)
        if not whole and not copies.changed():
            return cls(None, {}, bindings=_bindings(call))
        originals = {id(t): t for t in tensors_within(call)}
        # Only where every copied tensor is one of these (none inside other objects), so that
        # each tensor sharing memory with a written one is kept with it, aliasing and all.
        nameable = not whole and copies.originals() <= originals.keys()
        written = [originals[i] for i in copies.written()] if nameable else []
        if not nameable or any(t.layout != torch.strided for t in written):
            return cls(clone_tree(call, copies.unchanged()), {})
        storages = {t.untyped_storage().data_ptr() for t in written}
        shared = {
            i: t
            for i, t in originals.items()
            if t.layout == torch.strided and t.untyped_storage().data_ptr() in storages
        }
        kept = frozenset(view_key(t) for t in shared.values())
        return cls(None, clone_tree(shared), kept, _bindings(call))

    def copy(self, call: Any, copier: Callable[[Any, dict[int, Any]], Any]) -> Any:
        """A fresh copy of the call as it was, made by `copier` (clone_tree, upcast_tree...)."""
        if self.snapshot is not None:
            return copier(self.snapshot, {})
        memo = clone_tree(self.written)  # fresh: a re-run may write them
        copied = copier(call, memo)
        for owner, name, value in self.bindings:
            if getattr(owner, name, None) is not value and id(owner) in memo:
                setattr(memo[id(owner)], name, clone_tree(value, memo))
        return copied

    def lacks(self, watch: Watch, now: Mapping[str, Any]) -> list[str]:
        """What eager changed (`now`: its state after the call) whose earlier state is not kept,
        so re-runs cannot start from it; nothing when the whole call is."""
        if self.snapshot is not None:
            return []
        return watch.changed(now, self._keeps)

    def _keeps(self, t: torch.Tensor) -> bool:
        return bool(self.kept) and t.layout == torch.strided and view_key(t) in self.kept


def _memory(t: torch.Tensor) -> int | None:
    """The address of a strided tensor's storage (None for sparse and other layouts)."""
    return t.untyped_storage().data_ptr() if t.layout == torch.strided else None


def view_key(t: torch.Tensor) -> tuple[Any, ...]:
    """What makes two tensor objects the same view of the same memory."""
    return (t.untyped_storage().data_ptr(), t.storage_offset(), t.shape, t.stride(), t.dtype)


@dataclass(frozen=True)
class _Mark:
    """What a call can change of a leaf tensor: its data (the write count its views share),
    requires_grad, and its .grad (the object, kept alive so it is never mistaken for another)."""

    version: int | None
    requires_grad: bool
    grad: torch.Tensor | None
    grad_version: int | None

    @classmethod
    def of(cls, t: torch.Tensor) -> _Mark:
        grad = t.grad if t.is_leaf else None
        version = _compat.version_counter(t)
        grad_version = None if grad is None else _compat.version_counter(grad)
        return cls(version, t.requires_grad, grad, grad_version)

    def same(self, other: _Mark) -> bool:
        return (
            self.version is not None
            and (self.grad is None or self.grad_version is not None)
            and (self.version, self.requires_grad, self.grad_version)
            == (other.version, other.requires_grad, other.grad_version)
            and self.grad is other.grad
        )


class Restructured(Exception):
    """The caller changed the module's structure; the compiled side starts from a new copy."""


class Unsynced(Restructured):
    """Syncing cannot bring the module over completely: an attribute holds code that reaches the
    module synced from (the copy would run on it). A copy made afresh goes through the module's
    own copy protocol (torchmetrics' `__setstate__` wraps the copy's methods anew)."""

    def __init__(self, module: str, name: str, where: str) -> None:
        owner = f"submodule {module!r}" if module else "the module"
        super().__init__(
            f"attribute {name!r} of {owner} holds code that reaches the module synced from "
            f"({where}): a copy shares code, so the synced copy would run on the test's module"
        )


@dataclass
class Watch:
    """What a call may change in place, as it was before the call: tensors' version counters and
    modules' and argument objects' plain attributes. Cheap to take: nothing is copied but mutable
    plain values, so a snapshot of the tensors is made only when a call turns out to change one."""

    versions: list[tuple[str, torch.Tensor, int | None]]  # None: an inference tensor, uncounted
    attributes: dict[str, Any]

    @classmethod
    def of(cls, state: Mapping[str, Any]) -> Watch:
        """The watch over `state`, as `state_after` found it before the call."""
        tensors = [
            (name, t, _compat.version_counter(t))
            for name, t in state.items()
            if isinstance(t, torch.Tensor)
        ]
        plain = {
            name: pystate.copy_plain(v)
            for name, v in state.items()
            if not isinstance(v, torch.Tensor)
        }
        return cls(tensors, plain)

    def changed(
        self, now: Mapping[str, Any], kept: Callable[[torch.Tensor], bool] = lambda t: False
    ) -> list[str]:
        """Names of what changed since the watch was taken; `now` is `state_after` of the same
        objects after the call. A tensor changed when it was written or when its name now holds
        another tensor (a buffer or `.grad` rebound); tensors whose earlier value is `kept`
        elsewhere are left out."""
        moved = [
            name
            for name, t, version in self.versions
            if (
                version is None
                or _compat.version_counter(t) != version
                or (name in now and _rebound(t, now[name]))
            )
            and not kept(t)
        ]
        return moved + self.attributes_changed(now)

    def attributes_changed(self, now: Mapping[str, Any]) -> list[str]:
        """Names whose state is not what it was, other than a tensor written in place: plain
        attributes that `now` holds otherwise, and names the call created or removed (a
        `.grad`, optimizer state a first step creates, a new attribute). `now` may be the state
        of copies of the watched objects: only names and plain values are compared."""
        watched = {name for name, _, _ in self.versions}
        moved = [name for name, value in self.attributes.items() if not _same(now.get(name), value)]
        created = [name for name in now if name not in self.attributes and name not in watched]
        removed = [name for name in watched if name not in now]
        return moved + created + removed


def _rebound(before: torch.Tensor, now: Any) -> bool:
    """Whether a name that held `before` now holds other memory (state walks detach, so the
    tensor objects differ even where nothing changed)."""
    if not isinstance(now, torch.Tensor):
        return True
    if before.layout != torch.strided or now.layout != torch.strided:
        return now.layout != before.layout
    return view_key(now) != view_key(before)


def _same(a: Any, b: Any) -> bool:
    try:
        return bool(a == b)
    except Exception:  # containers of tensors: == is element-wise
        return False
