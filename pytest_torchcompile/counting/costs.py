"""Where a test's checking time goes, by part, and the compiles the checker adds to the user's.

A suite that takes 18x its plain time under the plugin should say why in the same output:
compiling (which the user's own torch.compile pays too), running each side, comparing, the
re-runs the rules and the control ask for, triage after a failure, and compiles only the
checker makes (a second compile as the user compiles it, a fresh compile cache after the
recompile limit, a retry in a fresh cache). Plain data and pure functions: no torch, so the
report and the summary stay free of it.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from pytest_torchcompile.counting.records import CostRecord

PARTS = (
    "compile",
    "compiled side",
    "eager side",
    "comparing",
    "re-runs",
    "triage",
    "intercepting",
    "skipped calls",
)
"""The parts of a test's checking time, in the order the report lists them. "compiled side" is
its run without the compile time in it; "re-runs" are the float64 reference, eager again, the
rounding-noise runs and the control. In zero-change mode, "intercepting" is what the
interceptor does around the checks it makes (selecting, snapshotting the call and the world
around it, putting the world back), and "skipped calls" all it spent on calls it then did not
check (their walks and copies, and any part of a check they began), beyond the test's own call."""

ZERO_CHANGE_PARTS = ("intercepting", "skipped calls")
"""Parts only zero-change mode spends on: a line shows them where any time was spent (an
intercepted test), so shards merged print what one run prints."""

AS_USER = "compiled again as you compile it, for random draws (fallback_random off)"
FRESH_CACHE = "a fresh compile cache after the recompile limit"
FAULT_RETRY = "a retry in a fresh Inductor cache after a failure inside the backend compiler"

CHECK_KINDS = ("compiled static", "compiled dynamic", "reused a compile")
"""How an intercepted check's compiled side got its code: graphs compiled for it (with static
or dynamic shapes), or none, Dynamo's cache entries of an earlier check serving it."""


@dataclass
class Costs:
    """One test's costs so far: seconds by part, compiles the checker added by reason."""

    seconds: dict[str, float] = field(default_factory=lambda: dict.fromkeys(PARTS, 0.0))
    added: dict[str, int] = field(default_factory=dict)
    checks: dict[str, int] = field(default_factory=dict)  # CHECK_KINDS -> intercepted checks
    uncounted_compile_s: float = 0.0  # compiling the accountant does not count (see below)

    @contextmanager
    def timing(self, part: str) -> Iterator[None]:
        """Add the wall time of the block to `part`."""
        started = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[part] += time.perf_counter() - started

    def check_compiled(self, graphs: list[bool]) -> str:
        """Count one intercepted check by the graphs compiled for it (each: dynamic or not);
        returns its kind, one of CHECK_KINDS."""
        kind = CHECK_KINDS[2] if not graphs else CHECK_KINDS[1] if any(graphs) else CHECK_KINDS[0]
        self.checks[kind] = self.checks.get(kind, 0) + 1
        return kind

    def compiled(self, reason: str) -> None:
        """The checker compiled (or will compile) once more for `reason`, beyond the user's."""
        self.added[reason] = self.added.get(reason, 0) + 1

    def compiled_uncounted(self, seconds: float) -> None:
        """`seconds` of compiling inside the compiled side that the accountant does not count
        (the compile as the user compiles it, a run retried in a fresh cache): the breakdown
        puts them under compile, not under the compiled side's run."""
        self.uncounted_compile_s += seconds

    def record(self, compile_time_s: float, triage_time_s: float = 0.0) -> CostRecord:
        """The record of these costs, with the compile time the accountant counted (and the
        compiling it does not count) taken out of the compiled side's, and the triage's time."""
        seconds = dict(self.seconds)
        compiling = compile_time_s + self.uncounted_compile_s
        seconds["compile"] = compiling
        seconds["compiled side"] = max(seconds["compiled side"] - compiling, 0.0)
        seconds["triage"] = triage_time_s
        record = CostRecord(seconds=seconds, added_compiles=dict(sorted(self.added.items())))
        if self.checks:
            record["checks"] = dict(self.checks)
        return record


def line(record: CostRecord) -> str:
    """`time: compile 1.20s, compiled side 0.05s, ...; compiles the checker added: ...`."""
    seconds = record["seconds"]
    shown = [p for p in PARTS if p not in ZERO_CHANGE_PARTS or seconds.get(p, 0.0) > 0.0]
    parts = ", ".join(f"{part} {seconds.get(part, 0.0):.2f}s" for part in shown)
    added = record["added_compiles"]
    extra = "; ".join(f"{n} {reason}" for reason, n in added.items()) if added else "none"
    checks = record.get("checks", {})
    kinds = ", ".join(f"{checks[kind]} {kind}" for kind in CHECK_KINDS if checks.get(kind))
    return f"time: {parts}; compiles the checker added: {extra}" + (
        f"; intercepted checks: {kinds}" if kinds else ""
    )


def totals(records: list[CostRecord]) -> CostRecord:
    """The sum of several tests' costs."""
    seconds = dict.fromkeys(PARTS, 0.0)
    added: dict[str, int] = {}
    checks: dict[str, int] = {}
    for record in records:
        for part in PARTS:
            seconds[part] += record["seconds"].get(part, 0.0)
        for reason, n in record["added_compiles"].items():
            added[reason] = added.get(reason, 0) + n
        for kind, n in record.get("checks", {}).items():
            checks[kind] = checks.get(kind, 0) + n
    total = CostRecord(seconds=seconds, added_compiles=dict(sorted(added.items())))
    if checks:
        total["checks"] = checks
    return total


__all__ = [
    "AS_USER",
    "CHECK_KINDS",
    "FAULT_RETRY",
    "FRESH_CACHE",
    "PARTS",
    "ZERO_CHANGE_PARTS",
    "Costs",
    "line",
    "totals",
]
