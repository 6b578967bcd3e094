"""Inputs a call mutates in place are compared after the call; the caller sees eager's effect."""

from __future__ import annotations


def test_a_dropped_input_mutation_fails(pytester):
    pytester.makepyfile(
        """
        import pytest, torch

        def update(acc, x):
            acc.add_(x * 2)
            return x.sum()

        @pytest.mark.compile_parity
        def test_it(compile_parity):
            acc = torch.zeros(5)
            compile_parity(update, acc, torch.ones(5))
            assert acc.sum() == 10  # the caller's tensor was updated by the eager side
        """
    )
    assert_outcomes = pytester.runpytest("--compile-backend=aot_eager")
    assert_outcomes.assert_outcomes(passed=1)
    result = pytester.runpytest("--compile-backend=planted:drop_input_mutation")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        ["*ParityError*", "*input 0 after the call*", "*Mismatched elements: 5 / 5*"]
    )


def test_mutation_of_a_strided_view_keeps_its_layout(pytester):
    pytester.makepyfile(
        """
        import pytest, torch

        @pytest.mark.compile_parity
        def test_it(compile_parity):
            base = torch.arange(20.0).reshape(4, 5)
            view = base[1:, ::2]
            compile_parity(lambda v: v.mul_(3).sum(), view)
            assert base[1, 0] == 15.0 and base[0, 0] == 0.0
        """
    )
    pytester.runpytest("--compile-backend=aot_eager").assert_outcomes(passed=1)
    result = pytester.runpytest("--compile-backend=planted:drop_input_mutation")
    result.assert_outcomes(failed=1)
