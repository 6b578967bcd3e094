"""@given with compile_parity: one compile cache for all examples, the recompile limit, deadlines,
health checks, counts over every example, and layouts kept on the device."""

from __future__ import annotations

import json
import re

SIZES = """
import pytest, torch
from hypothesis import given, strategies as st


def double(t):
    return t * 2


@pytest.mark.compile_parity({marker})
@given(n=st.integers(1, 30))
def test_sizes(compile_parity, n):
    with open("examples.txt", "a") as examples:
        examples.write(f"{{n}}\\n")
    compile_parity(double, torch.ones(n))
"""

CI = "--hypothesis-profile=parity-ci"  # the same examples every run (see conftest.py)
# How Hypothesis names the failing example it reports: the wording changed in later versions.
HYPOTHESIS_SUMMARY = r"Falsifying example:|Failing test case:"

FRESH_CACHE = (
    "*recompile limit (torch._dynamo.config.recompile_limit=8) hit after 7 recompiles at checker "
    "call *: started a fresh compile cache; {verdict}"
)


def _record(pytester, nodeid):
    report = json.loads((pytester.path / "report.json").read_text())
    return report["tests"][nodeid]


def test_the_recompile_limit_starts_a_fresh_cache_and_says_so(hypothesis_pytester):
    # dynamic=False: each new size is a recompile, so 30 sizes hit the limit of 8 three times.
    hypothesis_pytester.makepyfile(SIZES.format(marker="dynamic=False"))
    result = hypothesis_pytester.runpytest(
        "--compile-backend=eager", "--compile-report=report.json", "-rP", CI
    )
    result.assert_outcomes(passed=1)
    verdict = "no max_recompiles budget is set, so recompiles do not fail the test"
    result.stdout.fnmatch_lines(
        ["*notes (3):", f"  1. {FRESH_CACHE.format(verdict=verdict)}", "  2. *", "  3. *"]
    )
    result.stdout.no_fnmatch_line("*eagerly*")
    # The counts cover every example: all calls, every recompile, no eager fallback.
    examples = (hypothesis_pytester.path / "examples.txt").read_text().split()
    nodeid = "test_the_recompile_limit_starts_a_fresh_cache_and_says_so.py::test_sizes"
    record = _record(hypothesis_pytester, nodeid)
    assert record["calls"] == len(examples) > 24
    assert record["counts"]["fallbacks"] == 0
    assert record["counts"]["recompiles"] > 2 * 7  # counted across the three caches
    result.stdout.fnmatch_lines([f"passed on cpu after {len(examples)} checker call(s):*"])


def test_with_a_recompile_budget_the_budget_judges_all_examples(hypothesis_pytester):
    hypothesis_pytester.makepyfile(SIZES.format(marker="dynamic=False, max_recompiles=20"))
    result = hypothesis_pytester.runpytest("--compile-backend=eager", CI)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "E   *RecompileLimitExceeded: 2? recompiles, over the budget max_recompiles=20 "
            "(from marker on test_sizes):",
            "notes (3):",
            "  1. "
            + FRESH_CACHE.format(
                verdict="max_recompiles=20 (from marker on test_sizes) judges the recompiles "
                "of all examples"
            ),
        ]
    )
    # The verdict comes after the last example, so Hypothesis has nothing to shrink.
    assert not re.search(HYPOTHESIS_SUMMARY, result.stdout.str())


def test_a_budget_that_holds_passes(hypothesis_pytester):
    hypothesis_pytester.makepyfile(SIZES.format(marker="dynamic=False, max_recompiles=40"))
    result = hypothesis_pytester.runpytest("--compile-backend=eager", CI)
    result.assert_outcomes(passed=1)


def test_outside_hypothesis_the_recompile_limit_still_fails(pytester):
    pytester.makepyfile(
        """
        import pytest, torch

        def double(t):
            return t * 2

        @pytest.mark.compile_parity(dynamic=False)
        def test_sizes(compile_parity):
            for n in range(1, 12):
                compile_parity(double, torch.ones(n))
        """
    )
    result = pytester.runpytest("--compile-backend=eager")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        ["E   *RecompileLimitExceeded: Dynamo hit its recompile limit, so this call would have*"]
    )
    result.stdout.no_fnmatch_line("*fresh compile cache*")


def test_slow_compiles_meet_no_deadline_and_no_health_check(hypothesis_pytester):
    # Each compile takes 0.3 s, over Hypothesis's 200 ms deadline; the fixture is function-scoped.
    hypothesis_pytester.makepyfile(
        """
        import pytest, torch
        from hypothesis import given, settings, strategies as st

        @pytest.mark.compile_parity(dynamic=False)
        @settings(max_examples=5)
        @given(n=st.integers(1, 100))
        def test_slow(compile_parity, n):
            compile_parity(lambda t: t + 1, torch.ones(n))
        """
    )
    result = hypothesis_pytester.runpytest(
        "--compile-backend=planted:slow_compile", "--compile-report=report.json", CI
    )
    result.assert_outcomes(passed=1)
    nodeid = "test_slow_compiles_meet_no_deadline_and_no_health_check.py::test_slow"
    assert _record(hypothesis_pytester, nodeid)["calls"] == 5  # the test's own settings hold


def test_a_failing_example_is_shrunk_but_not_explained(hypothesis_pytester):
    # The explain phase re-runs the shrunk failure ~100 times per argument under a line tracer.
    hypothesis_pytester.makepyfile(
        """
        import pytest, torch
        from hypothesis import given, strategies as st

        @pytest.mark.compile_parity
        @given(n=st.integers(1, 4), m=st.integers(1, 4))
        def test_wrong(compile_parity, n, m):
            compile_parity(lambda t: t + 1, torch.ones(n, m))
        """
    )
    result = hypothesis_pytester.runpytest(
        "--compile-backend=planted:corrupt_output", "--hypothesis-show-statistics", CI
    )
    result.assert_outcomes(failed=1)
    text = result.stdout.str()
    assert "during shrink phase" in text
    assert "explain phase" not in text and "any other generated value" not in text


def test_inputs_reach_the_compiled_side_with_their_layout(hypothesis_pytester):
    hypothesis_pytester.makepyfile(
        """
        import pytest, torch
        from hypothesis import given, settings, strategies as st
        from pytest_torchcompile import strategies as tcst

        def layout(t):
            return t + 0, t.stride(), t.storage_offset()

        @pytest.mark.compile_parity
        @settings(max_examples=40)
        @given(data=st.data())
        def test_layout(compile_parity, device, data):
            x = data.draw(tcst.tensors(device=device))
            result = compile_parity(layout, x)
            assert result.compiled[1:] == (x.stride(), x.storage_offset())
        """
    )
    result = hypothesis_pytester.runpytest("--compile-backend=aot_eager", CI)
    outcomes = result.parseoutcomes()  # cuda:N is skipped where there is no GPU
    assert outcomes["passed"] >= 1 and "failed" not in outcomes
