"""What every checker call of a test leaves behind, so that a failing test can be replayed.

A passing test pays only for this room: at the start of each check the Recorder keeps a copy of
the inputs, the RNG state and (once per test and module) a copy of each module, so that the
test's whole sequence of checker calls can be replayed later (replay.py) by the failure-only
work: the stage bisect and artifacts (triage.py) and the standalone repro (repro.py).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Hashable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import torch

from pytest_torchcompile.running.copier import clone_tree
from pytest_torchcompile.running.trees import leaves
from pytest_torchcompile.running.world import RngState

_AUTOCAST_DEVICES = ("cpu", "cuda")


@dataclass(frozen=True)
class Modes:
    """The modes a call ran under, which its replay enters again: grad mode, and autocast where
    it was on (a bfloat16 autocast region changes what a call computes: a replay without it is
    another program)."""

    grad: bool = True
    autocast: tuple[tuple[str, torch.dtype], ...] = ()  # (device type, dtype) where enabled

    @classmethod
    def capture(cls) -> Modes:
        return cls(
            torch.is_grad_enabled(),
            tuple(
                (device, torch.get_autocast_dtype(device))
                for device in _AUTOCAST_DEVICES
                if torch.is_autocast_enabled(device)
            ),
        )

    @contextlib.contextmanager
    def entered(self) -> Iterator[None]:
        with contextlib.ExitStack() as stack:
            stack.enter_context(torch.set_grad_enabled(self.grad))
            for device in _AUTOCAST_DEVICES:
                dtype = dict(self.autocast).get(device)
                if dtype is not None:
                    stack.enter_context(torch.autocast(device, dtype=dtype))
                elif torch.is_autocast_enabled(device):
                    stack.enter_context(torch.autocast(device, enabled=False))
            yield

    def __str__(self) -> str:
        shown = [f"autocast({device!r}, dtype={dtype})" for device, dtype in self.autocast]
        return ", ".join(([] if self.grad else ["torch.no_grad()"]) + shown)


@dataclass
class Call:
    """One checker call as it started: the callable, copies of its inputs, the RNG state and
    the modes it ran under."""

    fn: Any
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    rng: RngState
    example: int  # the Hypothesis example it belongs to (0 outside Hypothesis)
    diverged: bool = False  # the check raised ParityError
    note: str = ""  # what its message said about a setting the checker chose (fallback_random)
    modes: Modes = field(default_factory=Modes)


class Recorder:
    """Keeps what each check was asked, so that a failing test can be replayed from its start.

    Inputs are copied at every call (with their strides, offsets and aliasing); a module is
    copied once per test, when first seen, and later calls refer to that copy, so a replay
    evolves it through the calls as the test did. Changes the test makes to a module between
    checks (an optimizer step outside the checker) are not recorded.
    """

    def __init__(self, *, examples: bool = False) -> None:
        self.calls: list[Call] = []
        self.examples = examples
        self._modules: dict[int, tuple[torch.nn.Module, torch.nn.Module]] = {}
        self._example_context: object | None = None  # kept, so its id is not reused
        self._example = 0
        # Where the divergence came from graphs an earlier call left: "compiled dynamic" (for
        # this call, with the sizes automatic dynamic shapes made symbolic) or "reused a
        # compile"; "" otherwise. A fresh replay compiles static graphs, so triage also
        # replays with dynamic shapes.
        self.session_graphs = ""
        # Zero-change mode: what makes two divergences the same (the class or function, its
        # structure and input signature, the leaves that differ): triaged once per session.
        self.failure_key: Hashable | None = None

    def record(
        self, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: Mapping[str, Any]
    ) -> None:
        memo: dict[int, Any] = {key: kept for key, (_, kept) in self._modules.items()}
        fn_copy, args_copy, kwargs_copy = clone_tree((fn, args, dict(kwargs)), memo)
        for leaf in _modules_in((fn, args, dict(kwargs))):
            if id(leaf) not in self._modules:
                self._modules[id(leaf)] = (leaf, memo[id(leaf)])
        self.calls.append(
            Call(
                fn_copy,
                args_copy,
                kwargs_copy,
                RngState.capture(),
                self._current_example(),
                modes=Modes.capture(),
            )
        )

    def diverged(self, note: str = "") -> None:
        self.calls[-1].diverged = True
        self.calls[-1].note = note

    def _current_example(self) -> int:
        """Hypothesis runs each example in its own build context: a new one is a new example."""
        if not self.examples:
            return 0
        from hypothesis.control import current_build_context

        try:
            context = current_build_context()
        except Exception:  # no example is running (a check outside @given's body)
            return self._example
        if context is not self._example_context:
            self._example_context = context
            self._example += 1
        return self._example


def _modules_in(tree: Any) -> Iterator[torch.nn.Module]:
    """The modules among a call's callable and inputs, found as the checker finds them."""
    return (leaf for leaf in leaves(tree) if isinstance(leaf, torch.nn.Module))


__all__ = ["Call", "Recorder"]
