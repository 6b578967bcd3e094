"""Outputs of any structure, and their metadata, are compared; a wrong output fails naming its leaf."""

from __future__ import annotations

PROGRAM = """
import collections, dataclasses
import pytest, torch

Pair = collections.namedtuple("Pair", "first second")

@dataclasses.dataclass
class Out:
    loss: torch.Tensor
    count: int

@pytest.mark.compile_parity
def test_dict(compile_parity):
    compile_parity(lambda x: {"logits": x.sin() * 2}, torch.randn(4, 4))

@pytest.mark.compile_parity
def test_nested(compile_parity):
    compile_parity(lambda x: (None, [x.cos()], 3), torch.randn(5))

@pytest.mark.compile_parity
def test_namedtuple(compile_parity):
    compile_parity(lambda x: Pair(1.5, x.exp()), torch.randn(3))

@pytest.mark.compile_parity
def test_dataclass(compile_parity):
    compile_parity(lambda x: Out(loss=x.tanh().sum(), count=2), torch.randn(3))
"""


def test_structured_outputs_pass_on_a_correct_backend(pytester):
    pytester.makepyfile(PROGRAM)
    pytester.runpytest("--compile-backend=aot_eager").assert_outcomes(passed=4)


def test_a_corrupted_element_fails_and_names_the_leaf(pytester):
    pytester.makepyfile(PROGRAM)
    result = pytester.runpytest("--compile-backend=planted:corrupt_output")
    result.assert_outcomes(failed=4)
    result.stdout.fnmatch_lines(
        [
            "*ParityError*",
            "*output?'logits'?: values are not close",
            "*Mismatched elements: 1 / 16*",
            "*Greatest absolute difference*at index (0, 0)*",
            "*backend=planted:corrupt_output mode=default dynamic=auto*device=cpu*",
        ]
    )
    for leaf in ("output[1][0]", "output.second", "output.loss"):
        assert f"{leaf}: values are not close" in result.stdout.str()


def test_a_changed_output_dtype_fails(pytester):
    pytester.makepyfile(
        """
        import pytest, torch

        @pytest.mark.compile_parity
        def test_it(compile_parity):
            compile_parity(lambda x: x * 3, torch.randn(4))
        """
    )
    result = pytester.runpytest("--compile-backend=planted:change_output_dtype")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        ["*ParityError*", "*output*", "*dtype: eager torch.float32, compiled torch.float64*"]
    )


def test_result_object_exposes_both_outputs_and_errors(pytester):
    pytester.makepyfile(
        """
        import pytest, torch

        @pytest.mark.compile_parity
        def test_it(compile_parity):
            result = compile_parity(lambda x: x.sin(), torch.randn(8))
            torch.testing.assert_close(result.compiled, result.eager)
            assert result.errors["output"]["max_abs"] >= 0.0
            assert result.graphs == 1 and result.graph_breaks == 0
        """
    )
    pytester.runpytest("--compile-backend=aot_eager").assert_outcomes(passed=1)


def test_the_failure_lists_python_scalar_inputs_too(pytester):
    # A stale Python float (pytorch/pytorch#197889) is the input that matters; list it.
    pytester.makepyfile(
        """
        import pytest, torch

        @pytest.mark.compile_parity
        def test_it(compile_parity):
            compile_parity(lambda x, s: x * s, torch.ones(4), 1.5)
        """
    )
    result = pytester.runpytest("--compile-backend=planted:corrupt_output")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*Inputs:", "*input 0: float32[[]4[]]*", "*input 1: float 1.5"])
