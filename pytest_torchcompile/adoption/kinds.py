"""The two kinds of intercepted call, each carrying what differs between them.

A module call runs its class's `__call__` on the module and is replayed on the module's stand-in
(stand_ins.py); its program is the module's structure and mode. A function call runs and is
replayed as the function itself; its program is the function alone. What the checker does with
either is the kind of its target (running/targets.py), which the call hands over already made.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any, ClassVar

import torch

from pytest_torchcompile.adoption.selection import refusal
from pytest_torchcompile.adoption.stand_ins import ModuleCopies
from pytest_torchcompile.running.targets import FunctionTarget, ModuleTarget, Target


@dataclass(frozen=True)
class _Made:
    """What either kind of call holds: the `__call__` or function it reached, the arguments,
    and the class or function's qualified name."""

    original: Callable[..., Any]
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    name: str


@dataclass(frozen=True)
class ModuleCall(_Made):
    """One module call as the test made it, and the module it was made on."""

    kind: ClassVar[str] = "module"
    owner: ClassVar[str] = "this class and structure"  # whose compile a later check reuses
    signed_by: ClassVar[str] = " with this structure"  # besides the inputs, in a skip reason
    module: torch.nn.Module

    @property
    def target(self) -> Target:
        """What the call acts on: the world around it is found for this (World.of)."""
        return ModuleTarget(self.module)

    def run(self) -> Any:
        return self.original(self.module, *self.args, **self.kwargs)

    def refusal(self) -> str | None:
        """Why the call cannot be replayed whatever its inputs (selection.refusal), or None."""
        return refusal(self.module)

    def program(self, copies: ModuleCopies) -> Hashable:
        """Besides the inputs, what makes two calls one program: structure and training flag."""
        return copies.structure(self.module), self.module.training

    def structure(self, copies: ModuleCopies) -> Hashable:
        """What a compile kept for the session is shared by (CompiledSide.share)."""
        return copies.structure(self.module)

    def replayed(self, copies: ModuleCopies) -> Target:
        """The module's stand-in, holding its state before the call."""
        return ModuleTarget(copies.stand_in(self.module))


@dataclass(frozen=True)
class FunctionCall(_Made):
    """One function call as the test made it."""

    kind: ClassVar[str] = "function"
    owner: ClassVar[str] = "this function"
    signed_by: ClassVar[str] = ""

    @property
    def target(self) -> Target:
        return FunctionTarget(self.original)

    def run(self) -> Any:
        return self.original(*self.args, **self.kwargs)

    def refusal(self) -> str | None:
        return refusal(None)

    def program(self, copies: ModuleCopies) -> Hashable:
        return None

    def structure(self, copies: ModuleCopies) -> Hashable:
        return None

    def replayed(self, copies: ModuleCopies) -> Target:
        return self.target


InterceptedCall = ModuleCall | FunctionCall

__all__ = ["FunctionCall", "InterceptedCall", "ModuleCall"]
