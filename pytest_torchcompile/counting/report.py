"""Pure functions from per-test records to text and JSON: report sections, summary, JSON, JUnit.

No pytest and no torch: under pytest-xdist these run on the controller, which runs no test and
should not pay for importing torch. The JSON report validates against ``report.schema.json``,
shipped at the top of the package (``pytest_torchcompile/report.schema.json``).
"""

from __future__ import annotations

import json
import math
import os
import platform
from collections.abc import Iterable, Mapping
from importlib import metadata
from pathlib import Path
from typing import Any

from pytest_torchcompile._version import __version__
from pytest_torchcompile.counting import costs, coverage
from pytest_torchcompile.counting.budgets import BudgetVerdict, Collected
from pytest_torchcompile.counting.records import (
    CompileCounts,
    CoverageRecord,
    LeafError,
    ModuleCallRecord,
    ParityRecord,
    break_line,
    fallback_line,
    graph_line,
    recompile_line,
)

REPORT_FORMAT = 1
SCHEMA_FILE = "report.schema.json"  # at the package's top; the JSON report validates against it

_TRIAGE_KEYS = ("stage", "repro", "artifacts", "triage_time_s")  # set after a parity failure
OPTIONAL_KEYS = (*_TRIAGE_KEYS, "rejected", "first_rejection", "excused", "not_judged", "costs")
"""A record's keys a test's JSON entry carries as they are, where the record has them."""
_MAX_LISTED = 20  # rows of one summary list before "... and N more"
_TRITON_DISTRIBUTIONS = ("triton", "pytorch-triton", "pytorch-triton-rocm", "pytorch-triton-xpu")


def _numbered(title: str, lines: list[str]) -> list[str]:
    if not lines:
        return [f"{title}: none"]
    return [f"{title} ({len(lines)}):", *(f"  {i}. {line}" for i, line in enumerate(lines, 1))]


# --- the per-test report section ---


def section_text(record: ParityRecord) -> str:
    """The "torch.compile" section of one test's report: what was compiled, and what went wrong."""
    counts = record["counts"]
    lines = [
        f"{record['verdict']} on {record['device']} after {record['calls']} checker call(s):"
        f" backend {record['backend']}, mode {record['mode'] or 'default'},"
        f" dynamic {record['dynamic']}",
        f"compile time {counts['compile_time_s']:.2f}s, wall time {record['wall_time_s']:.2f}s",
        *_numbered("graphs", [graph_line(g) for g in counts["graphs"]]),
        *_numbered("graph breaks", [break_line(b) for b in counts["graph_breaks"]]),
        *_numbered("recompiles", [recompile_line(r) for r in counts["recompiles"]]),
        *_numbered("fallbacks", [fallback_line(f) for f in counts["fallbacks"]]),
    ]
    if counts["cudagraph_rerecords"]:
        lines += _numbered("cudagraph re-records", counts["cudagraph_rerecords"])
    if counts["cudagraph_skips"]:
        lines += _numbered("cudagraphs skipped", counts["cudagraph_skips"])
    if "costs" in record:
        lines.append(costs.line(record["costs"]))
    lines += _verdict_lines(record)
    if record.get("notes"):
        lines += _numbered("notes", record.get("notes", []))
    if record.get("rejected"):
        lines.append(_rejected_line(record))
    if "module_calls" in record:
        lines += _numbered("intercepted module calls", _call_lines(record["module_calls"]))
    lines += _error_table(record["largest_errors"])
    return "\n".join(lines)


def _by_rule(counts: Mapping[str, int]) -> str:
    return ", ".join(f"{rule} {n}" for rule, n in sorted(counts.items()))


def _verdict_lines(record: ParityRecord) -> list[str]:
    """The leaves outside the plain tolerance a named rule excused, and those the checker could
    not judge, by rule: the notes below say which and why."""
    lines = []
    if record.get("excused"):
        lines.append(f"excused leaves, by rule: {_by_rule(record.get('excused', {}))}")
    if record.get("not_judged"):
        lines.append(
            f"checked partly: leaves not judged, by why: {_by_rule(record.get('not_judged', {}))}"
        )
    return lines


def _error_table(errors: list[LeafError]) -> list[str]:
    if not errors:
        return []
    ranked = sorted(errors, key=lambda e: (-_rank(e["max_rel"]), -_rank(e["max_abs"]), e["leaf"]))
    width = max(len(e["leaf"]) for e in ranked[:_MAX_LISTED])
    lines = ["largest errors (compiled vs eager, worst first):"]
    lines += [
        f"  {e['leaf']:<{width}}  max_abs {e['max_abs']:.3g}  max_rel {e['max_rel']:.3g}"
        for e in ranked[:_MAX_LISTED]
    ]
    return lines + _more(len(ranked), "leaves")


def _rank(value: float) -> float:
    # NaN means "NaN where eager has a number": worse than any finite error.
    return math.inf if math.isnan(value) else value


def _more(total: int, noun: str) -> list[str]:
    return [f"  ... and {total - _MAX_LISTED} more {noun}"] if total > _MAX_LISTED else []


def _call_lines(calls: list[ModuleCallRecord]) -> list[str]:
    return [
        f"{c['outcome']} {c['calls']} call(s) of {c['module']}"
        + (f": {c['reason']}" if c["reason"] else "")
        for c in calls
    ]


# --- the terminal summary ---


def intercept_summary_lines(records: Iterable[ParityRecord]) -> list[str]:
    """--compile-parity=all: module classes (and functions) checked, diverged (with tests),
    checked partly and skipped (why)."""
    intercepted = sorted((r for r in records if r.get("module_calls")), key=lambda r: r["nodeid"])
    if not intercepted:
        return []
    calls = [(r["nodeid"], c) for r in intercepted for c in r.get("module_calls", [])]
    total = {o: sum(c["calls"] for _, c in calls if c["outcome"] == o) for o in _OUTCOMES}
    kinds = " and ".join(sorted({c.get("kind", "module") for _, c in calls}, reverse=True))
    lines = [
        f"intercepted {kinds} calls in {len(intercepted)} test(s): {total['checked']} checked, "
        f"{total['diverged']} diverged, {total['checked partly']} checked partly, "
        f"{total['skipped']} skipped"
    ]
    for outcome in _OUTCOMES:
        groups: dict[str, tuple[int, set[str]]] = {}
        for node, c in calls:
            if c["outcome"] == outcome:
                key = c["module"] if outcome == "checked" else f"{c['module']}: {c['reason']}"
                n, tests = groups.get(key, (0, set()))
                groups[key] = (n + c["calls"], tests | {node})
        if not groups:
            continue
        lines.append(f"{outcome} ({len(groups)}):")
        ranked = sorted(groups.items(), key=lambda item: (-item[1][0], item[0]))
        for key, (n, tests) in ranked[:_MAX_LISTED]:
            where = next(iter(tests)) if len(tests) == 1 else f"{len(tests)} tests"
            lines.append(f"  {n} call(s) in {where}: {key}")
        lines += _more(len(ranked), "entries")
    return lines


_OUTCOMES = ("diverged", "checked", "checked partly", "skipped")


def summary_lines(
    records: Iterable[ParityRecord],
    budget_verdicts: Mapping[str, BudgetVerdict] | None = None,
    *,
    slowest: int = 5,
) -> list[str]:
    """The torch.compile terminal summary, in the order a CI reader needs it.

    Budget regressions and improvements, then tests with graph breaks, recompiles or fallbacks,
    then tests the budget file has no entry for, then the `slowest` compiles. `budget_verdicts`
    (node id -> verdict) is None when no budget file is in use. Empty when there is nothing to say.
    """
    ordered = sorted(records, key=lambda r: r["nodeid"])
    verdicts = sorted((budget_verdicts or {}).items())
    lines = [f"REGRESSED {n} - {v.changes()}" for n, v in verdicts if v.status == "regressed"]
    lines += [f"IMPROVED {n} - {v.message}" for n, v in verdicts if v.status == "improved"]
    lines += _triaged(ordered)
    lines += _partly(ordered) + _excuses(ordered)
    lines += _counts_table(ordered)
    lines += _rejections(ordered)
    unrecorded = [n for n, v in verdicts if v.status == "unrecorded"]
    if unrecorded:
        lines.append(
            f"unrecorded: {len(unrecorded)} test(s) without a budget entry"
            " (record them with --compile-budgets-update):"
        )
        lines += [f"  {n}" for n in unrecorded[:_MAX_LISTED]] + _more(len(unrecorded), "tests")
    lines += _slowest_compiles(ordered, slowest)
    lines += _time_spent(ordered, slowest)
    return lines


def session_summary(
    records: Iterable[ParityRecord],
    coverage_records: Iterable[CoverageRecord],
    budget_verdicts: Mapping[str, BudgetVerdict] | None = None,
    *,
    counts: bool = True,
) -> list[str]:
    """The torch.compile section of a session, or of merged shards, before the files it wrote:
    `summary_lines` (left out where `counts` is false), intercepted calls, class coverage."""
    records = list(records)
    lines = summary_lines(records, budget_verdicts) if counts else []
    return lines + intercept_summary_lines(records) + coverage.summary_lines(coverage_records)


def _triaged(records: list[ParityRecord]) -> list[str]:
    """Failing tests with the compiler stage that diverged and the repro to run."""
    triaged = [r for r in records if "artifacts" in r]
    if not triaged:
        return []
    lines = [
        f"parity failures, with the stage that diverged and a standalone repro ({len(triaged)}):"
    ]
    for record in triaged[:_MAX_LISTED]:
        lines.append(f"  {record['nodeid']}")
        if record.get("stage"):
            lines.append(f"    {record.get('stage')}")
        if record.get("repro"):
            lines.append(f"    repro: python {record.get('repro')}")
    return lines + _more(len(triaged), "tests")


def _partly(records: list[ParityRecord]) -> list[str]:
    """Tests with leaves the checker could not judge: the control run differed from eager there
    too, or a value it cannot compare. Their verdict rests on the other leaves."""
    partly = [r for r in records if r.get("not_judged")]
    if not partly:
        return []
    leaves = sum(sum(r.get("not_judged", {}).values()) for r in partly)
    lines = [
        f"checked partly: {len(partly)} test(s) with {leaves} leaf verdict(s) the checker could "
        "not give (the notes say why; each is the checker's limit, not the compiler's):"
    ]
    lines += [f"  {r['nodeid']}: {_by_rule(r.get('not_judged', {}))}" for r in partly[:_MAX_LISTED]]
    return lines + _more(len(partly), "tests")


def _excuses(records: list[ParityRecord]) -> list[str]:
    """How many leaves outside the plain tolerance each named rule excused, over the session."""
    totals: dict[str, int] = {}
    tests = 0
    for record in records:
        counts = record.get("excused", {})
        tests += bool(counts)
        for rule, n in counts.items():
            totals[rule] = totals.get(rule, 0) + n
    if not totals:
        return []
    return [
        f"excused leaves, by rule, in {tests} test(s): {_by_rule(totals)} (each test's notes say "
        "which leaves and the evidence)"
    ]


def _rejected_line(record: ParityRecord) -> str:
    return (
        f"examples rejected: {record.get('rejected', 0)} (eager raised on them and compiled "
        f"raised alike: the program rejects these inputs); the first: "
        f"{record.get('first_rejection', '')}"
    )


def _rejections(records: list[ParityRecord]) -> list[str]:
    """Tests whose Hypothesis examples eager rejected, with how many and the first error."""
    rejecting = [r for r in records if r.get("rejected")]
    if not rejecting:
        return []
    lines = [f"examples rejected because eager raised on them ({len(rejecting)} test(s)):"]
    for record in rejecting[:_MAX_LISTED]:
        lines.append(
            f"  {record.get('rejected')}  {record['nodeid']}: {record.get('first_rejection')}"
        )
    return lines + _more(len(rejecting), "tests")


def _counts_table(records: list[ParityRecord]) -> list[str]:
    header = ("breaks", "recompiles", "fallbacks")
    rows = []
    for record in records:
        numbers = _numbers(record["counts"])
        row = (numbers["graph_breaks"], numbers["recompiles"], numbers["fallbacks"])
        if any(row):
            rows.append((row, record["nodeid"]))
    if not rows:
        return []
    rows.sort(key=lambda row: (-sum(row[0]), row[1]))
    lines = [f"tests with graph breaks, recompiles or fallbacks ({len(rows)}):"]
    lines.append("  " + "  ".join(header) + "  test")
    lines += [
        "  " + "  ".join(f"{n:>{len(h)}}" for n, h in zip(row, header, strict=True)) + f"  {node}"
        for row, node in rows[:_MAX_LISTED]
    ]
    return lines + _more(len(rows), "tests")


def _time_spent(records: list[ParityRecord], slowest: int) -> list[str]:
    """Where the session's checking time went, by part, and the tests that spent the most."""
    costed = [r for r in records if "costs" in r]
    if not costed:
        return []
    total = costs.totals([r["costs"] for r in costed if "costs" in r])
    lines = [
        f"where the checking time went ({len(costed)} test(s); compile is what your own "
        "torch.compile pays too, and the compiles the checker added): "
        f"{costs.line(total).removeprefix('time: ')}"
    ]
    ranked = sorted(costed, key=lambda r: (-sum(r["costs"]["seconds"].values()), r["nodeid"]))
    if slowest > 0:
        lines.append(f"slowest {min(slowest, len(ranked))} test(s) by checking time:")
        lines += [f"  {r['nodeid']}: {costs.line(r['costs'])}" for r in ranked[:slowest]]
    return lines


def _slowest_compiles(records: list[ParityRecord], slowest: int) -> list[str]:
    timed = [r for r in records if r["counts"]["compile_time_s"] > 0]
    timed.sort(key=lambda r: -r["counts"]["compile_time_s"])
    if slowest <= 0 or not timed:
        return []
    shown = [(f"{r['counts']['compile_time_s']:.2f}s", r["nodeid"]) for r in timed[:slowest]]
    width = max(len(seconds) for seconds, _ in shown)
    return [f"slowest {len(shown)} compile(s):"] + [f"  {s:>{width}}  {n}" for s, n in shown]


# --- JSON report and JUnit properties ---


def json_report(
    records: Iterable[ParityRecord],
    *,
    versions: Mapping[str, str],
    collected: Collected,
    coverage_records: Iterable[CoverageRecord] = (),
    budget_verdicts: Mapping[str, BudgetVerdict] | None = None,
) -> dict[str, Any]:
    """The ``--compile-report`` document, keyed by node id (see report.schema.json).

    Strictly JSON: a NaN or infinite error is written as the string "NaN", "Infinity" or
    "-Infinity". If a node id reports twice (reruns) its last record is the entry, and the
    earlier ones ride along in it. With `collected` and the coverage records it holds what the
    summary and a budget update need, so the reports of shards can be merged into one.
    """
    runs: dict[str, list[ParityRecord]] = {}
    for record in records:
        runs.setdefault(record["nodeid"], []).append(record)
    tests = {node: _test_entry(runs[node][-1], budget_verdicts) for node in sorted(runs)}
    for node, test in tests.items():
        if len(runs[node]) > 1:
            test["earlier_runs"] = [_test_entry(r, None) for r in runs[node][:-1]]
    totals: dict[str, Any] = {
        "tests": len(tests),
        **{
            key: sum(t["counts"][key] for t in tests.values())
            for key in ("graphs", "graph_breaks", "recompiles", "fallbacks")
        },
        "compile_time_s": sum(t["compile_time_s"] for t in tests.values()),
        **{
            key: sum(sum(t.get(key, {}).values()) for t in tests.values())
            for key in ("excused", "not_judged")
        },
        "costs": dict(costs.totals([t["costs"] for t in tests.values() if "costs" in t])),
    }
    document = {
        "format": REPORT_FORMAT,
        "versions": dict(versions),
        "totals": totals,
        "collection": _collection_entry(collected),
        "tests": tests,
    }
    reached = sorted(coverage_records, key=lambda r: r["nodeid"])
    if reached:
        document["coverage"] = {**coverage.json_coverage(reached), "tests": reached}
    return document


def _collection_entry(collected: Collected) -> dict[str, Any]:
    return {
        "whole": collected.whole,
        "suite": list(collected.suite),
        "scopes": [{"paths": list(s.paths), "ignored": list(s.ignored)} for s in collected.scopes],
        "collected": sorted(collected.existing),
        "uncollected": sorted(collected.uncollected),
    }


def save_json(path: str | os.PathLike[str], document: Mapping[str, Any]) -> None:
    """Write a `json_report` document as strict, indented JSON, creating missing directories."""
    where = Path(path)
    where.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(document, indent=2, sort_keys=True, allow_nan=False, ensure_ascii=False)
    where.write_text(text + "\n", encoding="utf-8")


def _test_entry(
    record: ParityRecord, budget_verdicts: Mapping[str, BudgetVerdict] | None
) -> dict[str, Any]:
    counts = record["counts"]
    entry: dict[str, Any] = {
        "device": record["device"],
        "backend": record["backend"],
        "mode": record["mode"],
        "dynamic": record["dynamic"],
        "verdict": record["verdict"],
        "calls": record["calls"],
        "wall_time_s": record["wall_time_s"],
        "compile_time_s": counts["compile_time_s"],
        "counts": _numbers(counts),
        "graphs": [dict(g) for g in counts["graphs"]],
        "graph_breaks": [dict(b) for b in counts["graph_breaks"]],
        "recompiles": [dict(r) for r in counts["recompiles"]],
        "fallbacks": [dict(f) for f in counts["fallbacks"]],
        "cudagraph_rerecords": list(counts["cudagraph_rerecords"]),
        "cudagraph_skips": list(counts["cudagraph_skips"]),
        "largest_errors": [
            {"leaf": e["leaf"], "max_abs": _finite(e["max_abs"]), "max_rel": _finite(e["max_rel"])}
            for e in record["largest_errors"]
        ],
    }
    for key in OPTIONAL_KEYS:
        if key in record:
            entry[key] = record[key]  # type: ignore[literal-required]
    if "module_calls" in record:
        entry["module_calls"] = [dict(c) for c in record["module_calls"]]
    if budget_verdicts is not None:
        verdict = budget_verdicts.get(record["nodeid"])
        entry["budget"] = None
        if verdict is not None:
            recorded = verdict.budget.as_dict() if verdict.budget is not None else None
            entry["budget"] = {"status": verdict.status, "recorded": recorded}
    return entry


def _finite(value: float) -> float | str:
    if math.isfinite(value):
        return value
    return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")


def runtime_versions() -> dict[str, str]:
    """Python, pytest-torchcompile, torch and (when installed) Triton versions for the report.

    Read from package metadata, not ``torch.__version__``, so that the xdist controller, which runs
    no test, does not import torch just to write the report.
    """
    versions = {"python": platform.python_version(), "pytest_torchcompile": __version__}
    for key, distributions in (("torch", ("torch",)), ("triton", _TRITON_DISTRIBUTIONS)):
        for distribution in distributions:
            try:
                versions[key] = metadata.version(distribution)
                break
            except metadata.PackageNotFoundError:
                continue
    return versions


def junit_properties(record: ParityRecord) -> list[tuple[str, object]]:
    """The counts as flat properties, for ``user_properties`` and so for JUnit XML dashboards."""
    counts = record["counts"]
    properties: list[tuple[str, object]] = [
        (f"torchcompile.{name}", number) for name, number in _numbers(counts).items()
    ]
    return [*properties, ("torchcompile.compile_time_s", round(counts["compile_time_s"], 3))]


def _numbers(counts: CompileCounts) -> dict[str, int]:
    return {
        "graphs": len(counts["graphs"]),
        "graph_breaks": len(counts["graph_breaks"]),
        "recompiles": len(counts["recompiles"]),
        "fallbacks": len(counts["fallbacks"]),
    }
