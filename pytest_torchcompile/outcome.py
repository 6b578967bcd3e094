"""What one check came to, as one value: the checker's waist.

`Checker.outcome` returns a `CheckOutcome` and raises nothing a check can end in; the fixture
raises the outcome's `error` (as torch's `assert_close` turns its comparison's outcome into the
user's exception), and the interceptor matches on `happened` instead of on exception families.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import torch

from pytest_torchcompile.counting.costs import Costs
from pytest_torchcompile.counting.records import (
    CompileCounts,
    CostRecord,
    FallbackRecord,
    LeafError,
)
from pytest_torchcompile.errors import (
    CompileParityFailure,
    ParityError,
    RecompileLimitExceeded,
    UncheckableCallError,
)
from pytest_torchcompile.judging.parity import ParityReport
from pytest_torchcompile.judging.verdicts import Verdict
from pytest_torchcompile.running.trees import tensors
from pytest_torchcompile.settings import Settings

NO_COMPILER = "no compiler"
"""An intercepted check's kind where the backend compiles nothing (`none`), beside CHECK_KINDS."""


class Happened(enum.Enum):
    """How a check ended."""

    PASSED = "passed"
    DIVERGED = "diverged"  # ParityError: the sides disagree
    REFUSED = "compile refusal"  # a budget verdict (fullgraph) or an exporter's refusal
    RECOMPILE_LIMIT = "recompile limit"  # Dynamo would run the call eagerly there
    UNCHECKABLE = "uncheckable"  # meta tensors, an iterator output: no values to compare
    RAISED = "raised"  # not a verdict: eager's own exception, an uncopyable input...

    @classmethod
    def of(cls, error: Exception) -> Happened:
        """The ending an exception raised inside the check stands for."""
        if isinstance(error, RecompileLimitExceeded):
            return cls.RECOMPILE_LIMIT
        if isinstance(error, ParityError):
            return cls.DIVERGED
        if isinstance(error, CompileParityFailure):
            return cls.REFUSED
        if isinstance(error, UncheckableCallError):
            return cls.UNCHECKABLE
        return cls.RAISED


@dataclass(frozen=True)
class CheckOutcome:
    """One check: how it ended, the exception the fixture raises for it (None where it passed),
    both sides' outputs and this call's error per leaf (where it passed), the latest leaf report
    (this check's once it got to comparing), the graphs compiled since the check began (each:
    dynamic shapes or not) and the eager fallbacks it added (counted where it passed)."""

    happened: Happened
    error: Exception | None = None
    eager: Any = None
    compiled: Any = None
    errors: dict[str, LeafError] = field(default_factory=dict)
    report: ParityReport | None = None
    graphs: tuple[bool, ...] = ()
    fallbacks: tuple[FallbackRecord, ...] = ()

    @property
    def failing_leaves(self) -> list[str]:
        """The leaves the report failed, where it did."""
        report = self.report
        return [leaf.leaf for leaf in report.failures] if report and not report.ok else []

    @property
    def uncompared(self) -> str:
        """Why nothing of the call's output was compared, or "" when some of it was."""
        if self.report is None:
            return ""
        output = [leaf for leaf in self.report.leaves if leaf.leaf.startswith("output")]
        if output and all(not leaf.judged for leaf in output):
            return output[0].note.split(" (", 1)[0]  # "output: cannot compare a <type>"
        return ""

    @property
    def how_checked(self) -> tuple[str, str]:
        """("checked", "") or, where some leaves could not be judged, ("checked partly", which
        and why, in short)."""
        unjudged = self.report.having(Verdict.NOT_JUDGED) if self.report is not None else []
        if not unjudged:
            return "checked", ""
        rules = sorted({leaf.rule for leaf in unjudged})
        names = ", ".join(leaf.leaf for leaf in unjudged[:3])
        more = f" and {len(unjudged) - 3} more" if len(unjudged) > 3 else ""
        return "checked partly", f"not judged ({', '.join(rules)}): {names}{more}"


@dataclass(frozen=True)
class CheckSummary:
    """What a test's checks came to, read-only, for its record (records.ParityRecord): the
    settings, the devices seen, the calls, the counts, the largest error per leaf (by leaf), the
    wall time, the notes, the costs, the leaves excused and not judged by rule (sorted), and the
    Hypothesis examples rejected (with the first such error)."""

    settings: Settings
    devices_seen: tuple[str, ...]
    calls: int
    counts: CompileCounts
    largest_errors: tuple[LeafError, ...]
    wall_time_s: float
    notes: tuple[str, ...]
    costs: CostRecord
    excused: Mapping[str, int]
    not_judged: Mapping[str, int]
    rejected: int
    first_rejection: str


class Totals:
    """What a test's checks add up to, for its record: the calls, the devices seen, the largest
    error per leaf, the leaves excused and not judged by rule, the wall time, the notes, and the
    Hypothesis examples rejected because eager raised on them."""

    def __init__(self, notes: list[str]) -> None:
        self.notes = notes  # what the report should say of the check
        self.calls = 0
        self.rejected = 0  # Hypothesis examples rejected because eager raised on them
        self.first_rejection = ""  # the first such error, "Type: message"
        self.devices_seen: list[str] = []
        self.largest_errors: dict[str, LeafError] = {}
        self.excused: dict[str, int] = {}  # rule -> leaves it excused, over every call
        self.not_judged: dict[str, int] = {}  # why (control, uncomparable) -> leaves
        self.wall_time_s = 0.0

    def note_devices(
        self, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: Mapping[str, Any]
    ) -> None:
        """The device of the call's first tensor (an input, else the module's first parameter)."""
        inputs = tensors((args, dict(kwargs)))
        if isinstance(fn, torch.nn.Module):
            first = next(fn.parameters(), None)  # not list(...): that walks every parameter
            inputs += [first] if first is not None else []
        for tensor in inputs[:1]:
            if str(tensor.device) not in self.devices_seen:
                self.devices_seen.append(str(tensor.device))

    def summarize(self, settings: Settings, counts: CompileCounts, costs: Costs) -> CheckSummary:
        """These totals, read-only, with the test's settings, counts and costs."""
        return CheckSummary(
            settings=settings,
            devices_seen=tuple(self.devices_seen),
            calls=self.calls,
            counts=counts,
            largest_errors=tuple(sorted(self.largest_errors.values(), key=lambda e: e["leaf"])),
            wall_time_s=self.wall_time_s,
            notes=tuple(self.notes),
            costs=costs.record(counts["compile_time_s"]),
            excused=dict(sorted(self.excused.items())),
            not_judged=dict(sorted(self.not_judged.items())),
            rejected=self.rejected,
            first_rejection=self.first_rejection,
        )

    def add_report(self, report: ParityReport) -> dict[str, LeafError]:
        """Count one call's leaf verdicts in; its error per leaf."""
        errors = _leaf_errors(report, self.largest_errors)
        self.notes += [note for note in report.notes if note not in self.notes]
        _tally(report, Verdict.EXCUSED, self.excused)
        _tally(report, Verdict.NOT_JUDGED, self.not_judged)
        return errors


def _tally(report: ParityReport, verdict: Verdict, counts: dict[str, int]) -> None:
    """Add the report's leaves of `verdict` to `counts`, by the rule that reached it."""
    for leaf in report.having(verdict):
        counts[leaf.rule] = counts.get(leaf.rule, 0) + 1


def _leaf_errors(report: ParityReport, largest: dict[str, LeafError]) -> dict[str, LeafError]:
    """This call's error per leaf; `largest` (the test's, over every call) keeps the greatest."""
    errors: dict[str, LeafError] = {}
    for leaf in report.leaves:
        error = LeafError(leaf=leaf.leaf, max_abs=leaf.max_abs, max_rel=leaf.max_rel)
        errors[leaf.leaf] = error
        seen = largest.get(leaf.leaf)
        if seen is None or (error["max_abs"], error["max_rel"]) > (
            seen["max_abs"],
            seen["max_rel"],
        ):
            largest[leaf.leaf] = error
    return errors


__all__ = ["NO_COMPILER", "CheckOutcome", "CheckSummary", "Happened", "Totals"]
