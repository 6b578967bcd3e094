"""Report sections, the terminal summary, the JSON report and its schema, JUnit properties."""

from __future__ import annotations

import json
import math
import random
import subprocess
import sys
from importlib import resources
from typing import Any

import pytest

from pytest_torchcompile import __version__
from pytest_torchcompile.counting import costs, records, report
from pytest_torchcompile.counting.budgets import Budget, BudgetVerdict, Collected, Scope, check
from pytest_torchcompile.counting.records import CompileCounts, LeafError
from pytest_torchcompile.counting.report import (
    json_report,
    junit_properties,
    runtime_versions,
    section_text,
    summary_lines,
)

jsonschema = pytest.importorskip("jsonschema")  # a test-only dependency (the dev extra)

ATTENTION = "tests/test_model.py::test_attention[cpu]"


def record(
    nodeid: str = ATTENTION,
    *,
    breaks: int = 0,
    recompiles: int = 0,
    fallbacks: int = 0,
    compile_time_s: float = 0.25,
    errors: list[LeafError] | None = None,
    verdict: str = "passed",
) -> records.ParityRecord:
    """A record as the plugin builds it: one graph per break plus one, events with file:line."""
    counts: CompileCounts = {
        "graphs": [
            {
                "frame": f"forward (tests/models.py:{10 + 5 * i})",
                "ops": 12 - i,
                "reason": f"graph break {i}" if i else "return_value",
            }
            for i in range(breaks + 1)
        ],
        "graph_breaks": [
            {"reason": f"print() call {i}", "location": f"tests/models.py:{12 + i}"}
            for i in range(breaks)
        ],
        "recompiles": [
            {
                "frame": "forward (tests/models.py:10)",
                "reason": f"tensor 'x' size mismatch at index 0. expected {i + 2}, actual {i + 3}",
                "category": "size",
            }
            for i in range(recompiles)
        ],
        "fallbacks": [
            {"frame": "helper (tests/models.py:40)", "kind": "recompile_limit", "reason": "limit 8"}
            for _ in range(fallbacks)
        ],
        "cudagraph_rerecords": [],
        "cudagraph_skips": [],
        "compile_time_s": compile_time_s,
    }
    return {
        "nodeid": nodeid,
        "device": "cpu",
        "backend": "inductor",
        "mode": "default",
        "dynamic": "auto",
        "verdict": verdict,
        "calls": 3,
        "counts": counts,
        "largest_errors": errors if errors is not None else [],
        "wall_time_s": compile_time_s + 1.5,
    }


def leaf(name: str, max_abs: float, max_rel: float) -> LeafError:
    return {"leaf": name, "max_abs": max_abs, "max_rel": max_rel}


# --- section_text ---


def test_the_section_shows_settings_times_graphs_breaks_recompiles_and_errors() -> None:
    errors = [leaf("output", 1.2e-7, 2.5e-7), leaf("grad of parameter 'W_q.weight'", 3e-6, 1e-5)]
    text = section_text(record(breaks=1, recompiles=1, compile_time_s=1.234, errors=errors))
    assert text.splitlines() == [
        "passed on cpu after 3 checker call(s): backend inductor, mode default, dynamic auto",
        "compile time 1.23s, wall time 2.73s",
        "graphs (2):",
        "  1. forward (tests/models.py:10), 12 ops, ended by: return_value",
        "  2. forward (tests/models.py:15), 11 ops, ended by: graph break 1",
        "graph breaks (1):",
        "  1. tests/models.py:12: print() call 0",
        "recompiles (1):",
        "  1. [size] forward (tests/models.py:10):"
        " tensor 'x' size mismatch at index 0. expected 2, actual 3",
        "fallbacks: none",
        "largest errors (compiled vs eager, worst first):",
        "  grad of parameter 'W_q.weight'  max_abs 3e-06  max_rel 1e-05",
        "  output                          max_abs 1.2e-07  max_rel 2.5e-07",
    ]


def test_the_section_lists_fallbacks_cudagraph_rerecords_and_unknown_locations() -> None:
    rec = record(breaks=1, fallbacks=1)
    rec["counts"]["graph_breaks"][0]["location"] = ""
    rec["counts"]["cudagraph_rerecords"] = ["forward: input 0 changed its data pointer"]
    rec["mode"] = ""
    lines = section_text(rec).splitlines()
    assert "mode default" in lines[0]
    assert "  1. <unknown location>: print() call 0" in lines
    assert lines[lines.index("fallbacks (1):") + 1] == (
        "  1. [recompile_limit] helper (tests/models.py:40): limit 8"
    )
    assert lines[-2:] == [
        "cudagraph re-records (1):",
        "  1. forward: input 0 changed its data pointer",
    ]
    assert "largest errors" not in section_text(rec)


def test_nan_is_the_worst_error_and_long_error_lists_are_cut() -> None:
    errors = [leaf(f"output[{i}]", i * 1e-6, i * 1e-5) for i in range(30)]
    errors.append(leaf("output['logits']", math.nan, math.nan))
    lines = section_text(record(errors=errors)).splitlines()
    table = lines[lines.index("largest errors (compiled vs eager, worst first):") + 1 :]
    assert table[0].split() == ["output['logits']", "max_abs", "nan", "max_rel", "nan"]
    assert table[1].split()[0] == "output[29]"
    assert len(table) == 21
    assert table[-1] == "  ... and 11 more leaves"


# --- summary_lines ---


def _verdicts(*pairs: tuple[str, Budget | None, records.ParityRecord]) -> dict[str, BudgetVerdict]:
    return {rec["nodeid"]: check(budget, rec["counts"]) for _, budget, rec in pairs}


def test_the_summary_puts_budget_news_first_then_counts_unrecorded_and_slowest() -> None:
    regressed = record("tests/t.py::regressed", breaks=2, compile_time_s=0.5)
    improved = record("tests/t.py::improved", recompiles=1, compile_time_s=12.0)
    unrecorded = record("tests/t.py::unrecorded", compile_time_s=0.01)
    clean = record("tests/t.py::clean", compile_time_s=0)
    run = [clean, unrecorded, improved, regressed]
    verdicts = _verdicts(
        ("r", Budget(1, 0, 0), regressed),
        ("i", Budget(0, 3, 0), improved),
        ("u", None, unrecorded),
        ("c", Budget(), clean),
    )
    assert summary_lines(run, verdicts, slowest=3) == [
        "REGRESSED tests/t.py::regressed - graph_breaks 1 -> 2",
        "IMPROVED tests/t.py::improved - recompiles 3 -> 1"
        " (improved: lower the budget with --compile-budgets-update)",
        "tests with graph breaks, recompiles or fallbacks (2):",
        "  breaks  recompiles  fallbacks  test",
        "       2           0          0  tests/t.py::regressed",
        "       0           1          0  tests/t.py::improved",
        "unrecorded: 1 test(s) without a budget entry (record them with --compile-budgets-update):",
        "  tests/t.py::unrecorded",
        "slowest 3 compile(s):",
        "  12.00s  tests/t.py::improved",
        "   0.50s  tests/t.py::regressed",
        "   0.01s  tests/t.py::unrecorded",
    ]


def test_the_summary_without_a_budget_file_or_anything_to_say() -> None:
    assert summary_lines([]) == []
    assert summary_lines([record(compile_time_s=0)]) == []
    assert summary_lines([record(compile_time_s=1.0)], slowest=0) == []
    assert summary_lines([record(fallbacks=1)], slowest=0) == [
        "tests with graph breaks, recompiles or fallbacks (1):",
        "  breaks  recompiles  fallbacks  test",
        f"       0           0          1  {ATTENTION}",
    ]


def test_long_summary_lists_are_cut_and_aligned() -> None:
    run = [record(f"tests/t.py::test_{i:02}", breaks=1, recompiles=i) for i in range(25)]
    verdicts = {r["nodeid"]: check(None, r["counts"]) for r in run}
    lines = summary_lines(run, verdicts, slowest=0)
    table = lines[2 : lines.index("  ... and 5 more tests")]
    assert len(table) == 20
    assert table[0].endswith("tests/t.py::test_24")  # most events first
    assert len({row.index("tests/t.py::") for row in table}) == 1  # the test column lines up
    assert lines[-1] == "  ... and 5 more tests"
    assert lines[-22] == (
        "unrecorded: 25 test(s) without a budget entry (record them with --compile-budgets-update):"
    )


def test_the_summary_does_not_depend_on_the_order_records_arrive() -> None:
    run = [record(f"tests/t.py::test_{i}", breaks=i % 2, compile_time_s=i % 4) for i in range(12)]
    verdicts = {r["nodeid"]: check(Budget(), r["counts"]) for r in run}
    expected = summary_lines(run, verdicts)
    for seed in range(5):
        shuffled = run[:]
        random.Random(seed).shuffle(shuffled)
        assert summary_lines(shuffled, dict(reversed(verdicts.items()))) == expected


# --- json_report ---


def schema() -> dict[str, Any]:
    text = resources.files("pytest_torchcompile").joinpath(report.SCHEMA_FILE).read_text("utf-8")
    loaded: dict[str, Any] = json.loads(text)
    return loaded


def realistic_report() -> dict[str, Any]:
    attention = record(
        breaks=2,
        recompiles=1,
        compile_time_s=3.5,
        errors=[leaf("output", 1e-6, 2e-6), leaf("output[1]", math.inf, math.nan)],
    )
    attention["counts"]["cudagraph_rerecords"] = ["forward: new input shape"]
    attention["excused"] = {"float64 reference": 2, "eager's rounding noise": 1}
    attention["not_judged"] = {"the control": 1}
    softmax = record("tests/test_ops.py::test_softmax", fallbacks=1, verdict="failed")
    softmax["counts"]["fallbacks"][0]["kind"] = "skipped"
    softmax.update(TRIAGED)
    skipped = record("tests/test_ops.py::test_gpu_only[cuda:0]", verdict="skipped")
    run = [softmax, attention, skipped]
    verdicts = {
        ATTENTION: check(Budget(1, 1, 0), attention["counts"]),
        "tests/test_ops.py::test_softmax": check(None, softmax["counts"]),
    }
    return json_report(
        run,
        versions={"python": "3.11.7", "torch": "2.13.0+cpu", "triton": "3.4.0"},
        collected=COLLECTED,
        coverage_records=[REACHED],
        budget_verdicts=verdicts,
    )


# Shard 2 of a directory split: tests/ less tests/unit, a module skipped at collection.
COLLECTED = Collected(
    suite=("tests",),
    scopes=(Scope(("tests",), ("tests/unit",)),),
    existing=frozenset({ATTENTION, "tests/test_ops.py::test_softmax", "tests/test_ops.py::test_b"}),
    uncollected=frozenset({"tests/test_optional.py"}),
)
REACHED: records.CoverageRecord = {
    "nodeid": "tests/test_zoo.py::test_resnet",
    "constructed": ["zoo.ResNet", "zoo.Block"],
    "calls": [{"module": "zoo.ResNet", "outcome": "checked", "reason": "", "calls": 2}],
    "inside_checked": ["zoo.Block"],
}


TRIAGED: dict[str, Any] = {
    "stage": "stage: Dynamo OK, AOTAutograd OK, decompositions OK -> TorchInductor diverges",
    "repro": "/tmp/artifacts/tests_test_ops.py__test_softmax/repro.py",
    "artifacts": "/tmp/artifacts/tests_test_ops.py__test_softmax/artifacts",
    "triage_time_s": 2.5,
}


def test_a_failing_test_carries_its_stage_repro_and_artifacts_into_the_report() -> None:
    entries = realistic_report()["tests"]
    assert {key: entries["tests/test_ops.py::test_softmax"][key] for key in TRIAGED} == TRIAGED
    assert not set(TRIAGED) & set(entries[ATTENTION])  # a passing test has none


def test_the_summary_lists_failures_with_their_stage_and_repro_first() -> None:
    failed = record("tests/t.py::failed", verdict="failed", compile_time_s=0)
    failed.update(TRIAGED)
    unbisected = record("tests/t.py::unbisected", verdict="failed", compile_time_s=0)
    unbisected.update({**TRIAGED, "stage": ""})
    assert summary_lines([unbisected, failed, record(compile_time_s=0)]) == [
        "parity failures, with the stage that diverged and a standalone repro (2):",
        "  tests/t.py::failed",
        f"    {TRIAGED['stage']}",
        f"    repro: python {TRIAGED['repro']}",
        "  tests/t.py::unbisected",
        f"    repro: python {TRIAGED['repro']}",
    ]


def test_a_realistic_report_validates_against_the_packaged_schema() -> None:
    jsonschema.Draft202012Validator.check_schema(schema())
    document = realistic_report()
    jsonschema.validate(document, schema(), cls=jsonschema.Draft202012Validator)
    json.dumps(document, allow_nan=False)  # strict JSON: NaN and inf became strings
    plain = json_report(
        [record()], versions={"python": "3.12.1", "torch": "2.11.0"}, collected=Collected()
    )
    jsonschema.validate(plain, schema(), cls=jsonschema.Draft202012Validator)
    assert "budget" not in plain["tests"][ATTENTION]


def test_the_report_holds_every_field_per_node_id_with_versions_at_the_top() -> None:
    document = realistic_report()
    assert list(document) == ["format", "versions", "totals", "collection", "tests", "coverage"]
    assert document["versions"]["torch"] == "2.13.0+cpu"
    assert list(document["tests"]) == sorted(document["tests"])
    assert document["totals"] == {
        "tests": 3,
        "graphs": 5,
        "graph_breaks": 2,
        "recompiles": 1,
        "fallbacks": 1,
        "compile_time_s": 3.5 + 0.25 + 0.25,
        "excused": 3,
        "not_judged": 1,
        "costs": {"seconds": dict.fromkeys(costs.PARTS, 0.0), "added_compiles": {}},
    }
    attention = document["tests"][ATTENTION]
    assert attention["counts"] == {"graphs": 3, "graph_breaks": 2, "recompiles": 1, "fallbacks": 0}
    assert attention["graph_breaks"][1] == {
        "reason": "print() call 1",
        "location": "tests/models.py:13",
    }
    assert attention["recompiles"][0]["category"] == "size"
    assert attention["largest_errors"][1] == {
        "leaf": "output[1]",
        "max_abs": "Infinity",
        "max_rel": "NaN",
    }
    assert (attention["compile_time_s"], attention["wall_time_s"]) == (3.5, 5.0)
    assert attention["budget"] == {
        "status": "regressed",
        "recorded": {"graph_breaks": 1, "recompiles": 1, "fallbacks": 0},
    }
    assert document["tests"]["tests/test_ops.py::test_softmax"]["budget"] == {
        "status": "unrecorded",
        "recorded": None,
    }
    assert document["tests"]["tests/test_ops.py::test_gpu_only[cuda:0]"]["budget"] is None


def test_a_rerun_test_keeps_its_last_record_and_the_earlier_ones_ride_along() -> None:
    document = json_report(
        [record(breaks=3, verdict="rerun"), record(breaks=2), record("tests/t.py::once")],
        versions={"python": "3", "torch": "2"},
        collected=Collected(),
    )
    rerun = document["tests"][ATTENTION]
    assert rerun["counts"]["graph_breaks"] == 2
    assert [(r["verdict"], r["counts"]["graph_breaks"]) for r in rerun["earlier_runs"]] == [
        ("rerun", 3)
    ]
    assert "earlier_runs" not in document["tests"]["tests/t.py::once"]
    jsonschema.validate(document, schema(), cls=jsonschema.Draft202012Validator)


def test_the_report_says_what_was_collected_and_what_each_intercepted_test_reached() -> None:
    document = realistic_report()
    assert document["collection"] == {
        "whole": False,
        "suite": ["tests"],
        "scopes": [{"paths": ["tests"], "ignored": ["tests/unit"]}],
        "collected": sorted(COLLECTED.existing),
        "uncollected": ["tests/test_optional.py"],
    }
    assert document["coverage"]["tests"] == [REACHED]
    assert document["coverage"]["classes"]["zoo.Block"]["status"] == "inside checked"


@pytest.mark.parametrize(
    ("path", "bad"),
    [
        (("versions", "torch"), None),
        (("format",), 2),
        (("collection",), None),
        (("collection", "whole"), "yes"),
        (("collection", "scopes", 0, "paths", 0), ""),
        (("coverage", "tests", 0, "calls", 0, "outcome"), "maybe"),
        (("tests", ATTENTION, "verdict"), "xfailed"),
        (("tests", ATTENTION, "counts", "graph_breaks"), -1),
        (("tests", ATTENTION, "recompiles", 0, "category"), "shape"),
        (("tests", ATTENTION, "largest_errors", 0, "max_abs"), "inf"),
        (("tests", ATTENTION, "budget", "status"), "worse"),
        (("tests", ATTENTION, "surprise"), 1),
        (("tests", "tests/test_ops.py::test_softmax", "repro"), 1),
        (("tests", "tests/test_ops.py::test_softmax", "triage_time_s"), -1),
    ],
)
def test_the_schema_rejects_a_broken_report(path: tuple[str | int, ...], bad: object) -> None:
    document = realistic_report()
    *parents, last = path
    target: Any = document
    for key in parents:
        target = target[key]
    if bad is None:
        del target[last]
    else:
        target[last] = bad
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(document, schema(), cls=jsonschema.Draft202012Validator)


def test_runtime_versions_come_from_package_metadata() -> None:
    versions = runtime_versions()
    assert versions["python"] == ".".join(map(str, sys.version_info[:3]))
    assert versions["torch"].startswith("2.")
    assert versions["pytest_torchcompile"] == __version__
    jsonschema.validate(
        json_report([], versions=versions, collected=Collected()),
        schema(),
        cls=jsonschema.Draft202012Validator,
    )


# --- junit_properties ---


def test_junit_properties_are_the_flat_counts() -> None:
    assert junit_properties(record(breaks=2, recompiles=1, compile_time_s=1.23456)) == [
        ("torchcompile.graphs", 3),
        ("torchcompile.graph_breaks", 2),
        ("torchcompile.recompiles", 1),
        ("torchcompile.fallbacks", 0),
        ("torchcompile.compile_time_s", 1.235),
    ]


def test_importing_the_module_imports_neither_torch_nor_pytest() -> None:
    code = (
        f"import sys, {report.__name__}; "
        "assert not {'torch', 'pytest'} & set(sys.modules), sorted(sys.modules)"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_excused_and_unjudged_leaves_are_counted_by_rule_in_the_section_and_summary() -> None:
    partly = record("tests/t.py::partly", compile_time_s=0)
    partly["excused"] = {"float64 reference": 2}
    partly["not_judged"] = {"the control": 1, "uncomparable": 1}
    excused = record("tests/t.py::excused", compile_time_s=0)
    excused["excused"] = {"float64 reference": 1, "eager's rounding noise": 4}
    assert summary_lines([excused, partly, record(compile_time_s=0)]) == [
        "checked partly: 1 test(s) with 2 leaf verdict(s) the checker could not give (the notes "
        "say why; each is the checker's limit, not the compiler's):",
        "  tests/t.py::partly: the control 1, uncomparable 1",
        "excused leaves, by rule, in 2 test(s): eager's rounding noise 4, float64 reference 3 "
        "(each test's notes say which leaves and the evidence)",
    ]
    section = section_text(partly).splitlines()
    assert "excused leaves, by rule: float64 reference 2" in section
    assert "checked partly: leaves not judged, by why: the control 1, uncomparable 1" in section


def test_where_the_checking_time_went_is_in_the_section_the_summary_and_the_json() -> None:
    slow = record("tests/t.py::slow", compile_time_s=0)
    slow["costs"] = costs.Costs(
        seconds={**dict.fromkeys(costs.PARTS, 0.0), "compiled side": 2.5, "re-runs": 4.0},
        added={costs.AS_USER: 1},
    ).record(compile_time_s=1.5, triage_time_s=3.0)
    assert slow["costs"]["seconds"]["compiled side"] == 1.0  # less the compile time in it
    fast = record("tests/t.py::fast", compile_time_s=0)
    fast["costs"] = costs.Costs().record(compile_time_s=0.25)
    lines = summary_lines([fast, slow], slowest=1)
    assert lines[-3] == (
        "where the checking time went (2 test(s); compile is what your own torch.compile pays "
        "too, and the compiles the checker added): compile 1.75s, compiled side 1.00s, eager side 0.00s, comparing 0.00s, re-runs "
        f"4.00s, triage 3.00s; compiles the checker added: 1 {costs.AS_USER}"
    )
    assert lines[-2:] == [
        "slowest 1 test(s) by checking time:",
        f"  tests/t.py::slow: {costs.line(slow['costs'])}",
    ]
    assert costs.line(slow["costs"]) in section_text(slow).splitlines()
    document = json_report(
        [fast, slow], versions={"python": "3", "torch": "2"}, collected=COLLECTED
    )
    assert document["totals"]["costs"]["seconds"]["re-runs"] == 4.0
    jsonschema.validate(document, schema(), cls=jsonschema.Draft202012Validator)
