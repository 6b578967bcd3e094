"""--compile-parity=all: which module classes the suite's checks reached, by class and package.

Pure functions from the tests' coverage records (records.CoverageRecord) to the summary's table and
the JSON report's `coverage` object. A class is

* diverged: a call of it diverged;
* checked: a call of it was cross-checked;
* checked partly: its calls were cross-checked, but some leaves of each could not be judged (the
  control run differed from eager there too, or a value the checker cannot compare);
* inside checked: no call of its own was checked, but an instance was part of a checked call;
* skipped: it was called, and every call was skipped (the reasons say why);
* never reached: it was constructed, and no check called it or held it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from pytest_torchcompile.counting.records import CoverageRecord

STATUSES = ("diverged", "checked", "checked partly", "inside checked", "skipped", "never reached")
_MAX_LISTED = 20


@dataclass
class ClassCoverage:
    """What the suite's checks did with one module class."""

    name: str
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
        return "skipped" if self.skipped else "never reached"

    @property
    def package(self) -> str:
        return self.name.split(".", 1)[0]


def classes(records: Iterable[CoverageRecord]) -> dict[str, ClassCoverage]:
    """Every class the records mention, with its calls and tests summed over the suite."""
    found: dict[str, ClassCoverage] = {}

    def of(name: str) -> ClassCoverage:
        return found.setdefault(name, ClassCoverage(name))

    for record in records:
        for name in record["constructed"]:
            of(name).tests.add(record["nodeid"])
        for name in record["inside_checked"]:
            of(name).inside_checked = True
        for call in record["calls"]:
            entry = of(call["module"])
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


def packages(found: dict[str, ClassCoverage]) -> dict[str, dict[str, int]]:
    """Per top-level package, how many of its classes have each status."""
    table: dict[str, dict[str, int]] = {}
    for entry in found.values():
        row = table.setdefault(entry.package, dict.fromkeys(STATUSES, 0))
        row[entry.status] += 1
    return dict(sorted(table.items()))


def summary_lines(records: Iterable[CoverageRecord]) -> list[str]:
    """The summary's class coverage: a table by package, then the classes not checked."""
    found = classes(records)
    if not found:
        return []
    table = packages(found)
    width = max(len("package"), *(len(name) for name in table))
    heads = "  ".join(f"{status:>{len(status)}}" for status in STATUSES)
    lines = [
        f"module classes constructed or called: {len(found)} in {len(table)} package(s)",
        f"  {'package':<{width}}  {heads}",
    ]
    for name, row in table.items():
        cells = "  ".join(f"{row[status]:>{len(status)}}" for status in STATUSES)
        lines.append(f"  {name:<{width}}  {cells}")
    for name, row in table.items():
        if row["checked"] + row["checked partly"] + row["diverged"] + row["inside checked"] == 0:
            lines.append(
                f"{name}: none of its {sum(row.values())} module classes was cross-checked"
            )
    for status in ("checked partly", "skipped", "never reached"):
        listed = sorted((e for e in found.values() if e.status == status), key=lambda e: e.name)
        if listed:
            lines.append(f"{status} classes ({len(listed)}):")
            lines += [f"  {_why(entry)}" for entry in listed[:_MAX_LISTED]]
            if len(listed) > _MAX_LISTED:
                lines.append(f"  ... and {len(listed) - _MAX_LISTED} more classes")
    return lines


def json_coverage(records: Iterable[CoverageRecord]) -> dict[str, Any]:
    """The JSON report's `coverage`: every class with its status and calls, and the packages."""
    found = classes(records)
    return {
        "classes": {
            name: {
                "status": entry.status,
                "checked_calls": entry.checked,
                "partly_calls": entry.partly,
                "diverged_calls": entry.diverged,
                "skipped_calls": dict(sorted(entry.skipped.items())),
                "tests": len(entry.tests),
            }
            for name, entry in sorted(found.items())
        },
        "packages": packages(found),
    }


def _why(entry: ClassCoverage) -> str:
    tests = f"{len(entry.tests)} test(s)"
    if entry.status == "never reached":
        return f"{entry.name} (constructed in {tests}; no check called it or held it)"
    if entry.status == "checked partly":
        return f"{entry.name}: {entry.partly} call(s) with leaves the checker could not judge"
    reasons = sorted(entry.skipped.items(), key=lambda item: (-item[1], item[0]))
    return f"{entry.name}: " + "; ".join(f"{n} call(s) {reason}" for reason, n in reasons)


__all__ = ["ClassCoverage", "classes", "json_coverage", "packages", "summary_lines"]
