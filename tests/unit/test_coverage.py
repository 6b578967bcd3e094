"""The class coverage table of --compile-parity=all, from the tests' coverage records."""

from __future__ import annotations

from pytest_torchcompile.counting import coverage
from pytest_torchcompile.counting.records import CoverageRecord, ModuleCallRecord


def _call(module: str, outcome: str, reason: str = "", calls: int = 1) -> ModuleCallRecord:
    return ModuleCallRecord(module=module, outcome=outcome, reason=reason, calls=calls)


RECORDS = [
    CoverageRecord(
        nodeid="t.py::test_model",
        constructed=["lib.Model", "lib.Mean", "torch.nn.Linear", "lib.Prior"],
        calls=[_call("lib.Model", "checked")],
        inside_checked=["lib.Mean", "torch.nn.Linear"],
    ),
    CoverageRecord(
        nodeid="t.py::test_kernel",
        constructed=["lib.Kernel", "lib.Likelihood"],
        calls=[
            _call("lib.Kernel", "diverged", "output"),
            _call("lib.Likelihood", "skipped", "output: cannot compare a Opaque", 2),
        ],
        inside_checked=[],
    ),
]


def test_each_class_gets_one_status() -> None:
    found = coverage.classes(RECORDS)
    assert {name: entry.status for name, entry in found.items()} == {
        "lib.Model": "checked",
        "lib.Mean": "inside checked",
        "torch.nn.Linear": "inside checked",
        "lib.Prior": "never reached",
        "lib.Kernel": "diverged",
        "lib.Likelihood": "skipped",
    }
    assert found["lib.Likelihood"].skipped == {"output: cannot compare a Opaque": 2}


def test_packages_count_their_classes_by_status() -> None:
    table = coverage.packages(coverage.classes(RECORDS))
    assert table["lib"] == {
        "diverged": 1,
        "checked": 1,
        "checked partly": 0,
        "inside checked": 1,
        "skipped": 1,
        "never reached": 1,
    }
    assert table["torch"]["inside checked"] == 1


def test_the_summary_names_what_was_not_checked() -> None:
    lines = coverage.summary_lines(RECORDS)
    assert lines[0] == "module classes constructed or called: 6 in 2 package(s)"
    assert "skipped classes (1):" in lines
    assert "  lib.Likelihood: 2 call(s) output: cannot compare a Opaque" in lines
    assert "  lib.Prior (constructed in 1 test(s); no check called it or held it)" in lines
    assert not any("none of its" in line for line in lines)


def test_a_package_with_nothing_checked_is_called_out() -> None:
    only_built = [
        CoverageRecord(nodeid="t.py::t", constructed=["gp.A", "gp.B"], calls=[], inside_checked=[])
    ]
    assert "gp: none of its 2 module classes was cross-checked" in coverage.summary_lines(
        only_built
    )
    assert coverage.summary_lines([]) == []


def test_the_json_coverage_lists_every_class() -> None:
    document = coverage.json_coverage(RECORDS)
    assert document["classes"]["lib.Kernel"] == {
        "status": "diverged",
        "checked_calls": 0,
        "partly_calls": 0,
        "diverged_calls": 1,
        "skipped_calls": {},
        "tests": 1,
    }
    assert set(document["packages"]) == {"lib", "torch"}


def test_a_class_whose_calls_had_leaves_not_judged_is_checked_partly() -> None:
    record = CoverageRecord(
        nodeid="t.py::test_flow",
        constructed=["lib.Flow"],
        calls=[_call("lib.Flow", "checked partly", "not judged (the control): output[1]", 3)],
        inside_checked=[],
    )
    (entry,) = coverage.classes([record]).values()
    assert entry.status == "checked partly" and entry.partly == 3
    lines = coverage.summary_lines([record])
    assert "checked partly classes (1):" in lines
    assert "  lib.Flow: 3 call(s) with leaves the checker could not judge" in lines
    assert not any("none of its" in line for line in lines)
    # A class with a fully checked call is checked, whatever its other calls.
    both = [record, {**record, "calls": [_call("lib.Flow", "checked")]}]
    assert coverage.classes(both)["lib.Flow"].status == "checked"  # type: ignore[arg-type]


def test_functions_get_their_own_rows_and_the_tests_that_reached_no_check_are_counted() -> None:
    function_call = {**_call("fn.ops.blur", "checked"), "kind": "function"}
    repeated = {
        **_call("fn.ops.blur", "skipped", "already checked in this session and ..."),
        "kind": "function",
    }
    records = [
        CoverageRecord(
            nodeid="t.py::test_blur",
            constructed=[],
            calls=[function_call],  # type: ignore[list-item]
            inside_checked=[],
            inside_checked_functions=["fn.ops.kernel"],
            functions=["fn.ops.blur", "fn.ops.kernel", "fn.ops.unused"],
            unwrapped={"fn.ops.Grid": "not a plain Python function: a class"},
        ),
        CoverageRecord(
            nodeid="t.py::test_again",
            constructed=[],
            calls=[repeated],  # type: ignore[list-item]
            inside_checked=[],
        ),
        CoverageRecord(nodeid="t.py::test_none", constructed=[], calls=[], inside_checked=[]),
    ]
    assert coverage.classes(records) == {}
    assert {n: e.status for n, e in coverage.functions(records).items()} == {
        "fn.ops.blur": "checked",
        "fn.ops.kernel": "inside checked",
        "fn.ops.unused": "never called",
        "fn.ops.Grid": "not wrapped",
    }
    assert coverage.tests_reached(records) == (1, 1, 1)
    lines = coverage.summary_lines(records)
    assert lines[0] == "functions wrapped or called: 4 in 1 package(s)"
    assert "  fn.ops.Grid: not a plain Python function: a class" in lines
    assert lines[-1] == (
        "intercepted tests: 3: 1 with a call checked, 1 whose calls were all checked earlier in "
        "the session, 1 reached no check at all"
    )
    document = coverage.json_coverage(records)
    assert document["functions"]["fn.ops.Grid"]["not_wrapped"].startswith("not a plain")
    assert document["function_packages"]["fn"]["never called"] == 1
