"""dynamic_dims: a bug that only a graph with symbolic sizes shows is caught on the first call, and
size_probes drives one compiled function through sizes 0, 1 and a general one."""

from __future__ import annotations

ONE_CALL = """
import pytest, torch

@pytest.mark.compile_parity
def test_one_call(compile_parity):
    x = torch.randn(5, 4)
    compile_parity(lambda t: t.sin() * 2, x)
    assert not hasattr(x, "_dynamo_dynamic_indices")  # the caller's tensor keeps no mark
"""


def test_a_bug_of_symbolic_graphs_is_caught_on_the_first_call_with_marks_only(
    pytester, caught_only_with
):
    # Without marks, automatic dynamic shapes compile a first call static, so one call never
    # reaches the symbolic graph the planted backend gets wrong.
    pytester.makepyfile(ONE_CALL)
    result = caught_only_with("wrong_for_dynamic_shapes", "--compile-dynamic-dims=backed")
    result.stdout.fnmatch_lines(["*ParityError*", "*dynamic_dims=backed*"])


def test_the_marker_overrides_the_ini_key(pytester):
    pytester.makeini("[pytest]\ncompile_dynamic_dims = unbacked\n")
    pytester.makepyfile(
        ONE_CALL.replace(
            "@pytest.mark.compile_parity", "@pytest.mark.compile_parity(dynamic_dims='off')"
        )
    )
    result = pytester.runpytest("--compile-backend=planted:wrong_for_dynamic_shapes")
    result.assert_outcomes(passed=1)
    pytester.makepyfile(ONE_CALL)
    result = pytester.runpytest("--compile-backend=planted:wrong_for_dynamic_shapes")
    result.assert_outcomes(failed=1)


def test_a_bad_marker_value_is_a_collection_error_saying_where(pytester):
    pytester.makepyfile(
        ONE_CALL.replace(
            "@pytest.mark.compile_parity", "@pytest.mark.compile_parity(dynamic_dims='sometimes')"
        )
    )
    result = pytester.runpytest("--compile-backend=aot_eager")
    result.stdout.fnmatch_lines(
        ["*Invalid dynamic_dims='sometimes' from marker on test_one_call: expected off, backed*"]
    )
    assert result.ret != 0


def test_marking_a_dimension_the_program_specializes_says_how_to_fix_it(pytester):
    pytester.makepyfile(
        """
        import pytest, torch

        @pytest.mark.compile_parity(dynamic_dims="backed")
        def test_all_dims(compile_parity):
            compile_parity(torch.nn.Linear(4, 3), torch.randn(5, 4))

        @pytest.mark.compile_parity(dynamic_dims="backed:0")
        def test_batch_dim(compile_parity):
            compile_parity(torch.nn.Linear(4, 3), torch.randn(5, 4))
        """
    )
    result = pytester.runpytest("--compile-backend=aot_eager")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*SettingError: Invalid dynamic_dims='backed' from marker on test_all_dims: the "
            "program specializes a dimension it marks dynamic*constant (4)*",
            "*Mark only the dimensions that vary (e.g. backed:0*",
        ]
    )


PROBES = """
import pytest, torch
from hypothesis import given
from pytest_torchcompile import strategies as tcst

@pytest.mark.compile_parity
@given(sizes=tcst.size_probes(max_dims=1))
def test_probes(compile_parity, sizes):
    for shape in sizes:
        compile_parity(lambda t: torch.softmax(t, -1) * 2, torch.randn(shape))
"""


def test_unbacked_sizes_run_the_symbolic_graph_at_one_and_catch_its_bug(hypothesis_pytester):
    # Backed marks leave sizes 0 and 1 graphs of their own (the right ones); unbacked marks run
    # the one symbolic graph for them, which the planted backend gets wrong at size 1.
    hypothesis_pytester.makepyfile(PROBES)
    args = (
        "--compile-backend=planted:wrong_for_size_one_when_symbolic",
        "--hypothesis-profile=parity-few",
    )
    hypothesis_pytester.runpytest(*args, "--compile-dynamic-dims=backed:0").assert_outcomes(
        passed=1
    )
    result = hypothesis_pytester.runpytest(*args, "--compile-dynamic-dims=unbacked")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*ParityError*", "*sizes=((2,), (1,), (0,)),*"])


def test_recompiles_between_the_probed_sizes_are_counted(pytester):
    pytester.makepyfile(
        """
        import pytest, torch

        def run(compile_parity):
            for shape in ((5, 3), (1, 3), (0, 3)):
                result = compile_parity(lambda t: torch.softmax(t, -1), torch.randn(shape))
            return result

        @pytest.mark.compile_parity(dynamic_dims="backed:0")
        def test_backed(compile_parity):
            # a symbolic graph guarded 2 <= size, then one graph each for 1 and 0
            assert run(compile_parity).recompiles == 2

        @pytest.mark.compile_parity(dynamic_dims="unbacked:0")
        def test_unbacked(compile_parity):
            result = run(compile_parity)  # one graph for every size
            assert (result.graphs, result.recompiles) == (1, 0)

        @pytest.mark.compile_parity(dynamic_dims="backed:0", max_recompiles=1)
        def test_budget(compile_parity):
            run(compile_parity)
        """
    )
    result = pytester.runpytest("--compile-backend=aot_eager")
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(
        ["*RecompileLimitExceeded*2 recompiles, over the budget max_recompiles=1*"]
    )
