"""--compile-parity=all: unmodified tests' module calls are cross-checked, and nothing else changes."""

from __future__ import annotations

import json

import pytest

SUITE = """
import pytest, torch

class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(4, 8)
        self.bn = torch.nn.BatchNorm1d(8)
        self.b = torch.nn.Linear(8, 2)

    def forward(self, x):
        return self.b(torch.relu(self.bn(self.a(x))))

def test_train_step():
    torch.manual_seed(0)
    model = Net()
    out = model(torch.randn(5, 4))
    out.sum().backward()  # the test's own autograd graph is intact
    assert model.a.weight.grad is not None
    assert int(model.bn.num_batches_tracked) == 1

def test_eval_no_grad():
    model = Net().eval()
    with torch.no_grad():
        assert model(torch.randn(3, 4)).shape == (3, 2)
"""


def _run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest("--compile-parity=all", "-p", "no:cacheprovider", *args)


def test_a_correct_backend_passes_and_checks_every_outermost_call(pytester):
    pytester.makepyfile(test_suite=SUITE)
    result = _run(pytester, "--compile-backend=aot_eager")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(
        [
            "*intercepted module calls in 2 test(s): 2 checked, 0 diverged, 0 checked partly, 0 skipped",
            "*2 call(s) in 2 tests: test_suite.Net",
        ]
    )


def test_a_wrong_output_fails_naming_the_class_the_call_and_the_leaf(pytester):
    pytester.makepyfile(test_suite=SUITE)
    result = _run(pytester, "--compile-backend=planted:corrupt_output")
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(
        [
            "*ParityError: 1 intercepted module call(s) diverged*",
            "*module call 1 (test_suite.Net), differing at output:*",
            "*output: values are not close*",
        ]
    )


def test_a_wrong_gradient_is_caught_by_the_replays_backward(pytester):
    pytester.makepyfile(test_suite=SUITE)
    result = _run(pytester, "--compile-backend=planted:corrupt_gradient", "-k", "train")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*module call 1 (test_suite.Net), differing at *grad of*"])


def test_a_skipped_buffer_update_is_caught(pytester):
    pytester.makepyfile(test_suite=SUITE)
    result = _run(pytester, "--compile-backend=planted:skip_buffer_update", "-k", "train")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*differing at *buffer 'bn.running_mean'*"])


def test_the_test_sees_its_own_results_rng_and_exceptions_unchanged(pytester):
    pytester.makepyfile(
        """
        import pytest, torch
        import torch.nn.functional as F

        def test_unchanged():
            model = torch.nn.Dropout(0.5).train()
            x = torch.ones(64)
            torch.manual_seed(0)
            y, after = model(x), torch.rand(4)
            torch.manual_seed(0)
            assert torch.equal(y, F.dropout(x, 0.5, True))
            assert torch.equal(after, torch.rand(4))
            with pytest.raises(RuntimeError):
                torch.nn.Linear(3, 3)(torch.ones(2, 4))
        """
    )
    result = _run(pytester, "--compile-backend=aot_eager", "-rA")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        ["*checked 1 call(s) of torch.nn.modules.dropout.Dropout", "*the call raised RuntimeError*"]
    )


def test_a_divergence_fails_after_the_body_even_if_the_test_catches_everything(pytester):
    pytester.makepyfile(
        """
        import torch

        def test_catches():
            try:
                torch.nn.Linear(3, 3)(torch.ones(2, 3))
            except Exception:
                pass
        """
    )
    result = _run(pytester, "--compile-backend=planted:corrupt_output")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*module call 1 (torch.nn.modules.linear.Linear)*"])


def test_calls_under_no_grad_and_inference_mode_are_checked(pytester):
    pytester.makepyfile(
        """
        import torch

        def test_modes():
            model = torch.nn.Linear(3, 3)
            with torch.no_grad():
                model(torch.ones(2, 3))
            with torch.inference_mode():
                model(torch.ones(2, 3))
            model(torch.ones(2, 3))
        """
    )
    result = _run(pytester, "--compile-backend=aot_eager")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*3 checked, 0 diverged, 0 checked partly, 0 skipped"])
    every = _run(
        pytester, "--compile-backend=planted:corrupt_output", "--compile-parity-every-call"
    )
    every.stdout.fnmatch_lines(["*3 intercepted module call(s) diverged*"])
    # Without it, the test fails on the first; the class's later calls change no verdict.
    first = _run(pytester, "--compile-backend=planted:corrupt_output", "-rA")
    first.assert_outcomes(failed=1)
    first.stdout.fnmatch_lines(
        [
            "*1 intercepted module call(s) diverged*",
            "*already diverged in this test: its later calls change no verdict*",
        ]
    )


def test_a_module_that_cannot_be_copied_is_skipped_with_the_reason(pytester):
    pytester.makepyfile(
        """
        import threading, torch

        class Locked(torch.nn.Linear):
            def __init__(self):
                super().__init__(2, 2)
                self.lock = threading.Lock()

        def test_locked():
            assert Locked()(torch.ones(1, 2)).shape == (1, 2)
        """
    )
    result = _run(pytester, "--compile-backend=planted:corrupt_output")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        ["*skipped*test_locked*Locked: cannot snapshot the call: UncopyableInputError*'lock'*"]
    )


def test_include_and_exclude_select_classes_by_pattern(pytester):
    pytester.makepyfile(test_suite=SUITE)
    excluded = _run(
        pytester, "--compile-backend=planted:corrupt_output", "--compile-parity-exclude=Net"
    )
    excluded.assert_outcomes(passed=2)
    excluded.stdout.fnmatch_lines(["*test_suite.Net: matched by --compile-parity-exclude"])
    included = _run(
        pytester, "--compile-backend=planted:corrupt_output", "--compile-parity-include=torch.nn.*"
    )
    included.assert_outcomes(passed=2)
    included.stdout.fnmatch_lines(["*test_suite.Net: not matched by --compile-parity-include"])


def test_a_signature_checked_once_is_not_checked_again_unless_every_call(pytester):
    pytester.makepyfile(
        """
        import torch

        def test_loop():
            model = torch.nn.Linear(3, 3)
            for _ in range(3):
                model(torch.ones(2, 3))
            model(torch.ones(5, 3))
        """
    )
    once = _run(pytester, "--compile-backend=aot_eager")
    once.stdout.fnmatch_lines(
        ["*2 checked, 0 diverged, 0 checked partly, 2 skipped", "*already checked*"]
    )
    every = _run(pytester, "--compile-backend=aot_eager", "--compile-parity-every-call")
    every.stdout.fnmatch_lines(["*4 checked, 0 diverged, 0 checked partly, 0 skipped"])


def test_marked_test_without_the_fixture_is_intercepted(pytester):
    pytester.makepyfile(
        """
        import pytest, torch

        @pytest.mark.compile_parity
        def test_marked():
            torch.nn.Linear(3, 3)(torch.ones(2, 3))

        @pytest.mark.compile_parity
        def test_marked_but_nothing_to_check():
            assert 1 + 1 == 2

        def test_unmarked():
            torch.nn.Linear(3, 3)(torch.ones(2, 3))
        """
    )
    result = pytester.runpytest("--compile-backend=planted:corrupt_output")
    result.assert_outcomes(passed=1, failed=2)
    result.stdout.fnmatch_lines(
        [
            "*test_marked_but_nothing_to_check is marked compile_parity but neither called the "
            "compile_parity fixture nor made any nn.Module call to intercept*",
            "FAILED*::test_marked - *",
        ]
    )


def test_off_turns_every_check_off_and_the_fixture_runs_eagerly(pytester):
    pytester.makepyfile(
        """
        import pytest, torch

        @pytest.mark.compile_parity
        def test_fixture(compile_parity):
            result = compile_parity(torch.nn.Linear(3, 3), torch.ones(2, 3))
            assert result.eager is result.compiled

        @pytest.mark.compile_parity
        def test_marked_without_calls():
            pass
        """
    )
    result = pytester.runpytest("--compile-parity=off", "--compile-backend=planted:corrupt_output")
    result.assert_outcomes(passed=2)
    result.stdout.no_fnmatch_line("*torch.compile*")


def test_a_test_that_compiles_on_its_own_is_left_alone(pytester):
    pytester.makepyfile(
        """
        import torch

        def test_compiles():
            compiled = torch.compile(torch.nn.Linear(3, 3), backend="eager")
            compiled(torch.ones(2, 3))
        """
    )
    result = _run(pytester, "--compile-backend=planted:corrupt_output")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*OptimizedModule: compiled by the test itself*"])


def test_bad_pattern_option_is_a_usage_error(pytester):
    result = pytester.runpytest("--compile-parity=sometimes")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*Invalid --compile-parity='sometimes'*marked, all, off*"])


@pytest.mark.usefixtures("planted_in_subprocesses")
def test_the_summary_survives_xdist(pytester):
    pytest.importorskip("xdist")
    pytester.makepyfile(test_suite=SUITE)
    result = pytester.runpytest_subprocess(
        "--compile-parity=all", "--compile-backend=planted:corrupt_output", "-n", "2"
    )
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(
        [
            "*intercepted module calls in 2 test(s): 0 checked, 2 diverged, 0 checked partly, 0 skipped"
        ]
    )


def test_the_json_report_lists_module_calls_and_validates(pytester):
    pytester.makepyfile(
        """
        import pytest, torch

        def test_skipped_only():
            with pytest.raises(RuntimeError):
                torch.nn.Linear(3, 3)(torch.ones(2, 4))

        def test_checked():
            torch.nn.Linear(3, 3)(torch.ones(2, 3))
        """
    )
    from tests.plugin.test_report import REPORT, load_report

    result = _run(pytester, "--compile-backend=aot_eager", f"--compile-report={REPORT}")
    result.assert_outcomes(passed=2)
    tests = load_report(pytester)["tests"]  # validated against the schema
    skipped = tests["test_the_json_report_lists_module_calls_and_validates.py::test_skipped_only"]
    assert skipped["device"] == "none"
    assert [c["outcome"] for c in skipped["module_calls"]] == ["skipped"]
    checked = tests["test_the_json_report_lists_module_calls_and_validates.py::test_checked"]
    assert checked["module_calls"] == [
        {"module": "torch.nn.modules.linear.Linear", "outcome": "checked", "reason": "", "calls": 1}
    ]


def test_cuda_calls_are_checked(pytester):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device is visible")
    pytester.makepyfile(
        test_suite=SUITE.replace("Net()", "Net().cuda()")
        .replace("torch.randn(5, 4)", "torch.randn(5, 4, device='cuda')")
        .replace("torch.randn(3, 4)", "torch.randn(3, 4, device='cuda')")
    )
    _run(pytester, "--compile-backend=inductor").assert_outcomes(passed=2)
    failed = _run(pytester, "--compile-backend=planted:corrupt_output")
    failed.assert_outcomes(failed=2)
    failed.stdout.fnmatch_lines(["*module call 1 (test_suite.Net), differing at output*"])


def test_hypothesis_tests_are_intercepted_without_deadline_failures(hypothesis_pytester):
    hypothesis_pytester.makepyfile(
        """
        import torch
        from hypothesis import given, settings, strategies as st

        @settings(deadline=50)
        @given(n=st.integers(1, 4))
        def test_rows(n):
            assert torch.nn.Linear(3, 3)(torch.ones(n, 3)).shape == (n, 3)
        """
    )
    result = _run(
        hypothesis_pytester, "--compile-backend=aot_eager", "--hypothesis-profile=parity-few"
    )
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*intercepted module calls in 1 test(s): * 0 diverged*"])


def test_the_time_spent_on_calls_then_skipped_is_counted_under_its_own_name(pytester):
    # Each call walks the world around it and snapshots its inputs before it knows whether it is
    # checked: the calls then skipped (here: they raise, and are not replayed) cost time the
    # breakdown must show, not leave outside it.
    pytester.makepyfile(
        """
        import pytest, torch

        REGISTRY = {i: [i] * 20 for i in range(2000)}  # reached by forward: captured each call

        class Block(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.linear = torch.nn.Linear(4, 4)

            def forward(self, x):
                REGISTRY[0].append(1)
                if x.sum() < 0:
                    raise ValueError("negative")
                return self.linear(x)

        def test_many_calls():
            block = Block()
            block(torch.ones(2, 4))
            large = -torch.ones(1000, 1000, 4)  # 16 MB, snapshotted before each call
            for _ in range(30):
                with pytest.raises(ValueError):
                    block(large)
        """
    )
    result = pytester.runpytest(
        "--compile-parity=all", "--compile-backend=aot_eager", "--compile-report=r.json"
    )
    result.assert_outcomes(passed=1)
    test = json.loads((pytester.path / "r.json").read_text())["tests"]
    (record,) = test.values()
    seconds = record["costs"]["seconds"]
    assert seconds["skipped calls"] > 0.005 and seconds["intercepting"] > 0
    result.stdout.fnmatch_lines(["*time: compile *, intercepting *s, skipped calls *s;*"])
