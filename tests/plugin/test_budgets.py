"""The budget file end to end: record, regress, improve, lower; the same under xdist; bad files."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch

ON_A_GPU = pytest.mark.skipif(
    torch.cuda.is_available(), reason="counts the skipped [cuda] case of a CPU-only machine (CI)"
)

BUDGETS = "compile-budgets.json"
BREAK = "    torch._dynamo.graph_break()"

# A model whose graph breaks the scenario adds and removes, a test with a recompile, and a steady
# one. The model runs on every device, so its node ids carry [cpu] (and a skipped [cuda] here).
SUITE = """
import pytest
import torch


def model(x):
    x = x + 1
{breaks}
    return x.sin()


def steady(x):
    return torch.relu(x) * 2


@pytest.mark.compile_parity(backend="aot_eager")
def test_model(compile_parity, device):
    compile_parity(model, torch.randn(4, device=device))


@pytest.mark.compile_parity(backend="aot_eager", dynamic="false")
def test_recompiles(compile_parity):
    compile_parity(steady, torch.randn(3))
    compile_parity(steady, torch.randn(5))


@pytest.mark.compile_parity(backend="aot_eager")
def test_steady(compile_parity):
    compile_parity(steady, torch.randn(3))
"""


def suite(breaks: int) -> str:
    """The suite with `breaks` graph breaks in the model, each on a line of its own."""
    lines = [f"    x = x * {i + 2}\n{BREAK}" for i in range(breaks)]
    return SUITE.format(breaks="\n".join(lines))


def line_of_break(path: Path, number: int) -> int:
    """The line (1-based) of the model's `number`-th graph break in the written file."""
    lines = path.read_text().splitlines()
    return [i for i, text in enumerate(lines, 1) if text == BREAK][number - 1]


@dataclass
class Step:
    outcomes: dict[str, int]
    verdicts: list[str]  # the summary's REGRESSED/IMPROVED lines
    budget_file: bytes
    output: pytest.RunResult


Runner = Callable[..., pytest.RunResult]


def ratchet(pytester: pytest.Pytester, run: Runner, *extra: str) -> list[Step]:
    """The issue's scenario: record at 2 breaks; 3 fails; 1 passes and says to lower; update."""
    plan = [(2, True), (3, False), (1, False), (1, True)]
    steps = []
    for breaks, update in plan:
        pytester.makepyfile(test_suite=suite(breaks))
        args = [f"--compile-budgets={BUDGETS}", *extra]
        result = run(*args, "--compile-budgets-update") if update else run(*args)
        lines = result.outlines
        steps.append(
            Step(
                outcomes={k: n for k, n in result.parseoutcomes().items() if k != "warnings"},
                verdicts=[line for line in lines if line.startswith(("REGRESSED", "IMPROVED"))],
                budget_file=(pytester.path / BUDGETS).read_bytes(),
                output=result,
            )
        )
    return steps


def entries(step: Step) -> dict[str, dict[str, int]]:
    tests = json.loads(step.budget_file)["tests"]
    return {node: devices["cpu"] for node, devices in tests.items()}


@ON_A_GPU
def test_the_ratchet_records_fails_a_new_break_says_to_lower_and_lowers(
    pytester: pytest.Pytester,
) -> None:
    record, regress, improve, lower = ratchet(pytester, pytester.runpytest)

    assert record.outcomes == {"passed": 3, "skipped": 1}
    assert entries(record) == {
        "test_suite.py::test_model[cpu]": {"fallbacks": 0, "graph_breaks": 2, "recompiles": 0},
        "test_suite.py::test_recompiles": {"fallbacks": 0, "graph_breaks": 0, "recompiles": 1},
        "test_suite.py::test_steady": {"fallbacks": 0, "graph_breaks": 0, "recompiles": 0},
    }
    record.output.stdout.fnmatch_lines(["compile budgets updated: compile-budgets.json: 3 added *"])

    # A third break fails the model's test, with the old and new counts and where the new one is.
    assert regress.outcomes == {"failed": 1, "passed": 2, "skipped": 1}
    new_break = line_of_break(pytester.makepyfile(laid_out_as_run=suite(3)), 3)
    regress.output.stdout.fnmatch_lines(
        [
            "*GraphBreakBudgetExceeded: compile budget exceeded (compile-budgets.json):*",
            "*graph_breaks  2 -> 3  (+1)",
            "*recompiles    0 -> 0",
            "*graph breaks now (3):",
            f"*3. test_suite.py:{new_break}: Call to `torch._dynamo.graph_break()`*",
            "FAILED test_suite.py::test_model[[]cpu[]] - *GraphBreak*",
        ]
    )
    assert regress.verdicts == ["REGRESSED test_suite.py::test_model[cpu] - graph_breaks 2 -> 3"]
    assert regress.budget_file == record.budget_file  # checking never writes

    # Two breaks fewer pass, and the summary says to lower the budget.
    assert improve.outcomes == {"passed": 3, "skipped": 1}
    assert improve.verdicts == [
        "IMPROVED test_suite.py::test_model[cpu] - graph_breaks 2 -> 1 "
        "(improved: lower the budget with --compile-budgets-update)"
    ]

    # Updating writes the lower number and nothing else moves.
    lowered = entries(record)
    lowered["test_suite.py::test_model[cpu]"]["graph_breaks"] = 1
    assert entries(lower) == lowered
    lower.output.stdout.fnmatch_lines(
        [
            "compile budgets updated: compile-budgets.json: 1 lowered (the whole suite was"
            " collected, so entries of deleted tests were removed)"
        ]
    )

    # From then on CI is quiet: nothing moved, so no torch.compile section.
    steady = pytester.runpytest(f"--compile-budgets={BUDGETS}")
    assert steady.ret == pytest.ExitCode.OK
    assert "torch.compile" not in steady.stdout.str()


@ON_A_GPU
def test_the_ratchet_under_xdist_writes_the_same_bytes_and_reaches_the_same_verdicts(
    pytester: pytest.Pytester,
) -> None:
    serial = ratchet(pytester, pytester.runpytest)
    (pytester.path / BUDGETS).unlink()
    distributed = ratchet(pytester, pytester.runpytest_subprocess, "-n", "2")

    for one, two in zip(serial, distributed, strict=True):
        assert two.budget_file == one.budget_file
        assert two.outcomes == one.outcomes
        assert two.verdicts == one.verdicts
    assert distributed[1].output.ret == pytest.ExitCode.TESTS_FAILED
    distributed[1].output.stdout.fnmatch_lines(
        ["*GraphBreakBudgetExceeded: compile budget exceeded*", "*graph_breaks  2 -> 3  (+1)"]
    )


def write_budgets(pytester: pytest.Pytester, tests: dict[str, dict[str, dict[str, int]]]) -> None:
    full = {
        node: {device: {"fallbacks": 0, "graph_breaks": 0, "recompiles": 0, **counts}}
        for node, entry in tests.items()
        for device, counts in entry.items()
    }
    (pytester.path / BUDGETS).write_text(json.dumps({"format": 1, "tests": full}))


def test_recompiles_above_the_file_fail_and_unrecorded_tests_follow_their_markers(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(
        test_mixed="""
        import pytest
        import torch

        def relu(x):
            return x.relu()

        def breaking(x):
            x = x + 1
            torch._dynamo.graph_break()
            return x * 2

        @pytest.mark.compile_parity(backend="eager", dynamic="false")
        def test_recorded(compile_parity):
            for n in (2, 3, 4):
                compile_parity(relu, torch.randn(n))

        @pytest.mark.compile_parity(backend="eager", max_graph_breaks=0)
        def test_new_with_a_limit(compile_parity):
            compile_parity(breaking, torch.randn(3))

        @pytest.mark.compile_parity(backend="eager")
        def test_new_without(compile_parity):
            compile_parity(breaking, torch.randn(3))
        """
    )
    write_budgets(pytester, {"test_mixed.py::test_recorded": {"cpu": {"recompiles": 1}}})
    result = pytester.runpytest(f"--compile-budgets={BUDGETS}")
    result.assert_outcomes(passed=1, failed=2)
    result.stdout.fnmatch_lines(
        [
            "*_ test_recorded _*",
            "E   *RecompileLimitExceeded: compile budget exceeded (compile-budgets.json)*",
            "*recompiles    1 -> 2  (+1)",
            "*recompiles now (2):",
            "*1. [[]size[]] relu (test_mixed.py:*",
            "*_ test_new_with_a_limit _*",
            "E   *GraphBreakBudgetExceeded: *max_graph_breaks=0*marker*",
        ]
    )
    result.stdout.fnmatch_lines(
        [
            "REGRESSED test_mixed.py::test_recorded - recompiles 1 -> 2",
            "unrecorded: 2 test(s) without a budget entry (record them with"
            " --compile-budgets-update):",
            "  test_mixed.py::test_new_with_a_limit",
            "  test_mixed.py::test_new_without",
        ]
    )


def test_two_breaks_on_one_line_count_two_in_a_budget_and_in_the_file(
    pytester: pytest.Pytester,
) -> None:
    """Breaks are events: Dynamo breaks at the first print, then its continuation at the second."""
    pytester.makepyfile(
        test_one_line="""
        import pytest
        import torch

        def model(x):
            x = x + 1
            print("a"); x = x * 2; print("b")
            return x - 1

        @pytest.mark.compile_parity(backend="eager", max_graph_breaks=1)
        def test_budget(compile_parity):
            compile_parity(model, torch.randn(4))

        @pytest.mark.compile_parity(backend="eager")
        def test_recorded(compile_parity):
            compile_parity(model, torch.randn(4))
        """
    )
    result = pytester.runpytest(f"--compile-budgets={BUDGETS}", "--compile-budgets-update")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "E   *GraphBreakBudgetExceeded: 2 graph breaks, over the budget max_graph_breaks=1 "
            "(from marker on *test_budget*",
            "      1. test_one_line.py:6: Failed to trace builtin operator*",
            "      2. test_one_line.py:6: Failed to trace builtin operator*",
        ]
    )
    tests = json.loads((pytester.path / BUDGETS).read_text())["tests"]
    assert tests["test_one_line.py::test_recorded"]["cpu"]["graph_breaks"] == 2


def test_an_update_keeps_what_it_cannot_see_and_drops_deleted_tests(
    pytester: pytest.Pytester,
) -> None:
    test_a = """
        import pytest
        import torch

        @pytest.mark.compile_parity(backend="eager")
        def test_keep(compile_parity):
            compile_parity(torch.sin, torch.randn(3))
        """
    pytester.makepyfile(
        test_a=test_a,
        test_b="""
        import pytest
        import torch

        @pytest.mark.compile_parity(backend="eager")
        def test_other(compile_parity):
            compile_parity(torch.cos, torch.randn(3))
        """,
        test_optional="""
        import pytest
        pytest.importorskip("a_module_nobody_installed")
        """,
    )
    write_budgets(
        pytester,
        {
            "test_a.py::test_keep": {"cpu": {"graph_breaks": 5}},
            "test_a.py::test_deleted": {"cpu": {"graph_breaks": 1}},
            "test_a.py::test_on_a_gpu[cuda:0]": {"cuda:0": {"recompiles": 2}},
            "test_b.py::test_other": {"cpu": {"graph_breaks": 7}},
            "test_optional.py::test_needs_it": {"cpu": {"graph_breaks": 3}},
        },
    )

    # The whole suite is collected, though -k runs one test: only the deleted test's entry goes;
    # the deselected test, the test on a device this machine lacks and the test in a module
    # skipped at collection keep theirs.
    result = pytester.runpytest(
        f"--compile-budgets={BUDGETS}", "--compile-budgets-update", "-k", "keep"
    )
    result.assert_outcomes(passed=1, deselected=1, skipped=1)
    result.stdout.fnmatch_lines(
        ["compile budgets updated: *: 1 lowered, 1 removed (the whole suite*"]
    )
    tests = json.loads((pytester.path / BUDGETS).read_text())["tests"]
    assert sorted(tests) == [
        "test_a.py::test_keep",
        "test_a.py::test_on_a_gpu[cuda:0]",
        "test_b.py::test_other",
        "test_optional.py::test_needs_it",
    ]
    assert tests["test_a.py::test_keep"]["cpu"]["graph_breaks"] == 0
    assert tests["test_b.py::test_other"]["cpu"]["graph_breaks"] == 7

    # A run narrowed to a path keeps every other entry, even of a test that is gone by now; and
    # in update mode a grown count is recorded rather than failed.
    (pytester.path / "test_b.py").unlink()
    pytester.makepyfile(
        test_a=test_a.replace("torch.sin, ", "lambda x: torch._dynamo.graph_break() or x.sin(), ")
    )
    result = pytester.runpytest(
        "test_a.py", f"--compile-budgets={BUDGETS}", "--compile-budgets-update"
    )
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["compile budgets updated: *: 1 raised (part of the suite*"])
    tests = json.loads((pytester.path / BUDGETS).read_text())["tests"]
    assert tests["test_a.py::test_keep"]["cpu"]["graph_breaks"] == 1
    assert "test_b.py::test_other" in tests

    # A module that fails to collect may hide any test, so none is judged deleted (test_b's
    # entry stays though test_b.py is gone).
    pytester.makepyfile(test_broken="import a_module_nobody_installed")
    before = (pytester.path / BUDGETS).read_bytes()
    result = pytester.runpytest(
        f"--compile-budgets={BUDGETS}",
        "--compile-budgets-update",
        "--continue-on-collection-errors",
    )
    result.assert_outcomes(passed=1, skipped=1, errors=1)
    result.stdout.fnmatch_lines(["compile budgets updated: *: no change (part of the suite*"])
    assert (pytester.path / BUDGETS).read_bytes() == before


def test_the_whole_suite_is_known_from_the_paths_collected_less_the_ignored_ones(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makeini("[pytest]\ntestpaths = tests\n")
    test = """
        import pytest, torch

        @pytest.mark.compile_parity(backend="eager")
        def test_{name}(compile_parity):
            compile_parity(torch.sin, torch.randn(3))
        """
    pytester.mkdir("tests")
    pytester.mkdir("tests/a")
    pytester.makepyfile(**{"tests/a/test_a": test.format(name="a")})
    pytester.makepyfile(**{"tests/test_top": test.format(name="top")})
    entries = {
        "tests/a/test_a.py::test_a": {"cpu": {}},
        "tests/test_top.py::test_top": {"cpu": {}},
        "tests/test_top.py::test_deleted": {"cpu": {}},
    }
    write_budgets(pytester, entries)
    budget_file = str(pytester.path / BUDGETS)

    def update(*args: str) -> list[str]:
        result = pytester.runpytest(
            f"--compile-budgets={budget_file}", "--compile-budgets-update", *args
        )
        assert result.ret == pytest.ExitCode.OK
        return sorted(json.loads((pytester.path / BUDGETS).read_text())["tests"])

    # From a subdirectory pytest collects that directory only: the test above it is not deleted.
    with monkeypatch.context() as inside:
        inside.chdir(pytester.path / "tests" / "a")
        assert update() == sorted(entries)
    assert update("tests", "--ignore=tests/a") == sorted(entries)  # all but tests/a
    # Naming the testpaths is the whole suite, as a plain `pytest` is.
    assert update("tests") == ["tests/a/test_a.py::test_a", "tests/test_top.py::test_top"]


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        ('{"format": 1, "tests": {', "*compile-budgets.json:1:25: not valid JSON: *"),
        ('{"format": 2, "tests": {}}', "*compile-budgets.json: unknown format 2; *reads format 1*"),
        (
            '{"format": 1, "tests": {"t.py::t": {"cpu": {"graph_breaks": -1, "recompiles": 0,'
            ' "fallbacks": 0}}}}',
            "*compile-budgets.json: *must be a non-negative integer, got -1",
        ),
    ],
)
def test_a_bad_budget_file_is_a_usage_error_naming_the_file_and_the_problem(
    pytester: pytest.Pytester, content: str, problem: str
) -> None:
    (pytester.path / BUDGETS).write_text(content)
    for update in ((), ("--compile-budgets-update",)):  # never overwritten either
        result = pytester.runpytest(f"--compile-budgets={BUDGETS}", *update)
        assert result.ret == pytest.ExitCode.USAGE_ERROR
        result.stderr.fnmatch_lines([f"ERROR: Invalid --compile-budgets file: {problem}"])
        assert (pytester.path / BUDGETS).read_text() == content


def test_a_budget_path_in_the_ini_file_is_relative_to_that_file(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makeini("[pytest]\ncompile_budgets = ci/budgets.json\n")
    (pytester.path / "ci").mkdir()
    monkeypatch.chdir(pytester.mkdir("elsewhere"))
    result = pytester.runpytest("--compile-budgets-update")
    assert result.ret == pytest.ExitCode.NO_TESTS_COLLECTED
    assert json.loads((pytester.path / "ci" / "budgets.json").read_text()) == {
        "format": 1,
        "tests": {},
    }


def test_updating_needs_a_budget_file(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--compile-budgets-update")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: --compile-budgets-update needs a budget file: *"])
