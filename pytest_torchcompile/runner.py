"""Running one callable eagerly and compiled from identical state: copies, RNG, backward, exceptions.

The eager side runs on the caller's own module and inputs, so after a check the caller sees what a
plain call would have left. The compiled side runs on copies: a module is copied once per test and
its state is synced from the caller's module before every call, so one compiled module (and one
Dynamo cache) sees the whole sequence of calls, guards and recompiles as a real program would.
"""

from __future__ import annotations

import copy
import functools
import inspect
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol

import torch

from pytest_torchcompile import _compat, faults, parity, pystate
from pytest_torchcompile.accounting import Accountant
from pytest_torchcompile.errors import (
    CompileParityFailure,
    GraphBreakBudgetExceeded,
    ParityError,
    RecompileLimitExceeded,
    UncopyableInputError,
)
from pytest_torchcompile.records import CompileCounts, LeafError
from pytest_torchcompile.rounding import RoundingNoise
from pytest_torchcompile.settings import Settings, apply, load_backend_callable

COTANGENT_SEED = 20240613  # fixed, so eager and compiled backward get the same cotangents
_UPCAST = {
    torch.float16: torch.float64,
    torch.bfloat16: torch.float64,
    torch.float32: torch.float64,
    torch.complex32: torch.complex128,
    torch.complex64: torch.complex128,
}


@dataclass
class ParityResult:
    """What one check saw: both sides' outputs, the largest error per leaf, and the test's counts."""

    eager: Any
    compiled: Any
    errors: dict[str, LeafError]
    counts: CompileCounts
    report: parity.ParityReport = field(repr=False)

    @property
    def graphs(self) -> int:
        return len(self.counts["graphs"])

    @property
    def graph_breaks(self) -> int:
        return len(self.counts["graph_breaks"])

    @property
    def recompiles(self) -> int:
        return len(self.counts["recompiles"])

    @property
    def fallbacks(self) -> int:
        return len(self.counts["fallbacks"])


# --- copies -----------------------------------------------------------------------------------


def leaves(tree: Any) -> Iterator[Any]:
    """Tensors and modules directly inside tuples, lists and dicts (where inputs usually sit)."""
    if isinstance(tree, (tuple, list)):
        for item in tree:
            yield from leaves(item)
    elif isinstance(tree, dict):
        for item in tree.values():
            yield from leaves(item)
    else:
        yield tree


def clone_tree(tree: Any, memo: dict[int, Any] | None = None) -> Any:
    """A deep copy whose tensors keep their strides, storage offsets and aliasing.

    torch's own deepcopy of a tensor copies its storage once per deepcopy call and rebuilds the
    view, so `x` and `x[1:]` stay views of one copied storage. Non-leaf tensors (which deepcopy
    refuses) are copied detached, keeping requires_grad, as a fresh leaf; sparse and other
    non-strided tensors (which have no storage to share) are cloned. Objects already in `memo`
    are replaced by what it maps them to. What cannot be copied at all raises
    UncopyableInputError naming it.
    """
    memo = {} if memo is None else memo
    for leaf in leaves(tree):
        if not isinstance(leaf, torch.Tensor) or id(leaf) in memo:
            continue
        if leaf.layout != torch.strided:
            memo[id(leaf)] = leaf.detach().clone().requires_grad_(leaf.requires_grad)
        elif leaf.grad_fn is not None:
            memo[id(leaf)] = copy.deepcopy(leaf.detach(), memo).requires_grad_(leaf.requires_grad)
    try:
        return copy.deepcopy(tree, memo)
    except Exception as exc:
        raise UncopyableInputError(_uncopyable(tree, exc)) from exc


def _uncopyable(tree: Any, exc: Exception) -> str:
    """Which part of `tree` deepcopy refused, why the checker copies, and what to do instead."""
    culprit = next(_uncopyable_parts(tree, "the call's inputs"), None)
    what = f"{culprit[0]} ({type(culprit[1]).__qualname__})" if culprit else "the call's inputs"
    advice = (
        "pass the values it would produce (a list or a tensor) instead"
        if culprit and inspect.isgenerator(culprit[1])
        else "keep it out of the module and the inputs (for example at module level), or give "
        "its class a __deepcopy__"
    )
    return (
        f"compile_parity cannot copy {what}: {type(exc).__name__}: {exc}. The checker runs the "
        "compiled side on copies of the module and inputs, so both sides start from the same "
        f"state and your objects end as a plain call leaves them; {advice}."
    )


def _uncopyable_parts(value: Any, name: str) -> Iterator[tuple[str, Any]]:
    """(name, value) of each smallest part of `value` that deepcopy refuses, outermost first."""
    try:
        copy.deepcopy(value)
        return
    except Exception:
        pass
    if isinstance(value, torch.nn.Module):
        for path, module in value.named_modules():
            for attr, item in vars(module).items():
                if attr not in ("_parameters", "_buffers", "_modules"):
                    where = f"attribute {attr!r} of module {path or type(value).__name__!r}"
                    yield from _uncopyable_parts(item, where)
        return
    children = _children_of(value)
    if children is None:
        yield name, value
        return
    for label, child in children:
        yield from _uncopyable_parts(child, label)


def _children_of(value: Any) -> list[tuple[str, Any]] | None:
    if isinstance(value, tuple) and len(value) in (2, 3) and isinstance(value[-1], dict):
        *module, args, kwargs = value  # the (module, args, kwargs) or (args, kwargs) of a call
        parts = [("the module", m) for m in module if m is not None]
        return parts + _named_inputs(args, kwargs)
    if isinstance(value, (tuple, list)):
        return [(f"item {i}", item) for i, item in enumerate(value)]
    if isinstance(value, dict):
        return [(f"key {key!r}", item) for key, item in value.items()]
    return None


class Unfaithful(parity.RerunUnavailable):
    """A re-run could not rebuild the call exactly, so the rule that needed it is not applied."""


def upcast_tree(tree: Any, memo: dict[int, Any] | None = None) -> Any:
    """A copy with floating tensors and modules in float64 (complex in complex128), for the reference.

    Each floating storage is upcast once and every tensor on it becomes a view of that one
    float64 storage with its own sizes, strides and offset: inputs that alias each other or a
    module's parameters alias in the reference run too, as they did in the real call. `memo` is
    clone_tree's.
    """
    copied = clone_tree(tree, memo)
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
            return type(obj)(converted) if isinstance(obj, list) else _rebuild_tuple(obj, converted)
        if isinstance(obj, dict):
            return type(obj)((key, convert(value)) for key, value in obj.items())
        return obj

    return convert(copied)


def nudged_tree(tree: Any, memo: dict[int, Any] | None = None) -> Any:
    """A copy with every floating value moved by -1, 0 or +1 unit in the last place, at random.

    Eager on this copy shows how far rounding-level changes move the result: the noise floor a
    correct compiler cannot be held below. Storages are nudged once each, so views and aliases
    of one storage stay consistent. `memo` is clone_tree's.
    """
    copied = clone_tree(tree, memo)
    generator = torch.Generator().manual_seed(COTANGENT_SEED)
    seen: set[int] = set()
    with torch.no_grad():
        for tensor in _tensors_within(copied):
            if not tensor.is_floating_point() or tensor.layout != torch.strided:
                continue  # sparse values are left as they are: no storage to nudge
            storage = tensor.untyped_storage()
            if storage.data_ptr() in seen or storage.nbytes() == 0:
                continue
            seen.add(storage.data_ptr())
            flat = torch.empty(0, dtype=tensor.dtype, device=tensor.device).set_(storage)
            steps = torch.randint(-1, 2, flat.shape, generator=generator).to(flat.device)
            ulp = torch.finfo(flat.dtype).eps * flat.abs().to(torch.float64)
            flat.copy_(flat.to(torch.float64) + steps * ulp)
    return copied


def _tensors_within(tree: Any) -> Iterator[torch.Tensor]:
    for leaf in leaves(tree):
        if isinstance(leaf, torch.Tensor):
            yield leaf
        elif isinstance(leaf, torch.nn.Module):
            yield from leaf.parameters()
            yield from leaf.buffers()


def _rebuild_tuple(original: tuple[Any, ...], items: list[Any]) -> tuple[Any, ...]:
    if hasattr(original, "_fields"):  # namedtuple
        return type(original)(*items)
    return type(original)(items)


def sync_module(source: torch.nn.Module, target: torch.nn.Module) -> None:
    """Make `target` (the compiled side's copy) hold `source`'s state, keeping its identity.

    Parameters and buffers are copied in place, and plain Python attributes (training flags,
    scales, counters) are copied over, so the compiled module's guards see what the caller's
    module holds, as they would if the caller had compiled it directly.
    """
    source_modules = dict(source.named_modules(remove_duplicate=False))
    target_modules = dict(target.named_modules(remove_duplicate=False))
    if source_modules.keys() != target_modules.keys():
        raise _Restructured
    with torch.no_grad():
        for name, src in source_modules.items():
            dst = target_modules[name]
            for attr, value in pystate.plain_attributes(src).items():
                setattr(dst, attr, pystate.copy_plain(value))
            for kind in ("_parameters", "_buffers"):
                src_tensors, dst_tensors = getattr(src, kind), getattr(dst, kind)
                if src_tensors.keys() != dst_tensors.keys():
                    raise _Restructured
                for key, tensor in src_tensors.items():
                    other = dst_tensors[key]
                    if tensor is None or other is None:
                        if (tensor is None) != (other is None):
                            raise _Restructured
                        continue
                    if tensor.shape != other.shape or tensor.dtype != other.dtype:
                        raise _Restructured
                    other.copy_(tensor)
                    other.requires_grad_(tensor.requires_grad)
                    if isinstance(tensor, torch.nn.Parameter):
                        other.grad = None if tensor.grad is None else tensor.grad.clone()


def _tensor_pairs(
    module: torch.nn.Module, copied: torch.nn.Module
) -> Iterator[tuple[int, torch.Tensor]]:
    """(id of each parameter and buffer of `module`, the same one of its copy)."""
    originals = dict(module.named_parameters()) | dict(module.named_buffers())
    copies = dict(copied.named_parameters()) | dict(copied.named_buffers())
    return ((id(originals[name]), copies[name]) for name in originals)


class _Copies:
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


@dataclass(frozen=True)
class _Before:
    """The call's state before it ran, for re-runs, kept as cheaply as the compiled run allows.

    Taken after the compiled run and before eager's, while the caller's objects still hold it:
    nothing when the compiled run changed nothing in place (re-runs copy the caller's objects);
    copies of just the tensors it wrote when those are the caller's parameters, buffers or
    input tensors (re-runs copy the caller's objects with those replaced: no deep copy of the
    module's structure on every call that updates a running statistic); else a snapshot of
    the whole call, sharing each tensor the compiled run left as it found it.
    """

    snapshot: Any  # (module, args, kwargs) as they were, or None
    written: dict[int, torch.Tensor]  # id of a caller tensor -> a copy of it before the call
    kept: frozenset[tuple[Any, ...]] = frozenset()  # _view_key of each of those caller tensors

    @classmethod
    def take(cls, call: Any, copies: _Copies, attributes_moved: bool) -> _Before:
        if not attributes_moved and not copies.changed():
            return cls(None, {})
        originals = {id(t): t for t in _tensors_within(call)}
        # Only where every copied tensor is one of these (none inside other objects), so that
        # each tensor sharing memory with a written one is kept with it, aliasing and all.
        nameable = not attributes_moved and copies.originals() <= originals.keys()
        written = [originals[i] for i in copies.written()] if nameable else []
        if not nameable or any(t.layout != torch.strided for t in written):
            return cls(clone_tree(call, copies.unchanged()), {})
        storages = {t.untyped_storage().data_ptr() for t in written}
        shared = {
            i: t
            for i, t in originals.items()
            if t.layout == torch.strided and t.untyped_storage().data_ptr() in storages
        }
        return cls(None, clone_tree(shared), frozenset(_view_key(t) for t in shared.values()))

    def copy(self, call: Any, copier: Callable[[Any, dict[int, Any]], Any]) -> Any:
        """A fresh copy of the call as it was, made by `copier` (clone_tree, upcast_tree...)."""
        if self.snapshot is not None:
            return copier(self.snapshot, {})
        return copier(call, clone_tree(self.written))  # fresh: a re-run may write them

    def lacks(self, watch: _Watch, now: Mapping[str, Any]) -> list[str]:
        """What eager changed (`now`: its state after the call) whose earlier state is not kept,
        so re-runs cannot start from it; nothing when the whole call is."""
        if self.snapshot is not None:
            return []
        return watch.changed(now, self._keeps)

    def _keeps(self, t: torch.Tensor) -> bool:
        return bool(self.kept) and t.layout == torch.strided and _view_key(t) in self.kept


def _memory(t: torch.Tensor) -> int | None:
    """The address of a strided tensor's storage (None for sparse and other layouts)."""
    return t.untyped_storage().data_ptr() if t.layout == torch.strided else None


def _view_key(t: torch.Tensor) -> tuple[Any, ...]:
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
        version = _compat.version_counter(t) if t.is_leaf else None
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


class _Restructured(Exception):
    """The caller changed the module's structure; the compiled side starts from a new copy."""


# --- state the check compares ------------------------------------------------------------------


def _input_name(key: int | str) -> str:
    return f"input {key}" if isinstance(key, int) else f"input {key!r}"


def _named_inputs(args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> list[tuple[str, Any]]:
    return [(_input_name(i), a) for i, a in enumerate(args)] + [
        (_input_name(k), v) for k, v in kwargs.items()
    ]


def _module_state(module: torch.nn.Module, owner: str) -> dict[str, Any]:
    prefix = f"{owner}: " if owner else ""
    state: dict[str, Any] = {}
    for name, param in module.named_parameters():
        state[f"{prefix}parameter {name!r}"] = param.detach()
        if param.grad is not None:
            state[f"{prefix}.grad of parameter {name!r}"] = param.grad.detach()
    for name, buffer in module.named_buffers():
        state[f"{prefix}buffer {name!r}"] = buffer.detach()
    for path, submodule in module.named_modules():
        for name, value in pystate.plain_attributes(submodule).items():
            state[f"{prefix}attribute {path + '.' if path else ''}{name}"] = value
    return state


def _optimizer_state(optimizer: torch.optim.Optimizer, owner: str) -> dict[str, Any]:
    state: dict[str, Any] = {}
    for g, group in enumerate(optimizer.param_groups):
        for p, param in enumerate(group["params"]):
            for key, value in optimizer.state.get(param, {}).items():
                if isinstance(value, torch.Tensor):
                    state[f"{owner}: optimizer state[{key!r}] of param_groups[{g}][{p}]"] = (
                        value.detach()
                    )
    return state


def _state_after(
    module: torch.nn.Module | None, args: tuple[Any, ...], kwargs: Mapping[str, Any]
) -> dict[str, Any]:
    """Everything a call may have changed, by display name: inputs, module and optimizer state."""
    state: dict[str, Any] = {}
    if module is not None:
        state.update(_module_state(module, ""))
    for name, value in _named_inputs(args, kwargs):
        for position, leaf in enumerate(leaves(value)):
            label = name if leaf is value else f"{name}[{position}]"
            if isinstance(leaf, torch.Tensor):
                state[f"{label} after the call"] = leaf.detach()
            elif isinstance(leaf, torch.nn.Module):
                state.update(_module_state(leaf, label))
            elif isinstance(leaf, torch.optim.Optimizer):
                state.update(_optimizer_state(leaf, label))
            elif hasattr(leaf, "__dict__") and not isinstance(leaf, type):
                for attr, value in pystate.plain_attributes(leaf).items():
                    state[f"{label}.{attr} after the call"] = value
    return state


@dataclass
class _Watch:
    """What a call may change in place, as it was before the call: tensors' version counters and
    modules' and argument objects' plain attributes. Cheap to take: nothing is copied but mutable
    plain values, so a snapshot of the tensors is made only when a call turns out to change one."""

    versions: list[tuple[str, torch.Tensor, int | None]]  # None: an inference tensor, uncounted
    attributes: dict[str, Any]

    @classmethod
    def of(cls, state: Mapping[str, Any]) -> _Watch:
        """The watch over `state`, as `_state_after` found it before the call."""
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
        """Names of what changed since the watch was taken; `now` is `_state_after` of the same
        objects after the call (it also names plain attributes the call created). Tensors
        whose earlier value is `kept` elsewhere are left out."""
        moved = [
            name
            for name, t, version in self.versions
            if (version is None or _compat.version_counter(t) != version) and not kept(t)
        ]
        return moved + self.attributes_changed(now)

    def attributes_changed(self, now: Mapping[str, Any]) -> list[str]:
        """Names of plain attributes that `now` holds otherwise than the watch, or newly."""
        moved = [name for name, value in self.attributes.items() if not _same(now.get(name), value)]
        return moved + [
            name
            for name, value in now.items()
            if name not in self.attributes and not isinstance(value, torch.Tensor)
        ]


def _same(a: Any, b: Any) -> bool:
    try:
        return bool(a == b)
    except Exception:  # containers of tensors: == is element-wise
        return False


def _grad_targets(
    module: torch.nn.Module | None, args: tuple[Any, ...], kwargs: Mapping[str, Any]
) -> dict[str, torch.Tensor]:
    """Leaf tensors whose gradients the check compares: inputs, then parameters."""
    targets: dict[str, torch.Tensor] = {}
    for name, value in _named_inputs(args, kwargs):
        if isinstance(value, torch.Tensor) and value.requires_grad and value.is_leaf:
            targets[f"grad of {name}"] = value
    if module is not None:
        for pname, param in module.named_parameters():
            if param.requires_grad:
                targets[f"grad of parameter {pname!r}"] = param
    return targets


def _differentiable_outputs(output: Any) -> list[torch.Tensor]:
    found: list[torch.Tensor] = []

    def visit(obj: Any) -> None:
        if isinstance(obj, torch.Tensor):
            if obj.requires_grad and (obj.is_floating_point() or obj.is_complex()):
                found.append(obj)
        elif isinstance(obj, (tuple, list)):
            for item in obj:
                visit(item)
        elif isinstance(obj, dict):
            for item in obj.values():
                visit(item)
        elif hasattr(obj, "__dataclass_fields__"):
            for name in obj.__dataclass_fields__:
                visit(getattr(obj, name))

    visit(output)
    return found


def _cotangent(output: torch.Tensor, index: int, like: torch.dtype | None) -> torch.Tensor:
    """The same random cotangent for the index-th differentiable output on every side.

    Drawn from its own generator (the global RNG is untouched) in float32, rounded to the eager
    output's dtype (`like`, for the float64 reference) and then to this output's dtype.
    """
    dtype = like or output.dtype
    generator = torch.Generator(device=output.device).manual_seed(COTANGENT_SEED + index)
    base = torch.complex64 if dtype.is_complex else torch.float32
    drawn = torch.randn(output.shape, dtype=base, device=output.device, generator=generator)
    return drawn.to(dtype).to(output.dtype)


# --- one side ---------------------------------------------------------------------------------


@dataclass
class _Side:
    """How to run one side: the callable, its own module (if any) and inputs."""

    call: Callable[..., Any]
    module: torch.nn.Module | None
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    cotangent_dtypes: list[torch.dtype] | None = None  # eager's output dtypes, for the reference
    cudagraphs: bool = False  # outputs live in a CUDA graph's memory until the next replay


def _run_side(side: _Side, backward: bool, around: Callable[[], Any]) -> parity.SideResult:
    """Call, then backward with the shared cotangents; exceptions become part of the result."""
    __tracebackhide__ = True  # an exception re-raised from here is the user's
    targets = _grad_targets(side.module, side.args, side.kwargs) if backward else {}
    try:
        with around():
            if side.cudagraphs:
                torch.compiler.cudagraph_mark_step_begin()  # type: ignore[no-untyped-call]
            output = side.call(*side.args, **side.kwargs)
            _synchronize()
    except Exception as exc:  # the other side must raise the same type; parity decides
        return parity.SideResult(output=None, exception=exc, after={}, grads={})
    grads: dict[str, Any] = {}
    outputs = _differentiable_outputs(output) if backward else []
    if outputs and targets:
        likes = side.cotangent_dtypes or []
        cotangents = [
            _cotangent(o, i, likes[i] if i < len(likes) else None) for i, o in enumerate(outputs)
        ]
        try:
            with around():
                computed = torch.autograd.grad(
                    outputs, list(targets.values()), cotangents, allow_unused=True
                )
                _synchronize()
        except Exception as exc:
            return parity.SideResult(
                output=output, exception=exc, after={}, grads={}, raised_in_backward=True
            )
        grads = {
            name: None if g is None else g.detach()
            for name, g in zip(targets, computed, strict=True)
        }
    return parity.SideResult(
        output=_owned(output) if side.cudagraphs else output,
        exception=None,
        after=_state_after(side.module, side.args, side.kwargs),
        grads=grads,
    )


def _state_left(result: parity.SideResult, side: _Side) -> dict[str, Any]:
    """`_state_after` of a side that has run (walked again only where it raised)."""
    if result.exception is None:
        return result.after
    return _state_after(side.module, side.args, side.kwargs)


def _with_containers(result: parity.SideResult, shared: pystate.SharedContainers) -> None:
    """Add the shared containers as the side left them to what it changed."""
    if result.exception is None:
        result.after.update(shared.state())


def _owned(output: Any) -> Any:
    """Copies of a CUDA-graph replay's outputs, which the next replay would overwrite."""
    if isinstance(output, torch.Tensor):
        return output.clone()
    if isinstance(output, (tuple, list)):
        items = [_owned(item) for item in output]
        return items if isinstance(output, list) else _rebuild_tuple(output, items)
    if isinstance(output, dict):
        return type(output)((key, _owned(value)) for key, value in output.items())
    return output


def _synchronize() -> None:
    """Wait for queued CUDA work, so results and timings are final before they are read."""
    if torch.cuda.is_available() and torch.cuda.is_initialized():  # type: ignore[no-untyped-call]
        torch.cuda.synchronize()


@contextmanager
def _nothing() -> Iterator[None]:
    yield


# --- RNG ----------------------------------------------------------------------------------------


@dataclass
class RngState:
    """The global CPU and CUDA generators' states: restored before each run of a call, so every
    run (eager, compiled, re-runs, triage's replays) draws the same random numbers."""

    cpu: torch.Tensor
    cuda: list[torch.Tensor] | None

    @classmethod
    def capture(cls) -> RngState:
        cuda = torch.cuda.get_rng_state_all() if torch.cuda.is_initialized() else None  # type: ignore[no-untyped-call]
        return cls(torch.random.get_rng_state(), cuda)

    def restore(self) -> None:
        torch.random.set_rng_state(self.cpu)
        if self.cuda is not None:
            torch.cuda.set_rng_state_all(self.cuda)


# --- the checker --------------------------------------------------------------------------------


class CallRecorder(Protocol):
    """Told about every check, so that a failure can be replayed later (triage.py's Recorder)."""

    def record(
        self, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: Mapping[str, Any]
    ) -> None:
        """Called once at the start of each check, before anything runs."""

    def diverged(self) -> None:
        """Called when the check just recorded is about to raise ParityError."""


@dataclass
class _Compiled:
    original: Callable[..., Any]  # kept alive so its id is never reused for another callable
    module_copy: torch.nn.Module | None
    compiled: Callable[..., Any]


class Checker:
    """The per-test checker behind the `compile_parity` fixture and `assert_compile_parity`."""

    def __init__(
        self, settings: Settings, accountant: Accountant | None = None, *, examples: bool = False
    ) -> None:
        self.settings = settings
        self.accountant = accountant or Accountant()
        # Hypothesis examples share this checker: the recompile limit starts a fresh cache.
        self.examples = examples
        self.notes: list[str] = []  # what the checker did that the report should say
        self.calls = 0
        self.rejected = 0  # Hypothesis examples rejected because eager raised on them
        self.devices_seen: list[str] = []
        self.largest_errors: dict[str, LeafError] = {}
        self.wall_time_s = 0.0
        self.last_report: parity.ParityReport | None = None  # the latest call's leaf verdicts
        self._compiled: dict[int, _Compiled] = {}
        # id -> (caller's module, its compiled-side copy); the module is kept so ids stay unique
        self._module_copies: dict[int, tuple[torch.nn.Module, torch.nn.Module]] = {}
        self._backend: Any = None
        self._containers: dict[int, pystate.SharedContainers] = {}  # by id of a kept callable
        self._recompiles_before_cache = 0  # recompiles counted before the current compile cache
        self.recorder: CallRecorder | None = None  # set by the fixture, for triage after a failure

    def __call__(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> ParityResult:
        """Run `fn(*args, **kwargs)` eagerly and compiled and fail unless they agree."""
        __tracebackhide__ = True
        return self.check(fn, args, kwargs)

    # compile ------------------------------------------------------------------------------------

    def _backend_object(self) -> Any:
        if self._backend is None:
            name = self.settings.backend
            target: Any = load_backend_callable(name) if ":" in name else name
            mode = None if self.settings.mode == "default" else self.settings.mode
            inner = _compat.inner_backend(target, mode, self.settings.torch_dynamic)
            self._backend = self.accountant.backend(inner)
        return self._backend

    def _module_copy(self, module: torch.nn.Module) -> tuple[torch.nn.Module, bool]:
        """The compiled side's long-lived copy of a caller's module, synced; and whether it is new.

        A module keeps one copy for the whole test, so its parameters keep their addresses as
        they would in the caller's program (CUDA graphs re-record when static addresses move).
        """
        kept = self._module_copies.get(id(module))
        if kept is not None:
            try:
                sync_module(module, kept[1])
                return kept[1], False
            except _Restructured:
                pass
        copied = clone_tree(module)
        self._module_copies[id(module)] = (module, copied)
        return copied, True

    def _copies_of_modules(self, tree: Any) -> dict[int, Any]:
        """A deepcopy memo mapping each module among the inputs, and its state, to its copy."""
        memo: dict[int, Any] = {}
        for leaf in leaves(tree):
            if isinstance(leaf, torch.nn.Module):
                copied, _ = self._module_copy(leaf)
                memo[id(leaf)] = copied
                memo.update(_tensor_pairs(leaf, copied))
        return memo

    def _shared_containers(self, fn: Callable[..., Any]) -> pystate.SharedContainers:
        """The containers `fn` can reach, found once per callable (the walk reads code objects)."""
        found = self._containers.get(id(fn))
        if found is None:
            found = self._containers[id(fn)] = pystate.SharedContainers(fn)
        return found

    def _compiled_for(self, fn: Callable[..., Any]) -> _Compiled:
        entry = self._compiled.get(id(fn))
        module_copy = None
        if isinstance(fn, torch.nn.Module):
            module_copy, fresh = self._module_copy(fn)
            if fresh:
                entry = None
        if entry is None:
            target = module_copy if module_copy is not None else fn
            compiled = torch.compile(
                target,
                backend=self._backend_object(),
                fullgraph=self.settings.fullgraph,
                dynamic=self.settings.torch_dynamic,
            )
            entry = _Compiled(fn, module_copy, compiled)
            self._compiled[id(fn)] = entry
        return entry

    # check --------------------------------------------------------------------------------------

    def check(
        self, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: Mapping[str, Any]
    ) -> ParityResult:
        __tracebackhide__ = True
        if not callable(fn):
            raise TypeError(
                f"compile_parity expects a callable (a function or nn.Module) first, got "
                f"{type(fn).__name__}; call it as compile_parity(model, *inputs)"
            )
        if self.recorder is not None:
            self.recorder.record(fn, args, kwargs)
        started = time.perf_counter()
        self.calls += 1
        self._note_devices(fn, args, kwargs)
        module = fn if isinstance(fn, torch.nn.Module) else None
        snapshot_of = (module, args, dict(kwargs))  # the call as made
        # One walk of the state before the call serves both sides: the compiled side's copies
        # hold the same plain attributes under the same names.
        watch = _Watch.of(_state_after(*snapshot_of))
        backward = self.settings.backward
        rng = RngState.capture()
        shared = self._shared_containers(fn)
        before = shared.snapshot()
        compiled_result, attributes_moved, copies = self._run_compiled(fn, args, kwargs, watch)
        limit_hit = compiled_result.exception is not None and _compat.is_recompile_limit_error(
            compiled_result.exception
        )
        if self.examples and limit_hit:
            self._start_fresh_cache()
            rng.restore()
            shared.restore(before)
            compiled_result, moved_again, copies = self._run_compiled(fn, args, kwargs, watch)
            attributes_moved = attributes_moved or moved_again
        fault = faults.classify(compiled_result.exception)
        if fault is not None:  # not the compiler's doing: retried with a fresh cache, or raised
            rng.restore()
            shared.restore(before)
            retry = functools.partial(self._run_compiled, fn, args, kwargs, watch)
            outcome = faults.recover(
                fault, retry, lambda r: r[0].exception, self.notes, self._context()
            )
            compiled_result, moved_again, copies = outcome
            attributes_moved = attributes_moved or moved_again
        # Re-runs need the call as it was, and the caller's objects hold that until eager runs:
        # keep what the compiled run shows the call changes. Anything else eager changes, the
        # watch sees, and re-runs refuse.
        pristine = _Before.take(snapshot_of, copies, attributes_moved)
        _with_containers(compiled_result, shared)
        shared.restore(before)  # the eager run starts from the state the compiled one did
        rng.restore()
        eager_side = _Side(fn, module, args, dict(kwargs))
        eager_result = _run_side(eager_side, backward, _nothing)
        moved = pristine.lacks(watch, _state_left(eager_result, eager_side))
        _with_containers(eager_result, shared)
        after_eager = RngState.capture()
        left_by_eager = shared.snapshot()

        def rerun(
            copier: Callable[[Any, dict[int, Any]], Any], around: Callable[[], Any] = _nothing
        ) -> Callable[[], parity.SideResult]:
            def run() -> parity.SideResult:
                if moved:
                    raise Unfaithful(
                        f"eager changed {', '.join(moved)} in place where the compiled run did "
                        "not, so there is no copy of the state before the call"
                    )
                ref_module, ref_args, ref_kwargs = pristine.copy(snapshot_of, copier)
                call = ref_module if ref_module is not None else fn
                rng.restore()
                shared.restore(before)
                try:
                    likes = [o.dtype for o in _differentiable_outputs(eager_result.output)]
                    side = _Side(call, ref_module, ref_args, ref_kwargs, likes)
                    return _run_side(side, backward, around)
                finally:
                    after_eager.restore()
                    shared.restore(left_by_eager)

            return run

        table = functools.cache(_compat.compiler_decompositions)  # imported only if a leaf needs it
        report = parity.compare(
            eager_result,
            compiled_result,
            parity.CompareOptions(
                rtol=self.settings.rtol,
                atol=self.settings.atol,
                check_strides=self.settings.check_strides,
                context=self._context(),
            ),
            reference=rerun(upcast_tree),
            eager_again=rerun(clone_tree),
            perturbed=rerun(
                nudged_tree, lambda: RoundingNoise(COTANGENT_SEED, decompositions=table())
            ),
            noise_base=rerun(
                clone_tree,
                lambda: RoundingNoise(COTANGENT_SEED, noise=False, decompositions=table()),
            ),
        )
        self.last_report = report
        errors = self._record_errors(report)
        self.notes += [note for note in report.notes if note not in self.notes]
        self.wall_time_s += time.perf_counter() - started
        self._raise_compile_failure(compiled_result.exception, eager_result.exception)
        if not report.ok:
            if self.recorder is not None:
                self.recorder.diverged()
            raise ParityError(report.failure_message() + self._inputs_note(args, kwargs))
        if eager_result.exception is not None:
            self.accountant.excuse_last_call()
            self._eager_rejected(eager_result.exception, args, kwargs)
        return ParityResult(
            eager=eager_result.output,
            compiled=compiled_result.output,
            errors=errors,
            counts=self.accountant.counts(),
            report=report,
        )

    def _run_compiled(
        self,
        fn: Callable[..., Any],
        args: tuple[Any, ...],
        kwargs: Mapping[str, Any],
        watch: _Watch,
    ) -> tuple[parity.SideResult, bool, _Copies]:
        """The compiled side, on copies of the caller's inputs and modules (left untouched);
        whether it changed (or created) a plain attribute of theirs; and the copies, which show
        the tensors it changed. `watch` is the caller's state before the call, which the
        copies start from."""
        entry = self._compiled_for(fn)
        memo = self._copies_of_modules((args, dict(kwargs)))
        # Shaped as (module, args, kwargs), so an uncopyable input is named as the input it is.
        _, compiled_args, compiled_kwargs = clone_tree((None, args, dict(kwargs)), memo)
        if isinstance(fn, torch.nn.Module) and entry.module_copy is not None:
            memo.update(_tensor_pairs(fn, entry.module_copy))
        copies = _Copies(memo)
        side = _Side(
            entry.compiled,
            entry.module_copy,
            compiled_args,
            compiled_kwargs,
            cudagraphs=self.settings.uses_cudagraphs,
        )
        around = functools.partial(
            self.accountant.observe,
            module=entry.module_copy,
            cudagraphs=self.settings.uses_cudagraphs,
        )
        result = _run_side(side, self.settings.backward, around)
        # The copies' tensors are watched by their marks; their plain attributes by the
        # caller's, which they were synced from.
        return result, bool(watch.attributes_changed(_state_left(result, side))), copies

    def _start_fresh_cache(self) -> None:
        """Hypothesis examples filled Dynamo's cache up to its recompile limit: start a new one.

        Examples draw far more shapes, dtypes and layouts than one program sees, so the limit
        says little about the code under test; running the example eagerly would hide it. The
        recompiles stay counted (a max_recompiles budget judges them after the last example),
        the refused compile is not an eager fallback, and the report says what happened.
        """
        self.accountant.excuse_last_call()
        recompiles = len(self.accountant.counts()["recompiles"])
        budget = self.settings.max_recompiles
        verdict = (
            f"max_recompiles={budget} (from {self.settings.source('max_recompiles')}) judges the "
            "recompiles of all examples"
            if budget is not None
            else "no max_recompiles budget is set, so recompiles do not fail the test"
        )
        self.notes.append(
            f"recompile limit ({_compat.recompile_limit_setting()}) hit after "
            f"{recompiles - self._recompiles_before_cache} recompiles at checker call "
            f"{self.calls}: started a fresh compile cache; {verdict}"
        )
        self._recompiles_before_cache = recompiles
        _compat.reset_dynamo()
        self._compiled.clear()
        self._module_copies.clear()

    def _raise_compile_failure(
        self, compiled: BaseException | None, eager: BaseException | None
    ) -> None:
        """A compiler refusal under fullgraph or the recompile limit is a budget verdict, not parity."""
        __tracebackhide__ = True
        if compiled is None or (
            eager is not None
            and isinstance(_compat.user_exception(compiled), type(_compat.user_exception(eager)))
        ):
            return
        if _compat.is_recompile_limit_error(compiled):
            raise RecompileLimitExceeded(
                "Dynamo hit its recompile limit, so this call would have run eagerly and "
                f"shown no parity: {compiled}\n{self._context()}"
            ) from compiled
        if self.settings.fullgraph and _compat.is_graph_break_error(compiled):
            raise GraphBreakBudgetExceeded(
                f"fullgraph=True (from {self.settings.source('fullgraph')}) but the program has a "
                f"graph break: {_first_line(compiled)}\n{self._context()}"
            ) from compiled

    def _eager_rejected(
        self, exc: BaseException, args: tuple[Any, ...], kwargs: Mapping[str, Any]
    ) -> None:
        """Both sides raised alike: the input is outside what the program accepts.

        Re-raise eager's exception, as the plain call would, with a note that says so and how to
        keep such inputs out; under reject_eager_errors a Hypothesis example is rejected instead.
        """
        __tracebackhide__ = True
        if self.settings.reject_eager_errors and self.examples:
            from hypothesis import reject

            self.rejected += 1
            note = (
                f"{self.rejected} example(s) rejected: eager raised on them (reject_eager_errors)"
            )
            self.notes = [n for n in self.notes if not n.endswith("(reject_eager_errors)")]
            self.notes.append(note)
            reject()
        source = self.settings.source("reject_eager_errors")
        lines = [
            "pytest-torchcompile: eager itself raised this on the call's inputs, and the compiled "
            "run raised alike, so this is the program rejecting its input, not a miscompile.",
            *self._inputs_note(args, kwargs).splitlines()[1:],
            *(f"  {hint}" for hint in _exclusion_hints(args, kwargs)),
        ]
        if self.examples:
            lines.append(
                "  To treat inputs eager rejects as no example at all (hypothesis.reject()), mark "
                f"the test compile_parity(reject_eager_errors=True) (now {source})."
            )
        exc.add_note("\n".join(lines))
        raise exc

    def _note_devices(self, fn: Any, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> None:
        tensors = [leaf for leaf in leaves((args, dict(kwargs))) if isinstance(leaf, torch.Tensor)]
        if isinstance(fn, torch.nn.Module):
            first = next(fn.parameters(), None)  # not list(...): that walks every parameter
            tensors += [first] if first is not None else []
        for tensor in tensors[:1]:
            if str(tensor.device) not in self.devices_seen:
                self.devices_seen.append(str(tensor.device))

    def _context(self) -> str:
        device = ",".join(self.devices_seen) or "cpu"
        context = f"{self.settings.describe()} device={device}"
        if any(seen.startswith("cuda") for seen in self.devices_seen):
            # Both sides run under the caller's TF32 settings; the float64 reference never uses TF32.
            matmul = torch.backends.cuda.matmul.allow_tf32
            cudnn = torch.backends.cudnn.allow_tf32
            context += (
                f" tf32(matmul={'on' if matmul else 'off'}, cudnn={'on' if cudnn else 'off'})"
            )
        return context

    def _record_errors(self, report: parity.ParityReport) -> dict[str, LeafError]:
        errors: dict[str, LeafError] = {}
        for leaf in report.leaves:
            error = LeafError(leaf=leaf.leaf, max_abs=leaf.max_abs, max_rel=leaf.max_rel)
            errors[leaf.leaf] = error
            seen = self.largest_errors.get(leaf.leaf)
            if seen is None or (error["max_abs"], error["max_rel"]) > (
                seen["max_abs"],
                seen["max_rel"],
            ):
                self.largest_errors[leaf.leaf] = error
        return errors

    @staticmethod
    def _inputs_note(args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> str:
        from pytest_torchcompile.strategies import describe

        lines: list[str] = []
        owners: dict[int, str] = {}  # storage address -> the first input on it
        for name, value in _named_inputs(args, kwargs):
            if isinstance(value, (bool, int, float, complex, str)):
                lines.append(f"  {name}: {type(value).__name__} {value!r}")  # a stale scalar?
                continue
            if not isinstance(value, torch.Tensor):
                continue
            line = f"  {name}: {describe(value)}"
            if value.layout == torch.strided and value.untyped_storage().nbytes():
                owner = owners.setdefault(value.untyped_storage().data_ptr(), name)
                line += f" (shares storage with {owner})" if owner != name else ""
            lines.append(line)
        return "\nInputs:\n" + "\n".join(lines) if lines else ""

    def finish(self) -> None:
        """After the test: budgets over every call (and every Hypothesis example)."""
        __tracebackhide__ = True
        names = ("max_graph_breaks", "max_recompiles", "fullgraph")
        self.accountant.check_budgets(
            max_graph_breaks=self.settings.max_graph_breaks,
            max_recompiles=self.settings.max_recompiles,
            fullgraph=self.settings.fullgraph,
            source={name: self.settings.source(name) for name in names},
        )


def _exclusion_hints(args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> list[str]:
    """For each unusual property of a tensor input, the strategy argument that excludes it."""
    hints: list[str] = []
    for name, value in _named_inputs(args, kwargs):
        if not isinstance(value, torch.Tensor) or value.layout != torch.strided:
            continue
        found: list[str] = []
        if any(s == 0 and n > 1 for s, n in zip(value.stride(), value.shape, strict=True)):
            found.append(
                "is expanded (stride 0: in-place ops reject it): draw it with tcst.tensors("
                "layouts=[k for k in tcst.LAYOUT_KINDS if k != 'expanded'])"
            )
        if value.numel() == 0:
            found.append("is empty: draw it with tcst.shapes(min_side=1)")
        elif 1 in value.shape:
            found.append(
                "has a dimension of size 1: draw it with tcst.shapes(min_side=2) if the program "
                "needs more"
            )
        if (value.is_floating_point() or value.is_complex()) and not bool(value.isfinite().all()):
            found.append("holds NaN or an infinity: draw it with tcst.tensors(specials=False)")
        if value.dtype in (torch.float16, torch.bfloat16):
            found.append(
                f"is {value.dtype}: draw it with tcst.float_dtypes(sizes=(32, 64)) if the program "
                "does not support half precision"
            )
        hints += [f"{name} {what}" for what in found]
    return hints


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"


@contextmanager
def isolated(accountant: Accountant) -> Iterator[None]:
    """A clean compile world for one test: Dynamo reset, configs, grad mode and dtype restored."""
    snapshot = _compat.config_snapshot()
    grad_enabled = torch.is_grad_enabled()
    default_dtype = torch.get_default_dtype()
    with _compat.structured_trace_contained():  # Dynamo's reset logs trace records too
        _compat.reset_dynamo()
        try:
            with _compat.patched_configs(accountant.dynamo_settings(), {"fallback_random": True}):
                yield
        finally:
            _compat.reset_dynamo()
            _compat.config_restore(snapshot)
            torch.set_grad_enabled(grad_enabled)
            torch.set_default_dtype(default_dtype)


def assert_compile_parity(
    fn: Callable[..., Any], /, *args: Any, kwargs: Mapping[str, Any] | None = None, **options: Any
) -> ParityResult:
    """The compile_parity check outside pytest: one call, its own compile cache and budgets.

    `options` are the marker's keys (backend, mode, dynamic, fullgraph, max_graph_breaks,
    max_recompiles, rtol, atol, backward, check_strides); `kwargs` go to `fn`.
    """
    __tracebackhide__ = True
    settings = apply(Settings(), options, "assert_compile_parity(...)")
    checker = Checker(settings)
    with isolated(checker.accountant):
        result = checker.check(fn, args, kwargs or {})
        checker.finish()
        result.counts = checker.accountant.counts()
    return result


__all__ = ["Checker", "CompileParityFailure", "ParityResult", "assert_compile_parity", "isolated"]
