"""Exceptions are part of a program's meaning: both sides raise the same type, or it fails."""

from __future__ import annotations


def test_raising_only_when_compiled_fails(pytester):
    pytester.makepyfile(
        """
        import pytest, torch

        @pytest.mark.compile_parity
        def test_it(compile_parity):
            compile_parity(lambda x: x + 1, torch.ones(2))
        """
    )
    result = pytester.runpytest("--compile-backend=planted:raise_when_compiled")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*ParityError*", "*eager returned normally*RuntimeError*planted*"])


def test_a_backward_raising_only_when_compiled_fails_and_says_backward(pytester):
    pytester.makepyfile(
        """
        import pytest, torch

        @pytest.mark.compile_parity
        def test_it(compile_parity):
            compile_parity(lambda x: x.sin(), torch.ones(2, requires_grad=True))
        """
    )
    result = pytester.runpytest("--compile-backend=planted:raise_in_backward")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*ParityError*",
            "*eager returned normally, compiled raised in the backward RuntimeError: planted*",
        ]
    )


def test_both_sides_raising_alike_reraise_the_eager_exception(pytester):
    pytester.makepyfile(
        """
        import pytest, torch

        def checked(x):
            if x.shape[0] > 2:
                raise ValueError("batch too big")
            return x * 2

        @pytest.mark.compile_parity
        def test_raises(compile_parity):
            with pytest.raises(ValueError, match="batch too big"):
                compile_parity(checked, torch.ones(3))

        @pytest.mark.compile_parity
        def test_raises_then_runs(compile_parity):
            with pytest.raises(ValueError, match="batch too big"):
                compile_parity(checked, torch.ones(3))
            compile_parity(checked, torch.ones(2))

        def doubled(x):
            return x * 2

        @pytest.mark.compile_parity
        def test_raises_then_another_runs_twice(compile_parity):
            with pytest.raises(ValueError, match="batch too big"):
                compile_parity(checked, torch.ones(3))
            compile_parity(doubled, torch.ones(2))
            compile_parity(doubled, torch.ones(2))  # cached: compiles nothing, and is compiled
        """
    )
    # Dynamo runs a frame that raises eagerly; as eager raised alike, that is no lost compile.
    # But Dynamo skips that frame from then on: the later call runs eagerly, a fallback; another
    # function's cached call is not.
    pytester.runpytest("--compile-backend=aot_eager", "-v").stdout.fnmatch_lines(
        [
            "*test_raises PASSED*",
            "*test_raises_then_runs FAILED*",
            "*test_raises_then_another_runs_twice PASSED*",
            "*EagerFallbackError*",
            "*checked (*) (skipped): Dynamo skips this frame since it gave up compiling it*",
        ]
    )
