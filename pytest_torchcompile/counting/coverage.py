"""--compile-parity=all: which module classes and functions the suite's checks reached, by package.

Pure functions from the tests' coverage records (records.CoverageRecord) to the summary's tables and
the JSON report's `coverage` object. A class (or a function of --compile-parity-functions) is

* diverged: a call of it diverged;
* checked: a call of it was cross-checked;
* checked partly: its calls were cross-checked, but some leaves of each could not be judged (the
  control run differed from eager there too, or a value the checker cannot compare);
* inside checked: no call of its own was checked, but an instance was part of a checked call;
* skipped: it was called, and every call was skipped (the reasons say why);
* never reached: it was constructed, and no check called it or held it.

A function is never called instead of never reached: wrapped, and no intercepted test called it;
or not wrapped: not a plain Python function (a builtin, an autograd `Function.apply`, a class).
The summary ends with how many intercepted tests had a call checked, how many only repeated calls
checked earlier in the session (same program and input signature), and how many reached no check.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from pytest_torchcompile.counting.records import ALREADY_CHECKED, CoverageRecord

STATUSES = ("diverged", "checked", "checked partly", "inside checked", "skipped", "never reached")
FUNCTION_STATUSES = (*STATUSES[:-1], "never called", "not wrapped")
_REACHED = ("checked", "checked partly", "diverged")  # outcomes of a call that reached a check
_MAX_LISTED = 20


@dataclass
class ClassCoverage:
    """What the suite's checks did with one module class (or function)."""

    name: str
    function: bool = False
    unwrapped: str = ""  # a function's: why it is not wrapped
    checked: int = 0  # calls
    partly: int = 0  # calls checked with leaves not judged
    diverged: int = 0  # calls
    skipped: dict[str, int] = field(default_factory=dict)  # reason -> calls
    inside_checked: bool = False
    tests: set[str] = field(default_factory=set)  # tests that constructed or called it

    @property
    def status(self) -> str:
        if self.diverged:
            return "diverged"
        if self.checked:
            return "checked"
        if self.partly:
            return "checked partly"
        if self.inside_checked:
            return "inside checked"
        if self.skipped:
            return "skipped"
        if self.function:
            return "not wrapped" if self.unwrapped else "never called"
        return "never reached"

    @property
    def package(self) -> str:
        return self.name.split(".", 1)[0]


def classes(records: Iterable[CoverageRecord]) -> dict[str, ClassCoverage]:
    """Every class the records mention, with its calls and tests summed over the suite."""
    return {name: entry for name, entry in _entries(records).items() if not entry.function}


def functions(records: Iterable[CoverageRecord]) -> dict[str, ClassCoverage]:
    """Every function the records mention (wrapped, called or not wrapped), likewise."""
    return {name: entry for name, entry in _entries(records).items() if entry.function}


def _entries(records: Iterable[CoverageRecord]) -> dict[str, ClassCoverage]:
    found: dict[str, ClassCoverage] = {}

    def of(name: str, function: bool = False) -> ClassCoverage:
        return found.setdefault(name, ClassCoverage(name, function))

    for record in records:
        for name in record["constructed"]:
            of(name).tests.add(record["nodeid"])
        for name in record["inside_checked"]:
            of(name).inside_checked = True
        for name in record.get("functions", []):
            of(name, function=True)
        for name, why in record.get("unwrapped", {}).items():
            of(name, function=True).unwrapped = why
        for name in record.get("inside_checked_functions", []):
            of(name, function=True).inside_checked = True
        for call in record["calls"]:
            entry = of(call["module"], function=call.get("kind") == "function")
            entry.tests.add(record["nodeid"])
            if call["outcome"] == "skipped":
                entry.skipped[call["reason"]] = entry.skipped.get(call["reason"], 0) + call["calls"]
            elif call["outcome"] == "diverged":
                entry.diverged += call["calls"]
            elif call["outcome"] == "checked partly":
                entry.partly += call["calls"]
            else:
                entry.checked += call["calls"]
    return found


def tests_reached(records: Iterable[CoverageRecord]) -> tuple[int, int, int]:
    """Of the intercepted tests: those with a call checked (or diverged), those whose calls
    only repeated a signature checked earlier in the session, and those that reached no check."""
    checked = repeated = none = 0
    for record in records:
        calls = record["calls"]
        if any(c["outcome"] in _REACHED for c in calls):
            checked += 1
        elif any(c["reason"].startswith(ALREADY_CHECKED) for c in calls):
            repeated += 1
        else:
            none += 1
    return checked, repeated, none


def packages(
    found: dict[str, ClassCoverage], statuses: tuple[str, ...] = STATUSES
) -> dict[str, dict[str, int]]:
    """Per top-level package, how many of its classes (or functions) have each status."""
    table: dict[str, dict[str, int]] = {}
    for entry in found.values():
        row = table.setdefault(entry.package, dict.fromkeys(statuses, 0))
        row[entry.status] += 1
    return dict(sorted(table.items()))


def summary_lines(records: Iterable[CoverageRecord]) -> list[str]:
    """The summary's coverage: a table by package of the classes, then the classes not checked;
    the same for functions; then the tests that reached no check."""
    records = list(records)
    if not records:
        return []
    lines = _section(classes(records), "module classes", "constructed or called", STATUSES)
    lines += _section(functions(records), "functions", "wrapped or called", FUNCTION_STATUSES)
    checked, repeated, none = tests_reached(records)
    if lines:
        lines.append(
            f"intercepted tests: {len(records)}: {checked} with a call checked, {repeated} whose "
            f"calls were all checked earlier in the session, {none} reached no check at all"
        )
    return lines


def _section(
    found: dict[str, ClassCoverage], what: str, seen: str, statuses: tuple[str, ...]
) -> list[str]:
    if not found:
        return []
    table = packages(found, statuses)
    width = max(len("package"), *(len(name) for name in table))
    heads = "  ".join(f"{status:>{len(status)}}" for status in statuses)
    lines = [
        f"{what} {seen}: {len(found)} in {len(table)} package(s)",
        f"  {'package':<{width}}  {heads}",
    ]
    for name, row in table.items():
        cells = "  ".join(f"{row[status]:>{len(status)}}" for status in statuses)
        lines.append(f"  {name:<{width}}  {cells}")
    for name, row in table.items():
        if sum(row[status] for status in (*_REACHED, "inside checked")) == 0:
            lines.append(f"{name}: none of its {sum(row.values())} {what} was cross-checked")
    noun = what.split()[-1]
    for status in (s for s in statuses if s not in ("diverged", "checked", "inside checked")):
        listed = sorted((e for e in found.values() if e.status == status), key=lambda e: e.name)
        if listed:
            lines.append(f"{status} {noun} ({len(listed)}):")
            lines += [f"  {_why(entry)}" for entry in listed[:_MAX_LISTED]]
            if len(listed) > _MAX_LISTED:
                lines.append(f"  ... and {len(listed) - _MAX_LISTED} more {noun}")
    return lines


def json_coverage(records: Iterable[CoverageRecord]) -> dict[str, Any]:
    """The JSON report's `coverage`: every class and function with its status and calls, the
    packages, and how many intercepted tests reached a check (tests_reached)."""
    records = list(records)
    checked, repeated, none = tests_reached(records)
    document = {
        "classes": _json_rows(classes(records)),
        "packages": packages(classes(records)),
        "tests_reached": {"checked": checked, "checked earlier": repeated, "none": none},
    }
    found = functions(records)
    if found:
        document["functions"] = _json_rows(found)
        document["function_packages"] = packages(found, FUNCTION_STATUSES)
    return document


def _json_rows(found: dict[str, ClassCoverage]) -> dict[str, Any]:
    rows: dict[str, Any] = {}
    for name, entry in sorted(found.items()):
        rows[name] = {
            "status": entry.status,
            "checked_calls": entry.checked,
            "partly_calls": entry.partly,
            "diverged_calls": entry.diverged,
            "skipped_calls": dict(sorted(entry.skipped.items())),
            "tests": len(entry.tests),
        }
        if entry.unwrapped:
            rows[name]["not_wrapped"] = entry.unwrapped
    return rows


def _why(entry: ClassCoverage) -> str:
    tests = f"{len(entry.tests)} test(s)"
    if entry.status == "never reached":
        return f"{entry.name} (constructed in {tests}; no check called it or held it)"
    if entry.status == "never called":
        return f"{entry.name} (wrapped; no check called it)"
    if entry.status == "not wrapped":
        return f"{entry.name}: {entry.unwrapped}"
    if entry.status == "checked partly":
        return f"{entry.name}: {entry.partly} call(s) with leaves the checker could not judge"
    reasons = sorted(entry.skipped.items(), key=lambda item: (-item[1], item[0]))
    return f"{entry.name}: " + "; ".join(f"{n} call(s) {reason}" for reason, n in reasons)


__all__ = [
    "ClassCoverage",
    "classes",
    "functions",
    "json_coverage",
    "packages",
    "summary_lines",
    "tests_reached",
]
