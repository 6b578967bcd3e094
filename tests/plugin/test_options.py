"""Options, ini keys and the marker: help, validation errors and precedence as a user meets them."""

from __future__ import annotations

import pytest

SHOW_SETTINGS = """
import pytest

@pytest.mark.compile_parity{marker}
def test_it(compile_parity):
    compile_parity(lambda x: x + 1, 1.0)
    s = compile_parity.settings
    seen = f"backend={{s.backend}}@{{s.source('backend')}} max_recompiles={{s.max_recompiles}}"
    assert seen == {expected!r}
"""


def test_help_shows_the_option_group(pytester):
    result = pytester.runpytest("--help")
    result.stdout.fnmatch_lines(
        [
            "torch.compile parity (pytest-torchcompile):",
            "*--compile-backend=BACKEND*",
            "*--compile-dynamic=DYNAMIC*",
            "*--compile-budgets-update*",
            "*compile_backend (string):*",
        ]
    )


def test_markers_lists_compile_parity(pytester):
    result = pytester.runpytest("--markers")
    result.stdout.fnmatch_lines(
        ["@pytest.mark.compile_parity(*, backend, mode, dynamic, fullgraph,*"]
    )


def test_unknown_backend_is_a_usage_error_listing_valid_ones(pytester):
    result = pytester.runpytest("--compile-backend=inductr")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            "*Invalid --compile-backend='inductr' from --compile-backend: unknown backend 'inductr'; "
            "registered backends: *aot_eager*inductor*"
        ]
    )


def test_bad_ini_value_names_the_ini_key(pytester):
    pytester.makeini("[pytest]\ncompile_dynamic = sometimes\n")
    result = pytester.runpytest()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["*Invalid dynamic='sometimes' from ini compile_dynamic*auto, true, false*"]
    )


def test_precedence_marker_over_command_line_over_ini(pytester):
    pytester.makeini("[pytest]\ncompile_backend = eager\ncompile_max_recompiles = 4\n")
    expected = "backend=eager@ini compile_backend max_recompiles=4"
    pytester.makepyfile(SHOW_SETTINGS.format(marker="", expected=expected))
    pytester.runpytest().assert_outcomes(passed=1)
    expected = "backend=aot_eager@--compile-backend max_recompiles=4"
    pytester.makepyfile(SHOW_SETTINGS.format(marker="", expected=expected))
    pytester.runpytest("--compile-backend=aot_eager").assert_outcomes(passed=1)
    expected = "backend=eager@marker on test_it max_recompiles=0"
    marker = "(backend='eager', max_recompiles=0)"
    pytester.makepyfile(SHOW_SETTINGS.format(marker=marker, expected=expected))
    pytester.runpytest("--compile-backend=aot_eager").assert_outcomes(passed=1)


def test_backend_named_as_module_attribute(pytester):
    pytester.makepyfile(
        """
        import pytest, torch

        @pytest.mark.compile_parity
        def test_it(compile_parity):
            compile_parity(lambda x: x * 2, torch.ones(3))
        """
    )
    pytester.runpytest("--compile-backend=planted:raise_when_compiled").assert_outcomes(failed=1)
    result = pytester.runpytest("--compile-backend=planted:missing")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*module 'planted' has no attribute 'missing'*"])


def test_marked_test_that_never_checks_fails(pytester):
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.compile_parity
        def test_forgot(compile_parity):
            pass

        @pytest.mark.compile_parity
        def test_no_fixture():
            pass
        """
    )
    result = pytester.runpytest("--compile-backend=eager")
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(
        ["*UnusedCheckerError*test_forgot is marked compile_parity but never checked*"]
    )


def test_parity_off_runs_a_property_test_s_examples_on_the_shared_fixture(pytester):
    """Under --compile-parity=off the fixture still serves every example of a @given test: the
    function-scoped-fixture health check is off for it, as when checks run."""
    pytester.makepyfile(
        """
        import pytest, torch
        from hypothesis import given, strategies as st

        @pytest.mark.compile_parity
        @given(x=st.floats(0, 1))
        def test_given(compile_parity, x):
            compile_parity(lambda t: t + 1, torch.tensor(x))
        """
    )
    pytester.runpytest("--compile-parity=off").assert_outcomes(passed=1)
