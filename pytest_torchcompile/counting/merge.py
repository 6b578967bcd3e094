"""The JSON reports of a sharded run (each shard's ``--compile-report``), read back and joined.

A report holds what its session gathered: every report of every parity test, each intercepted
test's coverage record and what the session collected. Read back into those records and joined,
the shards give the records one session of the whole suite would have gathered, so the budget
update, the summary and the merged report are made by the same functions a single run uses.
Shards that disagree (different software, a different suite, one test with two results) are an
error naming both reports, never a silent pick. Pure: no torch, no pytest.
"""

from __future__ import annotations

import glob
import json
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from pytest_torchcompile.counting.budgets import (
    Budget,
    BudgetVerdict,
    Collected,
    Scope,
    check,
    joined,
)
from pytest_torchcompile.counting.records import CompileCounts, CoverageRecord, ParityRecord
from pytest_torchcompile.counting.report import OPTIONAL_KEYS, REPORT_FORMAT

# Keys of a test entry that are its record's, as they are: always, and when present.
_REQUIRED = ("device", "backend", "mode", "dynamic", "verdict", "calls", "wall_time_s")
_OPTIONAL = (*OPTIONAL_KEYS, "module_calls")
_NON_FINITE = {"NaN": float("nan"), "Infinity": float("inf"), "-Infinity": float("-inf")}


class ReportError(ValueError):
    """A report cannot be read or merged; the message names the file (both, for a conflict)."""


@dataclass(frozen=True)
class Session:
    """What one session gathered, read back from its report (`path`); or shards, merged."""

    path: str
    versions: dict[str, str]
    records: list[ParityRecord]  # every report of every test, a rerun test's earlier ones first
    coverage: list[CoverageRecord]
    collected: Collected
    verdicts: dict[str, BudgetVerdict] | None  # None when the session checked no budget file


def report_paths(patterns: Iterable[str]) -> list[Path]:
    """The files the glob patterns name (``**`` included), sorted, each once."""
    found: set[Path] = set()
    for pattern in patterns:
        matches = glob.glob(pattern, recursive=True)
        if not matches:
            raise ReportError(f"no report matches {pattern}")
        found.update(Path(match) for match in matches)
    return sorted(found)


def read(path: str | os.PathLike[str]) -> Session:
    """One session's report, read back into its records."""
    where = str(path)
    try:
        document = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise ReportError(f"{where}: cannot read the report: {exc}") from exc
    except json.JSONDecodeError as exc:
        raise ReportError(f"{where}:{exc.lineno}:{exc.colno}: not valid JSON: {exc.msg}") from exc
    if not isinstance(document, dict) or document.get("format") != REPORT_FORMAT:
        raise ReportError(f"{where}: not a --compile-report of format {REPORT_FORMAT}")
    if "collection" not in document:
        raise ReportError(
            f"{where}: the report does not say what its session collected; write it with this "
            "pytest-torchcompile's --compile-report"
        )
    try:
        return _session(where, document)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise ReportError(f"{where}: not a --compile-report this version reads: {exc!r}") from exc


def _session(where: str, document: dict[str, Any]) -> Session:
    tests: dict[str, Any] = document["tests"]
    records = [
        _record(node, run)
        for node, entry in tests.items()
        for run in (*entry.get("earlier_runs", ()), entry)
    ]
    verdicts = {
        node: check(
            Budget(**entry["budget"]["recorded"]) if entry["budget"]["recorded"] else None,
            _counts(entry),
        )
        for node, entry in tests.items()
        if entry.get("budget")
    }
    checked = any("budget" in entry for entry in tests.values())
    collection = document["collection"]
    return Session(
        path=where,
        versions=dict(document["versions"]),
        records=records,
        coverage=list(document.get("coverage", {}).get("tests", [])),
        collected=Collected(
            suite=tuple(collection["suite"]),
            scopes=tuple(
                Scope(tuple(s["paths"]), tuple(s["ignored"])) for s in collection["scopes"]
            ),
            existing=frozenset(collection["collected"]),
            uncollected=frozenset(collection["uncollected"]),
        ),
        verdicts=verdicts if checked else None,
    )


def _record(nodeid: str, entry: dict[str, Any]) -> ParityRecord:
    """A test entry of the report back as the record it was written from (report._test_entry)."""
    record = {key: entry[key] for key in (*_REQUIRED, *(k for k in _OPTIONAL if k in entry))}
    errors = [
        {"leaf": e["leaf"], "max_abs": _number(e["max_abs"]), "max_rel": _number(e["max_rel"])}
        for e in entry["largest_errors"]
    ]
    return cast(
        ParityRecord,
        {**record, "nodeid": nodeid, "counts": _counts(entry), "largest_errors": errors},
    )


def _counts(entry: dict[str, Any]) -> CompileCounts:
    return cast(CompileCounts, {key: entry[key] for key in CompileCounts.__annotations__})


def _number(value: float | str) -> float:
    return _NON_FINITE[value] if isinstance(value, str) else value


# --- joining ---


def merge(shards: Sequence[Session]) -> Session:
    """The shards as one session: their records, coverage and collections joined.

    A test reported by two shards with the same results is kept as a rerun would be; with
    different results (device, outcome, counts or budget verdict), or shards that ran different
    versions of Python, torch, Triton or pytest-torchcompile or collected different suites, it
    is an error naming both reports.
    """
    if not shards:
        raise ReportError("no reports to merge")
    _same_software(shards)
    for shard in shards[1:]:
        if shard.collected.suite != shards[0].collected.suite:
            raise ReportError(
                f"{shards[0].path} and {shard.path} collected different suites "
                f"({', '.join(shards[0].collected.suite)} and {', '.join(shard.collected.suite)}): "
                "merge the shards of one suite"
            )
    _no_conflicting_tests(shards)
    checked = [shard.verdicts for shard in shards if shard.verdicts is not None]
    return Session(
        path=", ".join(shard.path for shard in shards),
        versions={k: v for shard in shards for k, v in shard.versions.items()},
        records=[record for shard in shards for record in shard.records],
        coverage=[record for shard in shards for record in shard.coverage],
        collected=joined(shard.collected for shard in shards),
        verdicts={n: v for verdicts in checked for n, v in verdicts.items()} if checked else None,
    )


def _same_software(shards: Sequence[Session]) -> None:
    """Every version two reports both name is the same (Triton may be on a GPU shard only)."""
    first: dict[str, Session] = {}
    for shard in shards:
        for key, version in sorted(shard.versions.items()):
            other = first.setdefault(key, shard)
            if other.versions[key] != version:
                raise ReportError(
                    f"{other.path} and {shard.path} ran different {key} versions "
                    f"({other.versions[key]} and {version}): counts depend on them, so merge "
                    "the reports of shards that ran the same software"
                )


def _no_conflicting_tests(shards: Sequence[Session]) -> None:
    seen: dict[str, tuple[Session, str]] = {}
    for shard in shards:
        for node, result in _results(shard).items():
            other, known = seen.setdefault(node, (shard, result))
            if known != result:
                raise ReportError(
                    f"{node} ran in two shards with different results: {known} in "
                    f"{other.path}, {result} in {shard.path}; a test belongs to one shard"
                )


def _results(shard: Session) -> dict[str, str]:
    """Node id -> what a budget update and check take from its last report, as text."""
    results = {}
    for record in shard.records:
        counts = ", ".join(f"{k} {n}" for k, n in Budget.of(record["counts"]).as_dict().items())
        results[record["nodeid"]] = f"{record['verdict']} on {record['device']} ({counts})"
    for node, verdict in (shard.verdicts or {}).items():
        recorded = verdict.budget.as_dict() if verdict.budget else None
        results[node] += f", budget {verdict.status} against {recorded}"
    return results
