"""``python -m pytest_torchcompile``: check, update and summarize from shards' reports."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_torchcompile.cli import main
from pytest_torchcompile.counting import budgets
from pytest_torchcompile.counting.budgets import Budget, Budgets, Collected, Scope
from pytest_torchcompile.counting.report import json_report, save_json
from tests.unit.test_report import record

SEPARATOR = f"{' torch.compile ':=^80}"


@pytest.fixture
def shards(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Two shards' reports in reports/, together the whole suite; run from tmp_path."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("COLUMNS", "80")
    versions = {"python": "3.11.7", "torch": "2.13.0+cpu"}
    for name, records, scope in [
        ("1", [record("tests/a.py::grew", breaks=2)], Scope(("tests/a.py",))),
        ("2", [record("tests/b.py::same", recompiles=1)], Scope(("tests",), ("tests/a.py",))),
    ]:
        collected = Collected(("tests",), (scope,), frozenset(r["nodeid"] for r in records))
        document = json_report(records, versions=versions, collected=collected)
        save_json(tmp_path / "reports" / f"{name}.json", document)
    old = {
        "tests/a.py::grew": Budget(1),
        "tests/b.py::same": Budget(0, 1),
        "tests/gone.py::x": Budget(),
    }
    budgets.save(tmp_path / "b.json", Budgets({n: {"cpu": b} for n, b in old.items()}))
    return tmp_path


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, list[str], str]:
    status = main(list(args))
    out, err = capsys.readouterr()
    return status, out.splitlines(), err


def test_check_fails_on_a_grown_count_with_the_tests_own_message(
    shards: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = (shards / "b.json").read_bytes()
    status, out, _ = run(capsys, "budgets", "check", "--from-reports", "reports/*.json", "b.json")
    assert status == 1
    assert out[:4] == [
        "merging 2 report(s): reports/1.json, reports/2.json",
        "tests/a.py::grew: compile budget exceeded (b.json): recorded -> now",
        "  graph_breaks  1 -> 2  (+1)",
        "  recompiles    0 -> 0",
    ]
    assert out[out.index(SEPARATOR) + 1] == "REGRESSED tests/a.py::grew - graph_breaks 1 -> 2"
    assert (shards / "b.json").read_bytes() == before  # checking never writes

    budgets.save(shards / "b.json", Budgets({"tests/a.py::grew": {"cpu": Budget(2)}}))
    status, out, _ = run(capsys, "budgets", "check", "--from-reports", "reports/*.json", "b.json")
    assert status == 0
    assert "REGRESSED" not in "\n".join(out)
    assert any(line.startswith("unrecorded: 1 test(s) without a budget entry") for line in out)


def test_update_writes_what_one_run_writes_and_says_so(
    shards: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status, out, _ = run(
        capsys,
        "budgets",
        "update",
        "--from-reports",
        "reports/1.json",
        "--from-reports",
        "reports/2.json",
        "b.json",
        "--output",
        "merged/report.json",
    )
    assert status == 0
    assert budgets.load(shards / "b.json") == Budgets(
        {"tests/a.py::grew": {"cpu": Budget(2)}, "tests/b.py::same": {"cpu": Budget(0, 1)}}
    )
    assert out[-2:] == [
        "compile budgets updated: b.json: 1 raised, 1 removed (the whole suite was collected,"
        " so entries of deleted tests were removed)",
        "compile report written to merged/report.json",
    ]
    merged = json.loads((shards / "merged/report.json").read_text())
    assert sorted(merged["tests"]) == ["tests/a.py::grew", "tests/b.py::same"]
    assert merged["collection"]["whole"] is True
    assert "budget" not in merged["tests"]["tests/a.py::grew"]  # an update judges nothing


def test_report_prints_the_summary_of_the_shards(
    shards: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status, out, _ = run(capsys, "report", "--from-reports", "reports/*.json")
    assert status == 0
    assert out[1:5] == [
        SEPARATOR,
        "tests with graph breaks, recompiles or fallbacks (2):",
        "  breaks  recompiles  fallbacks  test",
        "       2           0          0  tests/a.py::grew",
    ]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["report", "--from-reports", "nowhere/*.json"], "no report matches nowhere/*.json"),
        (
            ["budgets", "update", "--from-reports", "reports/*.json", "bad.json"],
            "bad.json:1:1: not valid JSON: Expecting value",
        ),
    ],
)
def test_what_cannot_be_used_is_exit_status_2_with_the_reason(
    shards: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    (shards / "bad.json").write_text("oops")
    status, _, err = run(capsys, *args)
    assert status == 2
    assert err == f"python -m pytest_torchcompile: error: {message}\n"
    assert (shards / "bad.json").read_text() == "oops"  # never overwritten


def test_the_command_runs_as_a_module_without_importing_torch(tmp_path: Path) -> None:
    code = (
        "import sys, runpy; sys.argv = ['x', '--help']\n"
        "try:\n"
        "    runpy.run_module('pytest_torchcompile', run_name='__main__')\n"
        "except SystemExit as exit:\n"
        "    assert exit.code == 0\n"
        "assert 'torch' not in sys.modules, 'torch was imported'\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=tmp_path
    )
    assert "usage: python -m pytest_torchcompile" in done.stdout
