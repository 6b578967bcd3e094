"""The budget file: reading and refusing bad files, checking, merging, deterministic writing."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_torchcompile.counting import budgets, records
from pytest_torchcompile.counting.budgets import (
    IMPROVED_NOTE,
    Budget,
    BudgetFileError,
    Budgets,
    Collected,
    Scope,
    check,
    describe_update,
    dumps,
    failure,
    load,
    save,
    updated,
    verdicts,
    write_update,
)
from pytest_torchcompile.counting.records import CompileCounts
from pytest_torchcompile.errors import (
    EagerFallbackError,
    GraphBreakBudgetExceeded,
    RecompileLimitExceeded,
)

NODE = "tests/test_model.py::test_attention[cpu]"


def counts(breaks: int = 0, recompiles: int = 0, fallbacks: int = 0) -> CompileCounts:
    """Counts with numbered reasons and locations, so messages can be checked line by line."""
    return {
        "graphs": [],
        "graph_breaks": [
            {"reason": f"break {i}", "location": f"tests/models.py:{10 + i}"} for i in range(breaks)
        ],
        "recompiles": [
            {
                "frame": "forward (tests/models.py:5)",
                "reason": f"guard {i} failed",
                "category": "size",
            }
            for i in range(recompiles)
        ],
        "fallbacks": [
            {"frame": "helper (tests/models.py:40)", "kind": "skipped", "reason": f"skip {i}"}
            for i in range(fallbacks)
        ],
        "cudagraph_rerecords": [],
        "cudagraph_skips": [],
        "compile_time_s": 0.5,
    }


def record(
    nodeid: str = NODE,
    *,
    device: str = "cpu",
    verdict: str = "passed",
    breaks: int = 0,
    recompiles: int = 0,
    fallbacks: int = 0,
) -> records.ParityRecord:
    return {
        "nodeid": nodeid,
        "device": device,
        "backend": "inductor",
        "mode": "default",
        "dynamic": "auto",
        "verdict": verdict,
        "calls": 1,
        "counts": counts(breaks, recompiles, fallbacks),
        "largest_errors": [],
        "wall_time_s": 1.0,
    }


def test_the_file_format_is_sorted_indented_and_ends_with_a_newline() -> None:
    text = dumps(
        Budgets(
            {
                "tests/test_b.py::test_y": {"cuda:0": Budget(2, 1, 0), "cpu": Budget(1, 0, 0)},
                "tests/test_a.py::test_x[cpu]": {"cpu": Budget(0, 3, 0)},
            }
        )
    )
    assert text == (
        "{\n"
        '  "format": 1,\n'
        '  "tests": {\n'
        '    "tests/test_a.py::test_x[cpu]": {\n'
        '      "cpu": {\n'
        '        "fallbacks": 0,\n'
        '        "graph_breaks": 0,\n'
        '        "recompiles": 3\n'
        "      }\n"
        "    },\n"
        '    "tests/test_b.py::test_y": {\n'
        '      "cpu": {\n'
        '        "fallbacks": 0,\n'
        '        "graph_breaks": 1,\n'
        '        "recompiles": 0\n'
        "      },\n"
        '      "cuda:0": {\n'
        '        "fallbacks": 0,\n'
        '        "graph_breaks": 2,\n'
        '        "recompiles": 1\n'
        "      }\n"
        "    }\n"
        "  }\n"
        "}\n"
    )


def test_save_then_load_round_trips_with_unix_line_ends(tmp_path: Path) -> None:
    path = tmp_path / "compile-budgets.json"
    original = Budgets({NODE: {"cpu": Budget(1, 2, 0)}, "tests/t.py::ü[x]": {"cpu": Budget()}})
    save(path, original)
    assert load(path) == original
    assert path.read_bytes() == dumps(original).encode("utf-8")
    assert b"\r\n" not in path.read_bytes()
    assert [p.name for p in tmp_path.iterdir()] == ["compile-budgets.json"]  # no temp file left


def test_a_missing_file_is_empty_budgets(tmp_path: Path) -> None:
    assert load(tmp_path / "absent.json") == Budgets()
    assert Budgets().entry(NODE, "cpu") is None


def test_entry_looks_up_by_node_id_and_device() -> None:
    loaded = Budgets({NODE: {"cpu": Budget(1, 0, 0)}})
    assert loaded.entry(NODE, "cpu") == Budget(1, 0, 0)
    assert loaded.entry(NODE, "cuda:0") is None
    assert loaded.entry("tests/other.py::t", "cpu") is None


def _entry(**overrides: object) -> str:
    entry = {"graph_breaks": 1, "recompiles": 0, "fallbacks": 0, **overrides}
    return json.dumps({"format": 1, "tests": {NODE: {"cpu": entry}}})


WHERE = f'tests["{NODE}"]["cpu"]'
NOT_A_COUNT = "must be a non-negative integer"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"format": 1,\n "tests": {,}}', ":2:12: not valid JSON: Expecting property name"),
        ("", ":1:1: not valid JSON: Expecting value"),
        ("<<<<<<< HEAD\n", ":1:1: not valid JSON"),
        ("[1, 2]", "expected a JSON object at the top, got an array"),
        ('{"tests": {}}', 'no "format" field; this pytest-torchcompile writes "format": 1'),
        ('{"format": 2, "tests": {}}', "unknown format 2; this pytest-torchcompile reads format 1"),
        ('{"format": 2, "tests": {}}', "(upgrade pytest-torchcompile)"),
        ('{"format": "1", "tests": {}}', 'unknown format "1"'),
        ('{"format": true, "tests": {}}', "unknown format true"),
        ('{"format": 1.0, "tests": {}}', "unknown format 1.0"),
        ('{"format": 0, "tests": {}}', "(re-record with --compile-budgets-update)"),
        ('{"format": 1, "tests": {}, "test": {}}', 'unknown top-level key "test"'),
        ('{"format": 1}', 'no "tests" field'),
        ('{"format": 1, "tests": []}', "tests must be a JSON object, got an array"),
        (json.dumps({"format": 1, "tests": {NODE: 3}}), f'tests["{NODE}"] must be a JSON object'),
        (
            json.dumps({"format": 1, "tests": {NODE: {"cpu": None}}}),
            f"{WHERE} must be a JSON object, got null",
        ),
        (_entry(graph_break=1), f'{WHERE}: unknown key "graph_break"'),
        (
            json.dumps({"format": 1, "tests": {NODE: {"cpu": {"graph_breaks": 1}}}}),
            f'{WHERE}: no "recompiles"; an entry holds exactly graph_breaks, recompiles, fallbacks',
        ),
        (
            _entry(graph_breaks=-1),
            f'{WHERE}["graph_breaks"] {NOT_A_COUNT}, got -1',
        ),
        (_entry(recompiles=1.5), f'{WHERE}["recompiles"] {NOT_A_COUNT}, got 1.5'),
        (_entry(fallbacks=True), f'{WHERE}["fallbacks"] {NOT_A_COUNT}, got true'),
        (
            _entry(graph_breaks="2"),
            f'{WHERE}["graph_breaks"] {NOT_A_COUNT}, got "2"',
        ),
        ('{"format": 1, "tests": {}, "format": 1}', 'the key "format" appears twice in one object'),
    ],
)
def test_a_malformed_file_is_an_error_naming_the_file_and_the_problem(
    tmp_path: Path, text: str, expected: str
) -> None:
    path = tmp_path / "compile-budgets.json"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(BudgetFileError) as info:
        load(path)
    message = str(info.value)
    assert message.startswith(str(path))
    assert expected in message


def test_an_unreadable_file_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "budgets.json").mkdir()
    with pytest.raises(BudgetFileError, match="cannot read the budget file"):
        load(tmp_path / "budgets.json")
    (tmp_path / "latin1.json").write_bytes(b'{"format": 1, "tests": {"t\xe9": {}}}')
    with pytest.raises(BudgetFileError, match=r"latin1\.json: cannot read"):
        load(tmp_path / "latin1.json")


def test_budget_file_errors_are_value_errors() -> None:
    assert issubclass(BudgetFileError, ValueError)


# --- check ---


def test_no_entry_is_unrecorded() -> None:
    verdict = check(None, counts(breaks=2))
    assert (verdict.status, verdict.budget, verdict.counts) == ("unrecorded", None, Budget(2, 0, 0))
    assert verdict.message == verdict.changes() == ""


def test_equal_counts_are_unchanged() -> None:
    verdict = check(Budget(2, 1, 0), counts(breaks=2, recompiles=1))
    assert verdict.status == "unchanged"
    assert verdict.message == verdict.changes() == ""
    assert verdict.grown == verdict.shrunk == ()


def test_fewer_breaks_pass_with_a_note_to_lower_the_budget() -> None:
    verdict = check(Budget(3, 2, 0), counts(breaks=1, recompiles=2))
    assert verdict.status == "improved"
    assert verdict.shrunk == ("graph_breaks",)
    assert verdict.message == f"graph_breaks 3 -> 1 ({IMPROVED_NOTE})"
    assert IMPROVED_NOTE == "improved: lower the budget with --compile-budgets-update"


def test_a_new_break_fails_showing_old_and_new_counts_and_every_break_with_its_location() -> None:
    verdict = check(Budget(1, 0, 0), counts(breaks=2), source="ci/budgets.json")
    assert verdict.status == "regressed"
    assert verdict.grown == ("graph_breaks",)
    assert verdict.changes() == "graph_breaks 1 -> 2"
    assert verdict.message.splitlines() == [
        "compile budget exceeded (ci/budgets.json): recorded -> now",
        "  graph_breaks  1 -> 2  (+1)",
        "  recompiles    0 -> 0",
        "  fallbacks     0 -> 0",
        "graph breaks now (2):",
        "  1. tests/models.py:10: break 0",
        "  2. tests/models.py:11: break 1",
        "If the growth is intended, record it with --compile-budgets-update.",
    ]


def test_a_regression_wins_over_an_improvement_and_lists_only_what_grew() -> None:
    verdict = check(Budget(3, 0, 0), counts(breaks=1, recompiles=1, fallbacks=1))
    assert verdict.status == "regressed"
    assert verdict.grown == ("recompiles", "fallbacks")
    assert verdict.shrunk == ("graph_breaks",)
    assert verdict.changes() == "graph_breaks 3 -> 1, recompiles 0 -> 1, fallbacks 0 -> 1"
    lines = verdict.message.splitlines()
    assert "compile budget exceeded (the budget file): recorded -> now" in lines
    assert "recompiles now (1):" in lines
    assert "  1. [size] forward (tests/models.py:5): guard 0 failed" in lines
    assert "fallbacks now (1):" in lines
    assert "  1. [skipped] helper (tests/models.py:40): skip 0" in lines
    assert "graph breaks now (1):" not in lines


def test_a_break_without_a_location_says_so() -> None:
    now = counts(breaks=1)
    now["graph_breaks"][0]["location"] = ""
    assert "  1. <unknown location>: break 0" in check(Budget(), now).message.splitlines()


@pytest.mark.parametrize(
    ("now", "error"),
    [
        (counts(breaks=2), GraphBreakBudgetExceeded),
        (counts(recompiles=1), RecompileLimitExceeded),
        (counts(fallbacks=1), EagerFallbackError),
        (counts(breaks=2, recompiles=1), GraphBreakBudgetExceeded),
        (counts(breaks=2, fallbacks=1), EagerFallbackError),  # no parity was shown at all
    ],
)
def test_a_regression_fails_as_the_most_serious_count_that_grew(
    now: CompileCounts, error: type[AssertionError]
) -> None:
    verdict = check(Budget(1, 0, 0), now)
    raised = failure(verdict)
    assert type(raised) is error
    assert str(raised) == verdict.message


def test_verdicts_for_a_session_take_each_test_on_its_device() -> None:
    file = Budgets({NODE: {"cpu": Budget(2)}, "tests/t.py::z": {"cuda:0": Budget(1)}})
    run = [record(breaks=1), record("tests/t.py::z", device="cpu"), record("tests/t.py::new")]
    found = verdicts(file, run, source="b.json")
    assert {node: v.status for node, v in found.items()} == {
        NODE: "improved",
        "tests/t.py::z": "unrecorded",  # recorded on cuda:0 only
        "tests/t.py::new": "unrecorded",
    }


# --- updated ---


def test_a_partial_run_replaces_what_ran_and_keeps_the_rest() -> None:
    old = Budgets({NODE: {"cpu": Budget(3, 1, 0)}, "tests/t.py::other": {"cpu": Budget(1, 0, 0)}})
    new = updated(old, [record(breaks=1)], whole_suite=False)
    assert new.tests == {NODE: {"cpu": Budget(1, 0, 0)}, "tests/t.py::other": {"cpu": Budget(1)}}
    assert old.tests[NODE]["cpu"] == Budget(3, 1, 0)  # the input is not modified


def test_the_whole_suite_drops_entries_of_deleted_tests_only() -> None:
    old = Budgets(
        {
            NODE: {"cpu": Budget(3)},
            "tests/t.py::deleted": {"cpu": Budget(1)},
            "tests/t.py::skipped_here[cuda:0]": {"cuda:0": Budget(2)},
            "tests/t.py::failed": {"cpu": Budget(4)},
        }
    )
    new = updated(
        old,
        [record(), record("tests/t.py::failed", verdict="failed", breaks=9)],
        whole_suite=True,
        existing=["tests/t.py::skipped_here[cuda:0]", NODE],
    )
    assert new.tests == {
        NODE: {"cpu": Budget()},
        "tests/t.py::skipped_here[cuda:0]": {"cuda:0": Budget(2)},
        "tests/t.py::failed": {"cpu": Budget(4)},  # a failed run's counts may be partial
    }


def test_the_whole_suite_keeps_entries_it_cannot_judge() -> None:
    old = Budgets(
        {
            "tests/t.py::gone_from_cpu": {"cpu": Budget(1), "cuda:0": Budget(2)},
            "tests/gpu.py::needs_triton": {"cpu": Budget(3)},
            "tests/gpu/test_x.py::also_skipped": {"cpu": Budget(4)},
        }
    )
    new = updated(old, [record()], whole_suite=True, uncollected=["tests/gpu.py", "tests/gpu"])
    assert new.tests == {
        NODE: {"cpu": Budget()},
        "tests/t.py::gone_from_cpu": {"cuda:0": Budget(2)},  # this run used no cuda:0
        "tests/gpu.py::needs_triton": {"cpu": Budget(3)},  # its module was skipped
        "tests/gpu/test_x.py::also_skipped": {"cpu": Budget(4)},  # so was its directory
    }
    assert updated(old, [], whole_suite=True).tests == old.tests  # no device used, none judged


def test_describe_update_counts_entries_by_how_they_moved() -> None:
    old = Budgets({"a": {"cpu": Budget(2)}, "b": {"cpu": Budget(0, 1)}, "c": {"cpu": Budget(1)}})
    new = Budgets({"a": {"cpu": Budget(1)}, "b": {"cpu": Budget(1, 0)}, "d": {"cpu": Budget()}})
    assert describe_update(old, new) == "1 lowered, 1 raised, 1 added, 1 removed"
    assert describe_update(old, old) == "no change"


def test_only_passed_tests_are_recorded() -> None:
    run = [
        record("tests/t.py::f", verdict="failed", breaks=1),
        record("tests/t.py::s", verdict="skipped"),
        record("tests/t.py::p", breaks=2),
    ]
    assert updated(Budgets(), run, whole_suite=True).tests == {"tests/t.py::p": {"cpu": Budget(2)}}


def test_entries_for_other_devices_survive_a_whole_suite_update() -> None:
    old = Budgets({"tests/t.py::any_device": {"cuda:0": Budget(1, 1, 0), "cpu": Budget(5)}})
    new = updated(old, [record("tests/t.py::any_device", breaks=2)], whole_suite=True)
    assert new.tests == {"tests/t.py::any_device": {"cuda:0": Budget(1, 1, 0), "cpu": Budget(2)}}


def test_a_test_reported_twice_gets_the_larger_of_each_count() -> None:
    run = [record(breaks=2, recompiles=0), record(breaks=1, recompiles=3)]
    assert updated(Budgets(), run, whole_suite=False).entry(NODE, "cpu") == Budget(2, 3, 0)


RUN = [
    record("tests/test_b.py::test_y[cpu]", breaks=1),
    record("tests/test_b.py::test_y[cpu]", recompiles=2),
    record("tests/test_a.py::test_x[cpu]", recompiles=1, fallbacks=1),
    record("tests/test_a.py::test_z", device="cuda:0", breaks=3),
    record("tests/test_a.py::test_z", device="cpu", breaks=2),
    record("tests/test_c.py::test_failing", verdict="failed", breaks=7),
    record("tests/test_c.py::test_new", breaks=4),
]
OLD = Budgets(
    {
        "tests/test_c.py::test_failing": {"cpu": Budget(1)},
        "tests/test_a.py::test_x[cpu]": {"cpu": Budget(0, 5, 1)},
        "tests/test_gone.py::test_gone": {"cpu": Budget(1)},
    }
)


@given(order=st.permutations(RUN), whole_suite=st.booleans())
def test_the_written_file_does_not_depend_on_the_order_records_arrive(
    order: list[records.ParityRecord], whole_suite: bool
) -> None:
    # What -n 2 must guarantee: workers finish in any order, the controller writes the same bytes.
    assert dumps(updated(OLD, order, whole_suite=whole_suite)) == dumps(
        updated(OLD, RUN, whole_suite=whole_suite)
    )


def test_the_merged_budgets_for_the_run_above() -> None:
    assert updated(OLD, RUN, whole_suite=True).tests == {
        "tests/test_a.py::test_x[cpu]": {"cpu": Budget(0, 1, 1)},
        "tests/test_a.py::test_z": {"cpu": Budget(2, 0, 0), "cuda:0": Budget(3, 0, 0)},
        "tests/test_b.py::test_y[cpu]": {"cpu": Budget(1, 2, 0)},
        "tests/test_c.py::test_failing": {"cpu": Budget(1, 0, 0)},
        "tests/test_c.py::test_new": {"cpu": Budget(4, 0, 0)},
    }


def test_the_ratchet_scenario(tmp_path: Path) -> None:
    """Record, regress, improve, lower: the CI story of the issue, through the file."""
    path = tmp_path / "compile-budgets.json"
    save(path, updated(load(path), [record(breaks=2)], whole_suite=True))
    assert check(load(path).entry(NODE, "cpu"), counts(breaks=3)).status == "regressed"
    assert check(load(path).entry(NODE, "cpu"), counts(breaks=0)).status == "improved"
    save(path, updated(load(path), [record(breaks=0)], whole_suite=False))
    assert load(path).entry(NODE, "cpu") == Budget(0, 0, 0)
    assert check(load(path).entry(NODE, "cpu"), counts(breaks=0)).status == "unchanged"


def test_write_update_writes_the_merged_file_and_says_what_moved_and_why(tmp_path: Path) -> None:
    path = tmp_path / "b.json"
    old = Budgets({NODE: {"cpu": Budget(2)}, "tests/t.py::gone": {"cpu": Budget(1)}})
    run = [record(breaks=1)]
    whole = write_update(path, old, run, Collected(scopes=(Scope((".",)),)), name="ci/b.json")
    assert whole == (
        "ci/b.json: 1 lowered, 1 removed (the whole suite was collected, so entries of deleted"
        " tests were removed)"
    )
    assert load(path) == updated(old, run, whole_suite=True)
    part = write_update(path, old, run, Collected(), name="b.json")
    assert part.endswith(
        "1 lowered (part of the suite was collected, so entries of other tests were kept)"
    )
    assert load(path) == updated(old, run, whole_suite=False)


def test_importing_the_module_imports_neither_torch_nor_pytest() -> None:
    code = (
        f"import sys, {budgets.__name__}; "
        "assert not {'torch', 'pytest'} & set(sys.modules), sorted(sys.modules)"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
