"""--compile-report: the JSON report, its schema, and the terminal summary, with and without xdist."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Any

import pytest

from pytest_torchcompile.counting import report

jsonschema = pytest.importorskip("jsonschema")  # a test-only dependency (the dev extra)

# One test per kind of entry: graph breaks on every device, a recompile, a parity failure from a
# backend that adds 1e-3 to every output, a test that is not a parity test at all.
SUITE = """
import pytest
import torch


def breaking(x):
    x = x + 1
    torch._dynamo.graph_break()
    return x * 2


def relu(x):
    return x.relu()


# The test's own devices, its [cuda] case skipped at setup on every host: the plugin's would be
# cuda:0 on a GPU host (cuda under xdist), so the ids and counts below hold everywhere.
@pytest.mark.parametrize(
    "device", ["cpu", pytest.param("cuda", marks=pytest.mark.skip(reason="the skipped test"))]
)
@pytest.mark.compile_parity(backend="aot_eager")
def test_breaks(compile_parity, device):
    compile_parity(breaking, torch.randn(3, device=device))


@pytest.mark.compile_parity(backend="eager", dynamic="false")
def test_recompiles(compile_parity):
    compile_parity(relu, torch.randn(2))
    compile_parity(relu, torch.randn(3))


@pytest.mark.compile_parity(backend="wrong_backend:off_by_a_thousandth", backward=False)
def test_miscompiled(compile_parity):
    compile_parity(relu, torch.ones(4))


def test_plain():
    pass
"""

WRONG_BACKEND = """
import torch

def off_by_a_thousandth(gm, example_inputs):
    def run(*args):
        return [out + 1e-3 if isinstance(out, torch.Tensor) else out for out in gm(*args)]

    return run
"""

REPORT = "reports/compile-report.json"


def make_suite(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_suite=SUITE, wrong_backend=WRONG_BACKEND)


def schema() -> dict[str, Any]:
    text = resources.files("pytest_torchcompile").joinpath(report.SCHEMA_FILE).read_text("utf-8")
    loaded: dict[str, Any] = json.loads(text)
    return loaded


def load_report(pytester: pytest.Pytester) -> dict[str, Any]:
    document: dict[str, Any] = json.loads((pytester.path / REPORT).read_text())
    jsonschema.validate(document, schema(), cls=jsonschema.Draft202012Validator)
    return document


def test_the_report_validates_and_holds_every_parity_test(pytester: pytest.Pytester) -> None:
    make_suite(pytester)
    budgets = {"test_suite.py::test_breaks[cpu]": {"cpu": {"graph_breaks": 1}}}
    (pytester.path / "budgets.json").write_text(
        json.dumps(
            {
                "format": 1,
                "tests": {
                    node: {d: {"fallbacks": 0, "recompiles": 0, **c} for d, c in entry.items()}
                    for node, entry in budgets.items()
                },
            }
        )
    )
    result = pytester.runpytest(f"--compile-report={REPORT}", "--compile-budgets=budgets.json")
    result.assert_outcomes(passed=3, failed=1, skipped=1)

    document = load_report(pytester)
    assert {"python", "torch", "pytest_torchcompile"} <= set(document["versions"])
    assert sorted(document["tests"]) == [
        "test_suite.py::test_breaks[cpu]",
        "test_suite.py::test_miscompiled",
        "test_suite.py::test_recompiles",
    ]
    assert document["totals"]["tests"] == 3
    # Every test collected, parity test or not, run or skipped: what a merged update needs.
    assert document["collection"] == {
        "whole": True,
        "suite": ["."],
        "scopes": [{"paths": ["."], "ignored": []}],
        "collected": [
            "test_suite.py::test_breaks[cpu]",
            "test_suite.py::test_breaks[cuda]",
            "test_suite.py::test_miscompiled",
            "test_suite.py::test_plain",
            "test_suite.py::test_recompiles",
        ],
        "uncollected": [],
    }
    breaks = document["tests"]["test_suite.py::test_breaks[cpu]"]
    assert (breaks["device"], breaks["backend"], breaks["mode"], breaks["dynamic"]) == (
        "cpu",
        "aot_eager",
        "default",
        "auto",
    )
    assert breaks["verdict"] == "passed"
    assert breaks["counts"] == {"graphs": 2, "graph_breaks": 1, "recompiles": 0, "fallbacks": 0}
    [only] = breaks["graph_breaks"]
    assert only["location"] == "test_suite.py:7"
    assert "graph_break()" in only["reason"]
    assert breaks["budget"] == {
        "status": "unchanged",
        "recorded": {"graph_breaks": 1, "recompiles": 0, "fallbacks": 0},
    }
    recompiles = document["tests"]["test_suite.py::test_recompiles"]
    assert [r["category"] for r in recompiles["recompiles"]] == ["size"]
    assert recompiles["dynamic"] == "false"
    assert recompiles["budget"] == {"status": "unrecorded", "recorded": None}
    miscompiled = document["tests"]["test_suite.py::test_miscompiled"]
    assert miscompiled["verdict"] == "failed"
    worst = max(e["max_abs"] for e in miscompiled["largest_errors"])
    assert worst == pytest.approx(1e-3, rel=1e-3)

    result.stdout.fnmatch_lines(
        [
            "*= torch.compile =*",
            "tests with graph breaks, recompiles or fallbacks (2):",
            "  breaks  recompiles  fallbacks  test",
            "       1           0          0  test_suite.py::test_breaks[[]cpu[]]",
            "       0           1          0  test_suite.py::test_recompiles",
            "unrecorded: 2 test(s) without a budget entry *",
            "slowest 3 compile(s):",
            f"compile report written to *{REPORT}",
        ]
    )


def test_without_the_option_there_is_no_report_and_no_summary(pytester: pytest.Pytester) -> None:
    make_suite(pytester)
    result = pytester.runpytest("-k", "breaks or plain")
    result.assert_outcomes(passed=2, skipped=1, deselected=2)
    assert "torch.compile =" not in result.stdout.str()
    assert not (pytester.path / "reports").exists()


_PER_PROCESS = ("wall_time_s", "compile_time_s", "triage_time_s", "repro", "artifacts", "costs")


def without_timings(document: dict[str, Any]) -> dict[str, Any]:
    """What must not depend on xdist: everything but times, the exact size of errors, and the
    triage directories (each process has its own temporary directory), whose names stay."""
    tests = {
        node: {
            **{k: v for k, v in entry.items() if k not in _PER_PROCESS},
            **{k: Path(entry[k]).parent.name for k in ("repro", "artifacts") if k in entry},
            "largest_errors": sorted(e["leaf"] for e in entry["largest_errors"]),
        }
        for node, entry in document["tests"].items()
    }
    totals = {k: v for k, v in document["totals"].items() if k not in ("compile_time_s", "costs")}
    return {**document, "tests": tests, "totals": totals}


def outcomes(result: pytest.RunResult) -> dict[str, int]:
    counts = result.parseoutcomes()
    names = ("passed", "failed", "skipped", "errors", "deselected")
    return {name: counts[name] for name in names if name in counts}


def test_under_xdist_the_controller_writes_the_same_report(pytester: pytest.Pytester) -> None:
    make_suite(pytester)
    serial = pytester.runpytest(f"--compile-report={REPORT}")
    serial_report = load_report(pytester)
    (pytester.path / REPORT).unlink()

    distributed = pytester.runpytest_subprocess(f"--compile-report={REPORT}", "-n", "2")
    distributed.assert_outcomes(**outcomes(serial))
    assert without_timings(load_report(pytester)) == without_timings(serial_report)
    distributed.stdout.fnmatch_lines([f"compile report written to *{REPORT}"])
