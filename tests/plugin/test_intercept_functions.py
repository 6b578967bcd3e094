"""--compile-parity-functions: an unmodified test's calls of a library's functions are checked."""

from __future__ import annotations

import json

import pytest

from pytest_torchcompile.running.shared_compiles import SharedCompiles

LIBRARY = """
import torch

def inner(x):
    return x * 2

def scale(x, k=3.0):
    return inner(x) * k

def outer(x):
    return scale(x).sin()

def positive_log(x):
    if (x <= 0).any():
        raise ValueError("positive inputs only")
    return x.log()

class _Twice(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, grad):
        return grad * 2

twice = _Twice.apply

class Config:
    pass
"""

SUITE = """
import pytest, torch
import fnlib.ops
from fnlib.ops import scale, positive_log

def test_forward():
    assert fnlib.ops.outer(torch.ones(3)).shape == (3,)

def test_gradient():
    x = torch.randn(4, requires_grad=True)
    scale(x).sum().backward()
    assert torch.equal(x.grad, torch.full((4,), 6.0))

def test_bad_input():
    with pytest.raises(ValueError, match="positive"):
        positive_log(-torch.ones(2))

def test_no_call():
    assert fnlib.ops.Config() is not None
"""


@pytest.fixture
def suite(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makepyfile(**{"fnlib/__init__.py": "", "fnlib/ops.py": LIBRARY, "test_suite": SUITE})
    return pytester


def _run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest(
        "--compile-parity=all", "--compile-parity-functions=fnlib", "-p", "no:cacheprovider", *args
    )


@pytest.mark.parametrize("backend", ["aot_eager", "none"])
def test_a_correct_backend_passes_and_checks_each_outermost_function_call(suite, backend):
    result = _run(suite, f"--compile-backend={backend}")
    result.assert_outcomes(passed=4)
    result.stdout.fnmatch_lines(
        [
            "*intercepted function calls in 3 test(s): 2 checked, 0 diverged, 0 checked partly, "
            "1 skipped",
            "*1 call(s) in test_suite.py::test_forward: fnlib.ops.outer",
            "*1 call(s) in test_suite.py::test_gradient: fnlib.ops.scale",
            "*functions wrapped or called: 6 in 1 package(s)",
            "*intercepted tests: 4: 2 with a call checked, 0 whose calls were all checked earlier "
            "in the session, 2 reached no check at all",
        ]
    )


def test_a_wrong_forward_is_caught_through_a_function_call(suite):
    result = _run(suite, "--compile-backend=planted:corrupt_output", "-k", "forward")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*ParityError: 1 intercepted function call(s) diverged*",
            "*function call 1 (fnlib.ops.outer), differing at output:*",
            "*repro: python *repro.py*",
        ]
    )


def test_a_wrong_gradient_is_caught_by_the_replays_backward(suite):
    result = _run(suite, "--compile-backend=planted:corrupt_gradient", "-k", "gradient")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*function call 1 (fnlib.ops.scale), differing at grad of input*"])


def test_calls_inside_a_checked_function_are_not_checked_again(suite):
    result = _run(suite, "--compile-backend=planted:corrupt_output", "-k", "forward")
    result.stdout.fnmatch_lines(["*1 intercepted function call(s) diverged*"])
    result.stdout.no_fnmatch_line("*function call 2*")
    passing = _run(suite, "--compile-backend=aot_eager", "-k", "forward")
    passing.stdout.fnmatch_lines(
        [
            "*package  diverged  checked  checked partly  inside checked  skipped  never called*",
            "*fnlib           0        1               0               2        0             1*",
        ]
    )


def test_the_tests_own_pytest_raises_still_sees_the_error(suite):
    result = _run(suite, "--compile-backend=planted:corrupt_output", "-k", "bad_input")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        ["*fnlib.ops.positive_log: 1 call(s) the call raised ValueError: not replayed"]
    )


def test_names_are_the_originals_after_the_session_and_outside_intercepted_tests(pytester):
    pytester.makepyfile(**{"fnlib/__init__.py": "", "fnlib/ops.py": LIBRARY})
    pytester.makeconftest(
        """
        import sys

        def pytest_sessionfinish(session):
            ops, test = sys.modules["fnlib.ops"], sys.modules["test_identity"]
            kept = test.ORIGINAL is ops.scale is test.scale and not hasattr(ops.scale, "__wrapped__")
            session.config.stash_identity = kept
            print(f"IDENTITY KEPT: {kept}")
        """
    )
    pytester.makepyfile(
        test_identity="""
        import torch
        import fnlib.ops
        from fnlib.ops import scale

        ORIGINAL = scale

        def test_wrapped_consistently():
            assert scale is fnlib.ops.scale and scale.__name__ == "scale"
            assert scale(torch.ones(2)).tolist() == [6.0, 6.0]

        def test_fixture_user_sees_the_original(compile_parity):
            assert scale is ORIGINAL and not hasattr(scale, "__wrapped__")
        """
    )
    result = _run(pytester, "--compile-backend=aot_eager", "-s")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["*IDENTITY KEPT: True*"])


def test_a_function_that_is_not_plain_python_is_listed_not_wrapped(suite):
    result = _run(suite, "--compile-backend=aot_eager", "-k", "no_call")
    result.stdout.fnmatch_lines(
        [
            "never called functions (4):",
            "not wrapped functions (2):",
            "  fnlib.ops.Config: not a plain Python function: a class",
            "  fnlib.ops._Twice.apply: not a plain Python function: "
            "torch.autograd.Function.apply of _Twice",
        ]
    )


def test_include_and_exclude_take_function_names(suite):
    excluded = _run(
        suite, "--compile-backend=planted:corrupt_output", "--compile-parity-exclude=outer"
    )
    excluded.assert_outcomes(failed=1, passed=3)  # scale, in test_gradient, is still checked
    excluded.stdout.fnmatch_lines(["*fnlib.ops.outer: matched by --compile-parity-exclude"])
    included = _run(
        suite, "--compile-backend=planted:corrupt_output", "--compile-parity-include=fnlib.ops.out*"
    )
    included.assert_outcomes(failed=1, passed=3)
    included.stdout.fnmatch_lines(["*fnlib.ops.scale: not matched by --compile-parity-include"])


def test_the_marker_key_turns_it_on_for_one_marked_test(suite):
    suite.makepyfile(
        test_marked="""
        import pytest, torch
        from fnlib.ops import scale

        @pytest.mark.compile_parity(parity_functions="fnlib")
        def test_marked():
            scale(torch.ones(3))
        """
    )
    result = suite.runpytest("--compile-backend=planted:corrupt_output", "test_marked.py")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*function call 1 (fnlib.ops.scale)*"])


def test_a_package_that_cannot_be_imported_fails_the_test_saying_so(suite):
    result = suite.runpytest(
        "--compile-parity=all", "--compile-parity-functions=no_such_lib", "-k", "forward"
    )
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        ["*Invalid parity_functions='no_such_lib' from --compile-parity-functions: cannot import*"]
    )


def test_the_json_report_has_the_function_rows(suite, tmp_path):
    report = tmp_path / "report.json"
    _run(suite, "--compile-backend=aot_eager", f"--compile-report={report}")
    coverage = json.loads(report.read_text())["coverage"]
    assert coverage["functions"]["fnlib.ops.scale"]["status"] == "checked"
    assert coverage["functions"]["fnlib.ops.inner"]["status"] == "inside checked"
    assert coverage["functions"]["fnlib.ops.positive_log"]["status"] == "skipped"
    assert coverage["functions"]["fnlib.ops.Config"]["status"] == "not wrapped"
    assert coverage["function_packages"]["fnlib"]["checked"] == 2
    assert coverage["tests_reached"] == {"checked": 2, "checked earlier": 0, "none": 2}


def test_a_function_passes_on_inductor(suite):
    _run(suite, "--compile-backend=inductor", "-k", "gradient").assert_outcomes(passed=1)


def test_torchscript_compiles_the_original_function(suite):
    suite.makepyfile(
        test_script="""
        import torch
        from fnlib.ops import inner

        def test_script():
            assert torch.jit.script(inner)(torch.ones(2)).tolist() == [2.0, 2.0]
        """
    )
    _run(suite, "--compile-backend=aot_eager", "test_script.py").assert_outcomes(passed=1)


needs_regions = pytest.mark.skipif(
    not SharedCompiles.available(),
    reason="this torch has no isolate_recompiles: each test compiles afresh",
)


def _sizes_suite(pytester: pytest.Pytester, sizes: list[int]) -> None:
    """One test per size, each calling `outer` once on a tensor of that size."""
    pytester.makepyfile(
        **{
            "fnlib/__init__.py": "",
            "fnlib/ops.py": LIBRARY,
            "test_suite": f"""
import pytest, torch
from fnlib.ops import outer

@pytest.mark.parametrize("n", {sizes})
def test_sizes(n):
    assert outer(torch.ones(n)).shape == (n,)
""",
        }
    )


@needs_regions
def test_shared_a_function_is_compiled_once_for_the_session(pytester):
    _sizes_suite(pytester, [2, 3, 5])
    result = _run(
        pytester,
        "--compile-backend=aot_eager",
        "--compile-report=r.json",
        "--compile-parity-shared",
    )
    result.assert_outcomes(passed=3)
    tests = json.loads((pytester.path / "r.json").read_text())["tests"]
    checks = [tests[node]["costs"].get("checks") for node in sorted(tests)]
    assert checks == [
        {"compiled static": 1},
        {"compiled dynamic": 1},
        {"reused a compile": 1},
    ]


@needs_regions
def test_a_function_divergence_on_a_reused_graph_names_the_function_not_a_class(pytester):
    _sizes_suite(pytester, [16, 32, 5])
    # 16 compiles a static graph, 32 a dynamic one (both right: numel a multiple of 16); 5 reuses
    # the dynamic graph, whose remainder loop is wrong
    result = _run(
        pytester,
        "--compile-backend=planted:wrong_tail_unless_multiple_of_16",
        "--compile-parity-shared",
    )
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*(the compiled side reused graphs compiled for an earlier call of this function in "
            "the session (--compile-parity-shared kept it; without it each test compiles afresh))"
        ]
    )
    result.stdout.no_fnmatch_line("*this class*")
