"""Compiles that serve later tests: zero-change mode's one compiled module per class and structure.

A suite's tests call the same module classes again and again, each test with new instances and
often new input sizes. A long-running program compiles such a module once: Dynamo's guards let
the compiled code serve every instance, and automatic dynamic shapes turn a second input size
into one dynamic graph instead of another static compile. Intercepted calls are checked the same
way: the compiled side keeps, for the whole session (per xdist worker), one copy of each module
class and structure, compiled once with one counting backend (Dynamo guards on the backend), and
syncs each test's module into it before the call, as it syncs a module between calls of a test.
A function (--compile-parity-functions) is the same object in every test: it is compiled once.

Syncing brings a module over completely (snapshot.sync_module: every attribute, private ones and
objects too, with extra ones removed); a module tree with hooks of its own cannot be, nor one
whose attributes hold code that reaches the module itself (a closure over it or its methods:
the copy would run on the test's module); each gets its own compile per test, and the report
says why for the second. Every compile of the session lives in a Dynamo
recompile region of its own (`isolate_recompiles`, torch 2.13), so the entries they leave never count
against a test's own `torch.compile` of the same code; where torch has no such regions, each
test compiles afresh. Fixture tests keep one Dynamo cache each (their budgets are per test).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Any

import torch

from pytest_torchcompile import _compat


@dataclass
class SharedCompiles:
    """The session's compiled modules and functions, and its counting backends."""

    backends: dict[Hashable, Any] = field(default_factory=dict)  # settings -> (counting, inner)
    # key_of(...) -> the compiled entry, and the memo its module copy was made with
    entries: dict[Hashable, Any] = field(default_factory=dict)
    # key_of(...) -> why syncing cannot bring its modules over (snapshot.Unsynced): each test
    # compiles them afresh
    refused: dict[Hashable, str] = field(default_factory=dict)

    @classmethod
    def start(cls) -> SharedCompiles:
        """The session's store, from a clean Dynamo: what a conftest compiled on import, or an
        earlier in-process session, leaves no guards or automatic-dynamic sizes behind."""
        _compat.reset_dynamo()
        return cls()

    def close(self) -> None:
        """At the session's end: Dynamo forgets the session's compiles, as after a fixture test."""
        self.clear()
        _compat.reset_dynamo()

    @staticmethod
    def available() -> bool:
        """Whether this torch can keep the checker's compiles apart from the test's own."""
        return bool(_compat.own_recompile_region())

    def backend(self, key: Hashable, make: Callable[[], Any]) -> Any:
        """The session's backend for `key` (backend, mode, dynamic), made once by `make`."""
        found = self.backends.get(key)
        if found is None:
            found = self.backends[key] = make()
        return found

    def clear(self) -> None:
        """Forget every compiled module (Dynamo's cache was reset)."""
        self.entries.clear()


def key_of(module: torch.nn.Module, settings_key: Hashable, structure: Hashable) -> Hashable | None:
    """What one shared compile of `module` stands for: the settings, its class and structure,
    and whether inference mode is on (its parameters are copied under it); None where syncing
    cannot bring a module of this tree over (a hook of its own: it is compiled per test)."""
    if any(_compat.module_call_hooks(submodule) for submodule in module.modules()):
        return None
    return (settings_key, type(module), structure, torch.is_inference_mode_enabled())


__all__ = ["SharedCompiles", "key_of"]
