"""compiled_autograd: the compiled side's backward runs through compiled autograd, so a bug in the
graphs it captures is caught; the switch is put back after each check."""

from __future__ import annotations

PROGRAM = """
import pytest, torch

@pytest.mark.compile_parity
def test_training_step(compile_parity):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 2))
    for batch in (3, 5, 7):
        compile_parity(model, torch.randn(batch, 4, requires_grad=True))
"""


def test_a_bug_in_compiled_autograds_graphs_is_caught_with_it_and_missed_without(
    pytester, caught_only_with
):
    pytester.makepyfile(PROGRAM)
    result = caught_only_with("wrong_under_compiled_autograd", "--compile-autograd")
    result.stdout.fnmatch_lines(
        ["*ParityError*", "*grad of *: values are not close*", "*compiled_autograd=True*"]
    )
    assert "output: values are not close" not in result.stdout.str()  # the forward is right


def test_the_marker_and_the_ini_key(pytester):
    pytester.makeini("[pytest]\ncompile_autograd = true\n")
    pytester.makepyfile(
        PROGRAM.replace(
            "@pytest.mark.compile_parity", "@pytest.mark.compile_parity(compiled_autograd=False)"
        )
    )
    args = ("--compile-backend=planted:wrong_under_compiled_autograd",)
    pytester.runpytest(*args).assert_outcomes(passed=1)
    pytester.makepyfile(PROGRAM)
    pytester.runpytest(*args).assert_outcomes(failed=1)


def test_its_graphs_and_recompiles_are_counted(pytester):
    pytester.makepyfile(
        PROGRAM.replace(
            "@pytest.mark.compile_parity",
            "@pytest.mark.compile_parity(compiled_autograd=True, max_recompiles=0)",
        )
    )
    result = pytester.runpytest("--compile-backend=aot_eager")
    result.assert_outcomes(failed=1)
    # 3 -> 5: the forward recompiles, and the backward captured after it is part of that;
    # 5 -> 7: only compiled autograd's cache misses, on the new batch size.
    result.stdout.fnmatch_lines(
        [
            "*RecompileLimitExceeded: 2 recompiles, over the budget max_recompiles=0*",
            "*Sequential.forward*size mismatch*",
            "*compiled autograd backward !2*captured this backward again*",
        ]
    )
    result.stdout.fnmatch_lines(["*compiled autograd backward !0, * ops, ended by*"])


def test_a_plain_backward_after_the_check_is_not_compiled(pytester):
    pytester.makepyfile(
        """
        import pytest, torch
        from torch._dynamo import utils

        @pytest.mark.compile_parity(compiled_autograd=True)
        def test_after(compile_parity):
            model = torch.nn.Linear(4, 2)
            compile_parity(model, torch.randn(3, 4))
            captures = utils.counters["compiled_autograd"]["captures"]
            assert captures >= 1
            model(torch.randn(3, 4)).sum().backward()
            assert utils.counters["compiled_autograd"]["captures"] == captures
            assert torch.autograd.is_multithreading_enabled()
        """
    )
    pytester.runpytest("--compile-backend=aot_eager").assert_outcomes(passed=1)


def test_inductor_compiles_its_graphs_and_agrees(pytester, tmp_path, monkeypatch):
    # Slow (Inductor compiles the forward and three backward captures): the one end-to-end run.
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "inductor"))
    pytester.makepyfile(PROGRAM)
    result = pytester.runpytest_subprocess("--compile-backend=inductor", "--compile-autograd")
    result.assert_outcomes(passed=1)
