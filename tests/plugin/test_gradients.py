"""Gradients of inputs and parameters are compared after a backward with shared cotangents."""

from __future__ import annotations

PROGRAM = """
import pytest, torch

@pytest.mark.compile_parity
def test_input_grad(compile_parity):
    compile_parity(lambda x: (x.sin() * 3).cumsum(0), torch.randn(6, requires_grad=True))

@pytest.mark.compile_parity
def test_parameter_grad(compile_parity):
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 3)
    compile_parity(model, torch.randn(2, 4))
    assert model.weight.grad is None  # the check leaves no .grad behind
"""


def test_gradients_pass_on_a_correct_backend(pytester):
    pytester.makepyfile(PROGRAM)
    pytester.runpytest("--compile-backend=aot_eager").assert_outcomes(passed=2)


def test_a_corrupted_gradient_fails_naming_it(pytester):
    pytester.makepyfile(PROGRAM)
    result = pytester.runpytest("--compile-backend=planted:corrupt_gradient")
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(["*ParityError*", "*grad of input 0*"])
    result.stdout.fnmatch_lines(["*ParityError*", "*grad of parameter 'weight'*"])


def test_backward_false_skips_gradients(pytester):
    pytester.makepyfile(
        PROGRAM.replace(
            "@pytest.mark.compile_parity", "@pytest.mark.compile_parity(backward=False)"
        )
    )
    pytester.runpytest("--compile-backend=planted:corrupt_gradient").assert_outcomes(passed=2)
