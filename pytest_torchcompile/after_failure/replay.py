"""Replaying a recorded sequence of checker calls in a fresh compile world, after a failure.

The one routine the stage bisect, the artifacts (triage.py) and a standalone repro.py (repro.py)
share: each replays the Recorder's calls in order, so failures that depend on earlier calls
(stale caches, missing recompiles, dynamic shapes) show up again.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from pytest_torchcompile.errors import ParityError
from pytest_torchcompile.runner import Checker
from pytest_torchcompile.running.copier import clone_tree
from pytest_torchcompile.running.recorder import Call
from pytest_torchcompile.running.world import World, unseen
from pytest_torchcompile.settings import Settings


@dataclass
class Divergence:
    """The first call of a replay whose check failed, and what it said."""

    call: int  # 1-based, within the replayed sequence
    message: str


def replay(calls: list[Call], settings: Settings, *, examples: bool = False) -> Divergence | None:
    """Check `calls` in order with a fresh checker in a fresh compile world; the first failure.

    The calls are copied first, so the recording stays as it was. An exception that both sides
    raised alike is what the test saw too; the replay goes on.
    """
    memo: dict[int, Any] = {}  # one memo: a module the calls share stays shared in the copies
    copies = [_copied(call, memo) for call in calls]
    checker = Checker(settings, examples=examples)
    # The replays run after the test, and leave nothing the next test sees: what the calls'
    # code reaches outside their copies is put back.
    worlds = [World.of(call.fn).for_call(call.args, call.kwargs) for call in copies]
    before = [world.capture() for world in worlds]
    try:
        with checker.isolated(), unseen():
            for number, call in enumerate(copies, 1):
                call.rng.restore()
                try:
                    with call.modes.entered():
                        checker.check(call.fn, call.args, call.kwargs)
                except ParityError as exc:
                    return Divergence(number, str(exc))
                except Exception:  # raised alike on both sides, or a budget verdict
                    continue
    finally:
        for world, state in reversed(list(zip(worlds, before, strict=True))):
            world.restore(state)
    return None


def _copied(call: Call, memo: dict[int, Any]) -> Call:
    """A recorded call with its own copies of the callable and inputs (non-leaf inputs stay
    non-leaves, which a plain deepcopy of the record would refuse)."""
    fn, args, kwargs = clone_tree((call.fn, call.args, call.kwargs), memo)
    return dataclasses.replace(call, fn=fn, args=args, kwargs=kwargs)


__all__ = ["Divergence", "replay"]
