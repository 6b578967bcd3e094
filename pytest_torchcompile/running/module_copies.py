"""The compiled side's copies of the caller's modules: copied once, synced before each call.

A module keeps one copy for the whole test, so its parameters keep their addresses as they would
in the caller's program (CUDA graphs re-record when static addresses move); a copy is made afresh
only where the module is structured otherwise than its copy. The control repeats how the latest
run made its copies (afresh, or synced), so it meets the modules as the compiled call did.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from pytest_torchcompile.running.copier import clone_tree
from pytest_torchcompile.running.snapshot import (
    Restructured,
    Unsynced,
    sync_module,
    tensor_pairs,
)
from pytest_torchcompile.running.trees import leaves


class ModuleCopies:
    """The long-lived copy of each caller's module, and whether the latest run made one afresh."""

    def __init__(self) -> None:
        # id of a caller's module -> it (kept so ids stay unique), its copy, and the memo the
        # copy was made with
        self._kept: dict[int, tuple[torch.nn.Module, torch.nn.Module, dict[int, Any]]] = {}
        self.afresh = False  # the latest run copied a module afresh (else synced one)
        self.unsynced: str | None = None  # why the latest sync could not be complete (Unsynced)

    def synced(
        self, module: torch.nn.Module, kept: tuple[torch.nn.Module, dict[int, Any]] | None
    ) -> tuple[torch.nn.Module, dict[int, Any], bool]:
        """`kept` (a copy of a module like `module`, and the memo it was made with) synced from
        `module`; or, where there is none or `module` is structured otherwise, a fresh copy and
        its memo. The last item says whether the copy is fresh."""
        self.unsynced = None
        if kept is not None:
            try:
                sync_module(module, *kept)
                return kept[0], kept[1], False
            except Unsynced as exc:
                self.unsynced = str(exc)
            except Restructured:
                pass
        memo: dict[int, Any] = {}
        copied: torch.nn.Module = clone_tree(module, memo)
        self.afresh = True
        return copied, memo, True

    def of(self, module: torch.nn.Module) -> tuple[torch.nn.Module, bool]:
        """The long-lived copy of a caller's module, synced; and whether it is new."""
        kept = self._kept.get(id(module))
        copied, memo, fresh = self.synced(module, kept[1:] if kept is not None else None)
        if fresh:
            self._kept[id(module)] = (module, copied, memo)
        return copied, fresh

    def memo_of(
        self, tree: Any, copy: Callable[[torch.nn.Module], torch.nn.Module] | None = None
    ) -> dict[int, Any]:
        """A deepcopy memo mapping each module among the inputs, and its state, to its copy
        (the long-lived one, synced, or what `copy` makes of it)."""
        memo: dict[int, Any] = {}
        for leaf in leaves(tree):
            if isinstance(leaf, torch.nn.Module) and id(leaf) not in memo:
                copied = copy(leaf) if copy is not None else self.of(leaf)[0]
                memo[id(leaf)] = copied
                memo.update(tensor_pairs(leaf, copied))
        return memo

    def as_the_latest(self, module: torch.nn.Module) -> torch.nn.Module:
        """A copy of `module` made as the latest run made its copies: afresh, or synced."""
        memo: dict[int, Any] = {}
        copied: torch.nn.Module = clone_tree(module, memo)
        if not self.afresh:
            sync_module(module, copied, memo)
        return copied

    def clear(self) -> None:
        """Forget every copy (Dynamo's cache was reset: the compiles made on them are gone)."""
        self._kept.clear()


__all__ = ["ModuleCopies"]
