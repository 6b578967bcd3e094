"""Per test: each intercepted module's structure (read once) and its stand-in, the module the
checker replays a call on (copied once, synced from the test's module before each call)."""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

import torch

from pytest_torchcompile.adoption.selection import module_structure
from pytest_torchcompile.running.copier import clone_tree
from pytest_torchcompile.running.kept import KeptFor
from pytest_torchcompile.running.snapshot import sync_module


class ModuleCopies:
    """Per test: each module's structure (read once) and its stand-in (copied once, synced)."""

    def __init__(self) -> None:
        # (id of a module, inference mode) -> it, its stand-in, and the memo it was copied with
        self._stand_ins: dict[
            tuple[int, bool], tuple[torch.nn.Module, torch.nn.Module, dict[int, Any]]
        ] = {}
        self._structures = KeptFor(module_structure)

    def structure(self, module: torch.nn.Module) -> Hashable:
        """A module's tree and tensors (selection.module_structure), computed once per module
        per test.

        Walking a large model on every call would cost milliseconds; a module restructured in
        the middle of a test keeps its first structure here (its stand-in is still copied anew).
        """
        return self._structures.of(module)

    def stand_in(self, module: torch.nn.Module) -> torch.nn.Module:
        """A copy holding the module's state before the call: the replay's module.

        One per module (and inference mode) for the whole test, synced before each call, so the
        checker keeps one compiled copy for it and Dynamo sees the sequence of calls.
        """
        key = (id(module), torch.is_inference_mode_enabled())
        kept = self._stand_ins.get(key)
        with torch.inference_mode(False):  # parameters of a copy made here stay normal tensors
            if kept is not None:
                try:
                    sync_module(module, kept[1], kept[2])
                    return kept[1]
                except Exception:  # restructured, or state sync cannot copy: copy it afresh
                    pass
            memo: dict[int, Any] = {}
            copied = clone_tree(module, memo)
        self._stand_ins[key] = (module, copied, memo)
        return copied  # type: ignore[no-any-return]


__all__ = ["ModuleCopies"]
