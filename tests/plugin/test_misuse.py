"""A call the checker cannot check as given (an iterator output, meta tensors) is a usage error that
says so and what to write instead (chex): never a compiler stage's divergence, never a repro."""

from __future__ import annotations

import pytest

MISUSES = """
import pytest, torch

def pairs(x):
    yield x + 1
    yield x * 2

@pytest.mark.compile_parity
def test_generator_function(compile_parity):
    compile_parity(pairs, torch.ones(2))

@pytest.mark.compile_parity
def test_generator_expression(compile_parity):
    compile_parity(lambda x: (t * 2 for t in x), torch.ones(2, 2))

@pytest.mark.compile_parity
def test_nested_zip(compile_parity):
    compile_parity(lambda x: (x + 1, {"rows": zip(x, x)}), torch.ones(3, 2))

@pytest.mark.compile_parity
def test_meta_input(compile_parity):
    compile_parity(lambda x, *, y: x + y, torch.ones(2), y=torch.ones(2, device="meta"))

@pytest.mark.compile_parity
def test_meta_module(compile_parity):
    compile_parity(torch.nn.Linear(2, 2, device="meta"), torch.ones(3, 2))

@pytest.mark.compile_parity
def test_meta_buffer_of_a_module_input(compile_parity):
    norm = torch.nn.BatchNorm1d(2)
    norm.running_mean = torch.zeros(2, device="meta")
    compile_parity(lambda x, mod: x + 1, torch.ones(3, 2), norm)

@pytest.mark.compile_parity
def test_meta_closure(compile_parity):
    model = torch.nn.Linear(2, 2, device="meta")
    compile_parity(lambda x: model(x.to("meta")), torch.ones(3, 2))

@pytest.mark.compile_parity
def test_consumed_inside(compile_parity):
    compile_parity(lambda x: list(pairs(x)), torch.ones(2))
"""

ITERATOR = (
    "cannot be compared without consuming it*Consume it inside the callable, "
    "e.g. compile_parity(lambda x: list(fn(x)), x), or return a tuple or list."
)
META = (
    "it is a meta tensor, which holds no values to compare. Pass tensors that hold values, "
    'or materialize the module first: module.to_empty(device="cpu"), then initialize it*'
)


def test_each_misuse_is_named_with_what_to_do_and_blamed_on_no_stage(pytester):
    pytester.makepyfile(MISUSES)
    result = pytester.runpytest(
        "--compile-backend=aot_eager", "--compile-artifacts=out", "-p", "no:cacheprovider"
    )
    result.assert_outcomes(failed=7, passed=1)
    error = "E   *UncheckableCallError: compile_parity cannot check"
    result.stdout.fnmatch_lines(
        [
            f"{error} output: it is a generator, which {ITERATOR}",
            f"{error} output: it is a generator, which {ITERATOR}",
            f"{error} output[[]1[]][[]'rows'[]]: it is an iterator (zip), which {ITERATOR}",
            f"{error} input 'y': {META}",
            f"{error} parameter 'weight' of the module: {META}",
            f"{error} buffer 'running_mean' of input 1: {META}",
            f"{error} output: {META}",
        ]
    )
    for blame in ("*diverge*", "*stage:*", "*repro*", "*NotImplementedError*"):
        result.stdout.no_fnmatch_line(blame)
    assert not (pytester.path / "out").exists()


def test_outside_pytest_the_misuse_is_the_same_error():
    torch = pytest.importorskip("torch")
    from pytest_torchcompile import UncheckableCallError, assert_compile_parity

    with pytest.raises(
        UncheckableCallError, match=r"cannot check output: it is an iterator \(map\)"
    ):
        assert_compile_parity(lambda x: map(torch.sin, x), torch.ones(2, 2), backend="eager")


def test_a_first_argument_that_is_not_callable_says_how_to_call():
    torch = pytest.importorskip("torch")
    from pytest_torchcompile import assert_compile_parity

    with pytest.raises(TypeError, match=r"expects a callable .* got Tensor; call it as"):
        assert_compile_parity(torch.ones(2), torch.ones(2), backend="eager")


def test_zero_change_mode_skips_such_a_call_with_the_reason(pytester):
    """The test's own call runs as written; only its replay is skipped, with the reason."""
    pytester.makepyfile(
        """
        import torch

        class Steps(torch.nn.Module):
            def forward(self, x):
                return (x * i for i in range(3))

        def test_steps():
            assert len(list(Steps()(torch.ones(2)))) == 3

        def test_shapes_on_meta():
            model = torch.nn.Linear(2, 4, device="meta")
            assert model(torch.ones(3, 2, device="meta")).shape == (3, 4)
        """
    )
    result = pytester.runpytest(
        "--compile-parity=all", "--compile-backend=aot_eager", "-p", "no:cacheprovider"
    )
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines_random(
        [
            "*call(s) in *test_shapes_on_meta: *Linear: meta tensors hold no values to compare",
            "*call(s) in *test_steps: *Steps: cannot check the call: UncheckableCallError: "
            "compile_parity cannot check output: it is a generator*",
        ]
    )
