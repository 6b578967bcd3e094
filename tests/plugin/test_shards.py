"""A suite run in shards and merged gives what one run of it gives: the budget file, byte for byte,
and the torch.compile summary; shards that ran other software are refused."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch

from pytest_torchcompile.cli import main
from tests.plugin.sharded_suite import (
    BUDGETS,
    DURATIONS_FILE,
    compile_section,
    write_suite,
)
from tests.plugin.test_report import schema

jsonschema = pytest.importorskip("jsonschema")  # the dev extra, like pytest-split
pytest.importorskip("pytest_split")

pytestmark = pytest.mark.skipif(
    torch.cuda.is_available(), reason="the suite's [cuda] case is skipped on a CPU-only machine"
)

REPORT = "compile-report.json"
# pytest-split's groups of the durations file, and a split by directory whose last shard runs
# the rest of the suite (tests/c and tests/test_top.py), so that together they collect it all.
SPLITS = {
    "split": [
        ["--splits=3", f"--group={n}", f"--durations-path={DURATIONS_FILE}"] for n in (1, 2, 3)
    ],
    "directories": [["tests/a"], ["tests/b"], ["tests", "--ignore=tests/a", "--ignore=tests/b"]],
}


def read(path: Path) -> dict[str, Any]:
    document: dict[str, Any] = json.loads(path.read_text())
    jsonschema.validate(document, schema(), cls=jsonschema.Draft202012Validator)
    return document


def merge(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, list[str], str]:
    capsys.readouterr()
    status = main(list(args))
    out, err = capsys.readouterr()
    return status, out.splitlines(), err


def run_shards(pytester: pytest.Pytester, split: str) -> list[set[str]]:
    """Run the split's shards, each writing reports/SPLIT/N.json; the tests each reported."""
    reported = []
    for number, args in enumerate(SPLITS[split], 1):
        report = f"reports/{split}/{number}.json"
        shard = pytester.runpytest(*args, f"--compile-report={report}")
        assert shard.ret == pytest.ExitCode.OK
        reported.append(set(read(pytester.path / report)["tests"]))
    return reported


def test_shards_merged_write_the_budget_file_and_summary_one_run_writes(
    pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    write_suite(pytester.path)
    old = (pytester.path / BUDGETS).read_bytes()
    update = [f"--compile-budgets={BUDGETS}", "--compile-budgets-update"]
    whole = pytester.runpytest(*update, f"--compile-report={REPORT}")
    whole.assert_outcomes(passed=6, skipped=2)
    whole_tests = set(read(pytester.path / REPORT)["tests"])
    expected = (pytester.path / BUDGETS).read_bytes()
    summary = compile_section(whole.outlines)
    assert summary[-2:] == [
        f"compile budgets updated: {BUDGETS}: 1 lowered, 3 added, 1 removed (the whole suite was"
        " collected, so entries of deleted tests were removed)",
        f"compile report written to {REPORT}",
    ]
    assert "tests with graph breaks, recompiles or fallbacks (2):" in summary
    assert "module classes constructed or called: 1 in 1 package(s)" in summary

    for split in SPLITS:
        reported = run_shards(pytester, split)
        assert all(reported) and set().union(*reported) == whole_tests, split
        assert sum(map(len, reported)) == len(whole_tests), split  # each test in one shard
        (pytester.path / BUDGETS).write_bytes(old)
        pattern = f"reports/{split}/*.json"
        status, out, _ = merge(
            capsys, "budgets", "update", "--from-reports", pattern, BUDGETS, "--output", REPORT
        )
        assert status == 0
        assert (pytester.path / BUDGETS).read_bytes() == expected, split
        assert compile_section(out) == summary, split
        assert set(read(pytester.path / REPORT)["tests"]) == whole_tests

    # Another torch in one shard: its counts may differ, so the merge names both and refuses.
    (pytester.path / BUDGETS).write_bytes(old)
    other = pytester.path / "reports/split/2.json"
    document = json.loads(other.read_text())
    torch_version = document["versions"]["torch"]
    document["versions"]["torch"] = "2.12.0"
    other.write_text(json.dumps(document))
    status, _, err = merge(
        capsys, "budgets", "update", "--from-reports", "reports/split/*.json", BUDGETS
    )
    assert status == 2
    assert err == (
        "python -m pytest_torchcompile: error: reports/split/1.json and reports/split/2.json ran"
        f" different torch versions ({torch_version} and 2.12.0): counts depend on them, so merge"
        " the reports of shards that ran the same software\n"
    )
    assert (pytester.path / BUDGETS).read_bytes() == old
