"""A bad or conflicting compile_parity marker is an error of the test that carries it, at its
setup: the other tests run, and a run that deselects it is clean."""

from __future__ import annotations

import pytest

CONFLICT = """
import pytest, torch

@pytest.mark.compile_parity(compiled_autograd=True)
def test_conflict(compile_parity):
    compile_parity(torch.nn.Linear(3, 2), torch.randn(4, 3))

@pytest.mark.compile_parity
def test_fine(compile_parity):
    compile_parity(torch.nn.Linear(3, 2), torch.randn(4, 3))

def test_plain():
    assert True
"""


def test_a_marker_conflict_is_that_tests_error_and_the_others_run(pytester):
    pytester.makepyfile(CONFLICT)
    result = pytester.runpytest("--compile-backend=export")
    result.assert_outcomes(passed=2, errors=1)
    result.stdout.fnmatch_lines(
        [
            "*ERROR at setup of test_conflict*",
            "*Invalid compiled_autograd=True from marker on test_conflict: backend=export "
            "(from --compile-backend) exports the whole program*",
        ]
    )
    result.stdout.no_fnmatch_line("*Interrupted*")
    result.stdout.no_fnmatch_line("*ERROR collecting*")


def test_a_deselected_marker_conflict_leaves_the_run_clean(pytester):
    pytester.makepyfile(CONFLICT)
    result = pytester.runpytest("--compile-backend=export", "-k", "not test_conflict")
    result.assert_outcomes(passed=2, deselected=1)
    assert result.ret == pytest.ExitCode.OK


@pytest.mark.parametrize(
    ("marker", "message"),
    [
        (
            "(max_graph_breaks=-2)",
            "*Invalid max_graph_breaks=-2 from marker on test_it: expected a non-negative integer*",
        ),
        (
            "(budget=3)",
            "*Unknown compile_parity setting(s) budget from marker on test_it; valid keys: backend, mode,*",
        ),
        (
            "('eager')",
            "*compile_parity marker on test_it takes keyword arguments only*valid keys: backend*",
        ),
    ],
)
def test_a_bad_marker_is_an_error_naming_the_test_and_keys(pytester, marker, message):
    pytester.makepyfile(
        f"""
        import pytest

        @pytest.mark.compile_parity{marker}
        def test_it(compile_parity):
            compile_parity(lambda x: x + 1, 1.0)

        def test_other():
            pass
        """
    )
    result = pytester.runpytest("--compile-backend=eager")
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(["*ERROR at setup of test_it*", message])


def test_a_bad_devices_marker_errors_each_device_of_the_test(pytester):
    """The `device` parametrization reads the marker too: there the session's devices stand in,
    and each of the test's items carries the marker's error."""
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.compile_parity(devices=["cuda:x"])
        def test_it(compile_parity, device):
            compile_parity(lambda x: x + 1, 1.0)

        def test_other():
            pass
        """
    )
    result = pytester.runpytest("--compile-backend=eager")
    outcomes = result.parseoutcomes()
    assert outcomes["passed"] == 1 and outcomes["errors"] >= 1 and "failed" not in outcomes
    result.stdout.fnmatch_lines(
        [
            "*ERROR at setup of test_it[[]cpu[]]*",
            "*Invalid devices=?'cuda:x'? from marker on test_it*",
        ]
    )
    result.stdout.no_fnmatch_line("*ERROR collecting*")
