"""What a call leaves: every value parity compares after it, by the name the report gives it.

A call can change its module (parameters, their gradients, buffers, and every other attribute
of every submodule: flags and counters, tensors it caches outside its buffers, dicts of tables
keyed by size, objects it holds, private ones too) and its inputs (tensors written in place, the
attributes and slots of objects, optimizers' state). Objects are followed a few levels deep,
through containers, slots and weak references (a tied decoder reaches its embedding's weight
only through `weakref.ref`), and a generator is compared by its state. Nothing is left out for
being private: a rotary embedding's `_cache` is as much what the call leaves as its output.

What the copier shares between the runs (module-level objects) is not walked here: each run
changes the same object, which `world.World` puts back between them.
"""

from __future__ import annotations

import types
import weakref
from collections.abc import Iterator, Mapping
from typing import Any

import torch

from pytest_torchcompile import _compat
from pytest_torchcompile.running import pystate
from pytest_torchcompile.running.copier import is_atomic, is_shared
from pytest_torchcompile.running.trees import key_name, leaves, object_attributes
from pytest_torchcompile.running.world import generator_fingerprint

_DEPTH = 3  # objects followed from a module's attribute or an input
# A module's own bookkeeping: its tensors and submodules are walked as such, its hooks are code.
_MODULE_BOOKKEEPING = (_compat.MODULE_INTERNALS - {"training"}) | _compat.COMPILE_MARKS
_CODE = (types.FunctionType, types.MethodType, types.BuiltinFunctionType, type)

State = dict[str, Any]


def _input_name(key: int | str) -> str:
    return f"input {key}" if isinstance(key, int) else f"input {key!r}"


def named_inputs(args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> list[tuple[str, Any]]:
    return [(_input_name(i), a) for i, a in enumerate(args)] + [
        (_input_name(k), v) for k, v in kwargs.items()
    ]


def state_after(
    module: torch.nn.Module | None, args: tuple[Any, ...], kwargs: Mapping[str, Any]
) -> State:
    """Everything a call may have changed, by display name: inputs, module and optimizer state."""
    walk = _Walk()
    if module is not None:
        walk.module(module, "")
    for name, value in named_inputs(args, kwargs):
        for position, leaf in enumerate(leaves(value)):
            label = name if leaf is value else f"{name}[{position}]"
            if isinstance(leaf, torch.nn.Module):
                walk.module(leaf, label)
            elif isinstance(leaf, torch.optim.Optimizer):
                walk.optimizer(leaf, label)
            else:
                walk.parts(leaf, label, _DEPTH, suffix=" after the call")
    return walk.state


def referenced_parameters(module: torch.nn.Module) -> Iterator[tuple[str, torch.nn.Parameter]]:
    """The parameters a module reaches outside its own tree: through a weak reference or an
    attribute that holds a module it does not own, by the path the report names them with
    (`ref().weight`). Their gradients are the call's too."""
    for path, submodule in module.named_modules():
        for name, value in vars(submodule).items():
            if name in _MODULE_BOOKKEEPING:
                continue
            target, where = _referent(value), f"{path + '.' if path else ''}{name}"
            if target is not value:
                where += "()"
            if isinstance(target, torch.nn.Module) and not is_shared(target):
                for pname, param in target.named_parameters():
                    yield f"{where}.{pname}", param


def _referent(value: Any) -> Any:
    """What a weak reference points at (None where it is dead); anything else as it is."""
    return value() if isinstance(value, weakref.ref) else value


class _Walk:
    """One walk over what a call leaves; `state` holds what it found."""

    def __init__(self) -> None:
        self.state: State = {}
        self._seen: set[int] = set()  # objects walked
        self._owned: set[int] = set()  # the modules' parameters and buffers, named as such

    def module(self, module: torch.nn.Module, owner: str, *, copy: bool = False) -> None:
        """Parameters, their gradients, buffers, and every attribute of every submodule."""
        if id(module) in self._seen:
            return
        self._seen.add(id(module))
        prefix = f"{owner}: " if owner else ""
        for name, param in module.named_parameters():
            self._owned.add(id(param))
            self._tensor(f"{prefix}parameter {name!r}", param, copy)
            if param.grad is not None:
                self._tensor(f"{prefix}.grad of parameter {name!r}", param.grad, copy)
        for name, buffer in module.named_buffers():
            self._owned.add(id(buffer))
            self._tensor(f"{prefix}buffer {name!r}", buffer, copy)
        for path, submodule in module.named_modules():
            self._seen.add(id(submodule))
            for name, value in vars(submodule).items():
                if name not in _MODULE_BOOKKEEPING and not _dunder(name):
                    label = f"{prefix}attribute {path + '.' if path else ''}{name}"
                    self.parts(value, label, _DEPTH, copy=copy)

    def optimizer(self, optimizer: torch.optim.Optimizer, owner: str) -> None:
        """Per-parameter state (tensors) and each group's hyper-parameters (`lr`,
        `momentum`...), which a scheduler or the step itself may change."""
        for g, group in enumerate(optimizer.param_groups):
            for key, value in group.items():
                if key != "params" and (isinstance(value, torch.Tensor) or pystate.is_plain(value)):
                    detached = value.detach() if isinstance(value, torch.Tensor) else value
                    self.state[f"{owner}: param_groups[{g}][{key!r}]"] = detached
            for p, param in enumerate(group["params"]):
                for key, value in optimizer.state.get(param, {}).items():
                    if isinstance(value, torch.Tensor):
                        label = f"{owner}: optimizer state[{key!r}] of param_groups[{g}][{p}]"
                        self.state[label] = value.detach()

    def parts(
        self, value: Any, label: str, depth: int, *, suffix: str = "", copy: bool = False
    ) -> None:
        """What one value holds, each leaf under `label` and the path to it: tensors, plain
        values, generators' states; through containers, objects, slots and weak references.
        `copy`: the value is reached through a weak reference, so every run may share it:
        its tensors are copied as they are now."""
        kind = type(value)
        if issubclass(kind, torch.Tensor):
            # A parameter or buffer held again (an RNN's `_flat_weights`) is named once, unless
            # it is an input.
            if id(value) not in self._owned or label.startswith("input"):
                self._tensor(label + suffix, value, copy)
            return
        if pystate.is_plain(value, tensors=False):
            self.state[label + suffix] = pystate.copy_plain(value) if copy else value
            return
        if issubclass(kind, weakref.ref):
            target = value()
            if target is not None:
                self.parts(target, f"{label}()", depth, suffix=suffix, copy=True)
            return
        fingerprint = generator_fingerprint(value)
        if fingerprint is not None:
            self.state[f"{label} (generator state){suffix}"] = fingerprint
            return
        if id(value) in self._seen or depth <= 0 or is_atomic(value) or issubclass(kind, _CODE):
            return
        if is_shared(value):
            return
        if issubclass(kind, torch.nn.Module):
            self.module(value, label, copy=copy)
            return
        self._seen.add(id(value))
        if issubclass(kind, torch.optim.Optimizer):
            self.optimizer(value, label)
        elif kind in (list, tuple) or (
            issubclass(kind, (list, tuple)) and not hasattr(kind, "_fields")
        ):
            for i, item in enumerate(value):
                self.parts(item, f"{label}[{i}]", depth - 1, suffix=suffix, copy=copy)
        elif issubclass(kind, dict):
            for i, (key, item) in enumerate(list(value.items())):
                name = f"{label}[{key_name(key, i)}]"
                self.parts(item, name, depth - 1, suffix=suffix, copy=copy)
        else:
            for name, item in object_attributes(value).items():
                if not _dunder(name):
                    self.parts(item, f"{label}.{name}", depth - 1, suffix=suffix, copy=copy)

    def _tensor(self, label: str, tensor: torch.Tensor, copy: bool) -> None:
        """A tensor under every name it is reached by: which of a call's own tensors are one
        object (`{"a": t, "b": t}`) can differ between eager and compiled (a compiler may return
        one object for two equal outputs), so each place is compared by value, never skipped."""
        self.state[label] = tensor.detach().clone() if copy else tensor.detach()


def _dunder(name: str) -> bool:
    return name.startswith("__") and name.endswith("__")


__all__ = ["State", "named_inputs", "referenced_parameters", "state_after"]
