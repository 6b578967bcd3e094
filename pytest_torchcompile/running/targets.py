"""The two kinds of callable a check runs, each carrying what differs between them.

A module owns state besides the call's inputs (parameters, buffers, attributes): the compiled
side runs a copy of it synced from the caller's, torch.export takes it as it is, and its class and
structure name the session's one compile of it. A function owns nothing: it is compiled, shared
and run as itself, and exported wrapped in a module. The kind is decided once, where a call enters
the checker (`target_of`); the rooms below ask the target, never the callable's type.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterator
from dataclasses import dataclass
from typing import Any, ClassVar

import torch

from pytest_torchcompile.running import randomness
from pytest_torchcompile.running.module_copies import ModuleCopies
from pytest_torchcompile.running.shared_compiles import key_of
from pytest_torchcompile.running.snapshot import tensor_pairs

Kept = tuple[torch.nn.Module, dict[int, Any]]  # a module's copy and the memo it was made with


@dataclass(frozen=True)
class ModuleTarget:
    """A module called: its state is part of the call, and the compiled side runs its copy."""

    module: torch.nn.Module

    @property
    def fn(self) -> Callable[..., Any]:
        """What is called."""
        return self.module

    @property
    def label(self) -> str:
        """The frame a program made of it is counted under."""
        return f"{type(self.module).__name__}.forward"

    def owned(self) -> list[tuple[str, Any]]:
        """What the call carries besides its inputs, by the name a message gives it."""
        return [("the module", self.module)]

    def state_tensors(self) -> list[torch.Tensor]:
        """The tensors it holds: its parameters and buffers."""
        return [*self.module.parameters(), *self.module.buffers()]

    def submodules(self) -> Iterator[torch.nn.Module]:
        """The modules a call of it runs besides itself."""
        return (inner for inner in self.module.modules() if inner is not self.module)

    def specialised_on(self) -> dict[str, Hashable]:
        """Besides the inputs, what an exported program of it is specialised on."""
        return {"training": tuple(module.training for module in self.module.modules())}

    def as_module(self) -> torch.nn.Module:
        """The module torch.export takes."""
        return self.module

    def session_key(self, compiled_as: Hashable, structure: Hashable) -> Hashable | None:
        """The session's one compile of its class and `structure` (shared_compiles.key_of)."""
        return key_of(self.module, compiled_as, structure)

    def copied(self, copies: ModuleCopies) -> tuple[Target, bool]:
        """Its long-lived copy on the compiled side, synced; whether the copy is new."""
        copy, fresh = copies.of(self.module)
        return ModuleTarget(copy), fresh

    def synced(
        self, copies: ModuleCopies, kept: Kept | None
    ) -> tuple[Target, dict[int, Any], bool]:
        """`kept` synced from it, or a fresh copy (ModuleCopies.synced): the copy, its memo, and
        whether it is fresh."""
        copy, memo, fresh = copies.synced(self.module, kept)
        return ModuleTarget(copy), memo, fresh

    def apart(self) -> Target:
        """Itself compiled in a cache of its own: a copy of a module is apart already."""
        return self

    def on(self, module: Any) -> Target:
        """The same call on `module`, a copy of its own (a re-run's, the control's)."""
        return ModuleTarget(module)

    def state_pairs(self, copy: torch.nn.Module | None) -> Iterator[tuple[int, torch.Tensor]]:
        """(id of each of its parameters and buffers, the same one of `copy`)."""
        return tensor_pairs(self.module, copy) if copy is not None else iter(())


@dataclass(frozen=True)
class FunctionTarget:
    """A function called: it owns no state, and every side runs it as itself."""

    fn: Callable[..., Any]
    module: ClassVar[None] = None

    @property
    def label(self) -> str:
        return str(getattr(self.fn, "__qualname__", type(self.fn).__name__))

    def owned(self) -> list[tuple[str, Any]]:
        return []

    def state_tensors(self) -> list[torch.Tensor]:
        return []

    def submodules(self) -> Iterator[torch.nn.Module]:
        return iter(())

    def specialised_on(self) -> dict[str, Hashable]:
        return {}

    def as_module(self) -> torch.nn.Module:
        """The function as the module torch.export takes; its own tensors stay its own."""
        return _Program(self.fn)

    def session_key(self, compiled_as: Hashable, structure: Hashable) -> Hashable | None:
        """A module-level function is the same object in every test: it is its own key."""
        return compiled_as, self.fn

    def copied(self, copies: ModuleCopies) -> tuple[Target, bool]:
        return self, False

    def synced(
        self, copies: ModuleCopies, kept: Kept | None
    ) -> tuple[Target, dict[int, Any], bool]:
        return self, {}, False

    def apart(self) -> Target:
        """The function with a code object of its own (randomness.own_code), so Dynamo keeps
        its compile apart from the checked one's."""
        return FunctionTarget(randomness.own_code(self.fn))

    def on(self, module: Any) -> Target:
        return self

    def state_pairs(self, copy: torch.nn.Module | None) -> Iterator[tuple[int, torch.Tensor]]:
        return iter(())


Target = ModuleTarget | FunctionTarget


def target_of(fn: Any) -> Target:
    """The kind of callable `fn` is; TypeError where it is not callable."""
    __tracebackhide__ = True
    if isinstance(fn, ModuleTarget | FunctionTarget):
        return fn
    if isinstance(fn, torch.nn.Module):
        return ModuleTarget(fn)
    if not callable(fn):
        raise TypeError(
            f"compile_parity expects a callable (a function or nn.Module) first, got "
            f"{type(fn).__name__}; call it as compile_parity(model, *inputs)"
        )
    return FunctionTarget(fn)


class _Program(torch.nn.Module):
    """A function as the module torch.export takes; the function's own tensors stay its own."""

    def __init__(self, fn: Callable[..., Any]) -> None:
        super().__init__()
        self.fn = fn

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        return self.fn(*args, **kwargs)


__all__ = ["FunctionTarget", "ModuleTarget", "Target", "target_of"]
