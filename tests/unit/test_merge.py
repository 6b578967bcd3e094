"""Shards' JSON reports read back into the records their sessions gathered, and joined."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from pytest_torchcompile.counting.budgets import Budget, Collected, Scope, check
from pytest_torchcompile.counting.merge import ReportError, Session, merge, read, report_paths
from pytest_torchcompile.counting.records import ParityRecord
from pytest_torchcompile.counting.report import json_report
from tests.unit.test_report import ATTENTION, COLLECTED, REACHED, realistic_report, record

VERSIONS = {"python": "3.11.7", "torch": "2.13.0+cpu", "pytest_torchcompile": "0.1.0"}


def written(path: Path, document: dict[str, Any]) -> Path:
    path.write_text(json.dumps(document))
    return path


def shard(
    path: Path,
    records: list[ParityRecord],
    scope: Scope,
    versions: dict[str, str] = VERSIONS,
    suite: tuple[str, ...] = ("tests",),
) -> Session:
    collected = Collected(suite, (scope,), frozenset(r["nodeid"] for r in records))
    document = json_report(records, versions=versions, collected=collected)
    return read(written(path, document))


def test_a_report_reads_back_into_the_records_it_was_written_from(tmp_path: Path) -> None:
    """Written again, they give the same report: every field survives, NaN and inf included."""
    document = realistic_report()
    rerun = record("tests/t.py::flaky", verdict="rerun", breaks=4)
    document["tests"]["tests/t.py::flaky"] = {
        **json_report([rerun, record("tests/t.py::flaky")], versions={}, collected=Collected())[
            "tests"
        ]["tests/t.py::flaky"],
        "budget": None,
    }
    session = read(written(tmp_path / "r.json", document))
    again = json_report(
        session.records,
        versions=session.versions,
        collected=session.collected,
        coverage_records=session.coverage,
        budget_verdicts=session.verdicts,
    )
    assert again == {**document, "totals": again["totals"]}
    assert again["totals"]["tests"] == document["totals"]["tests"] + 1
    assert session.collected == COLLECTED
    assert session.coverage == [REACHED]
    assert [r["verdict"] for r in session.records if r["nodeid"] == "tests/t.py::flaky"] == [
        "rerun",
        "passed",
    ]
    [errors] = [r["largest_errors"] for r in session.records if r["nodeid"] == ATTENTION]
    assert math.isinf(errors[1]["max_abs"]) and math.isnan(errors[1]["max_rel"])


def test_a_report_without_budget_verdicts_reads_back_without_them(tmp_path: Path) -> None:
    plain = json_report([record()], versions=VERSIONS, collected=Collected())
    assert read(written(tmp_path / "r.json", plain)).verdicts is None


def test_shards_join_into_one_session(tmp_path: Path) -> None:
    one = shard(tmp_path / "1.json", [record("tests/a/t.py::x")], Scope(("tests/a",)))
    two = shard(
        tmp_path / "2.json",
        [record("tests/b/t.py::y", breaks=1)],
        Scope(("tests",), ("tests/a",)),
        versions={**VERSIONS, "triton": "3.4.0"},  # a GPU shard
    )
    both = merge([one, two])
    assert [r["nodeid"] for r in both.records] == ["tests/a/t.py::x", "tests/b/t.py::y"]
    assert both.versions == {**VERSIONS, "triton": "3.4.0"}
    assert both.collected.whole and not one.collected.whole
    assert both.collected.existing == {"tests/a/t.py::x", "tests/b/t.py::y"}
    assert both.path == f"{one.path}, {two.path}"


def test_a_test_in_two_shards_with_the_same_results_is_kept_as_a_rerun(tmp_path: Path) -> None:
    one = shard(tmp_path / "1.json", [record(breaks=1)], Scope(("tests/a",)))
    two = shard(tmp_path / "2.json", [record(breaks=1)], Scope(("tests/b",)))
    assert merge([one, two]).records == [*one.records, *two.records]


@pytest.mark.parametrize(
    ("change", "second"),
    [
        ({"breaks": 2}, "passed on cpu (graph_breaks 2, recompiles 0, fallbacks 0)"),
        ({"verdict": "failed"}, "failed on cpu (graph_breaks 1, recompiles 0, fallbacks 0)"),
    ],
)
def test_a_test_in_two_shards_with_different_results_is_an_error_naming_both(
    tmp_path: Path, change: dict[str, Any], second: str
) -> None:
    one = shard(tmp_path / "1.json", [record(breaks=1)], Scope(("tests/a",)))
    two = shard(tmp_path / "2.json", [record(**{"breaks": 1, **change})], Scope(("tests/b",)))
    with pytest.raises(ReportError) as error:
        merge([one, two])
    assert str(error.value) == (
        f"{ATTENTION} ran in two shards with different results: passed on cpu (graph_breaks 1,"
        f" recompiles 0, fallbacks 0) in {one.path}, {second} in {two.path}; a test belongs to"
        " one shard"
    )


def test_the_same_test_checked_against_different_budgets_is_an_error(tmp_path: Path) -> None:
    one = shard(tmp_path / "1.json", [record()], Scope(("tests/a",)))
    counts = one.records[0]["counts"]
    first = replace(one, verdicts={ATTENTION: check(Budget(1), counts)})
    second = replace(one, path="2.json", verdicts={ATTENTION: check(Budget(0), counts)})
    with pytest.raises(ReportError, match=r"budget improved against .* budget unchanged against"):
        merge([first, second])


@pytest.mark.parametrize(
    ("key", "other"), [("torch", "2.12.0"), ("python", "3.12.1"), ("pytest_torchcompile", "0.2.0")]
)
def test_shards_that_ran_other_software_are_refused(tmp_path: Path, key: str, other: str) -> None:
    one = shard(tmp_path / "1.json", [record("t::x")], Scope(("tests",)))
    two = shard(tmp_path / "2.json", [record("t::y")], Scope(("tests",)), {**VERSIONS, key: other})
    with pytest.raises(ReportError) as error:
        merge([one, two])
    assert str(error.value).startswith(
        f"{one.path} and {two.path} ran different {key} versions ({VERSIONS[key]} and {other}):"
    )


def test_shards_of_different_suites_are_refused(tmp_path: Path) -> None:
    one = shard(tmp_path / "1.json", [record("t::x")], Scope(("tests",)))
    two = shard(tmp_path / "2.json", [record("t::y")], Scope((".",)), suite=(".",))
    with pytest.raises(ReportError, match=r"collected different suites \(tests and \.\)"):
        merge([one, two])


def test_reports_that_cannot_be_read_are_errors_naming_the_file(tmp_path: Path) -> None:
    def problem(text: str) -> str:
        path = tmp_path / "r.json"
        path.write_text(text)
        with pytest.raises(ReportError) as error:
            read(path)
        return str(error.value).replace(str(path), "r.json")

    assert (
        problem('{"format": 1,')
        == "r.json:1:14: not valid JSON: Expecting property name enclosed in double quotes"
    )
    assert problem('{"format": 2}') == "r.json: not a --compile-report of format 1"
    document = json_report([record()], versions=VERSIONS, collected=Collected())
    del document["collection"]
    assert "does not say what its session collected" in problem(json.dumps(document))
    document = json_report([record()], versions=VERSIONS, collected=Collected())
    del document["tests"][ATTENTION]["device"]
    assert problem(json.dumps(document)) == (
        "r.json: not a --compile-report this version reads: KeyError('device')"
    )
    with pytest.raises(ReportError, match="cannot read the report"):
        read(tmp_path / "missing.json")


def test_report_paths_expands_patterns_sorted_once_each(tmp_path: Path) -> None:
    for name in ("b.json", "a.json", "sub/c.json"):
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_text("{}")
    found = report_paths([f"{tmp_path}/*.json", f"{tmp_path}/**/*.json", f"{tmp_path}/a.json"])
    assert found == [tmp_path / "a.json", tmp_path / "b.json", tmp_path / "sub/c.json"]
    with pytest.raises(ReportError, match=r"no report matches .*nothing-\*\.json"):
        report_paths([f"{tmp_path}/nothing-*.json"])
    with pytest.raises(ReportError, match="no reports to merge"):
        merge([])
