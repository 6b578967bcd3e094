"""fallback_random only where a graph draws random numbers, and the user's own compile checked too.

Eager and compiled draw the same numbers only with Inductor's `fallback_random`, but the setting
changes what is compiled (issue 17, symptom 3): the checker turns it on just for graphs that draw,
compiles such a callable once more as the user does, and says when a finding is the setting's own.
"""

from __future__ import annotations

import pytest

ONLY_WITH = (
    "only with torch._inductor.config.fallback_random=True, which the checker sets to compare "
    "random draws"
)


def test_a_sample_whose_dtype_differs_as_the_user_compiles_fails(pytester):
    # pytorch/pytorch#194547: float16 eagerly, float32 compiled; fallback_random hides it.
    pytester.makepyfile(
        """
        import pytest, torch

        @pytest.mark.compile_parity
        def test_it(compile_parity):
            loc, scale = torch.zeros(4, dtype=torch.float16), torch.ones(4)
            compile_parity(lambda l, s: torch.distributions.Normal(l, s).sample(), loc, scale)
        """
    )
    result = pytester.runpytest("--compile-backend=inductor", "--compile-bisect=off")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*Compiled as you compile it (torch._inductor.config.fallback_random=False, your own*",
            "*dtype: eager torch.float16, compiled torch.float32*",
        ]
    )


def test_a_crash_only_under_fallback_random_says_so_in_message_and_repro(pytester, tmp_path):
    # Inductor's aten.normal.Tensor_Tensor with a transposed scale fails a stride assertion only
    # with fallback_random; compiled as the user does, it runs (with its own output strides,
    # which eager does not share: check_strides=False leaves that real difference aside here).
    pytester.makepyfile(
        """
        import pytest, torch

        def draw(loc, scale):
            return torch.normal(loc, scale)

        @pytest.mark.compile_parity(check_strides=False)
        def test_it(compile_parity):
            compile_parity(draw, torch.zeros(3, 4), torch.ones(4, 3).t())
        """
    )
    artifacts = tmp_path / "artifacts"
    result = pytester.runpytest(
        "--compile-backend=inductor", "--compile-bisect=off", f"--compile-artifacts={artifacts}"
    )
    result.assert_outcomes(failed=1)
    output = result.stdout.str()
    assert f"Seen {ONLY_WITH}" in output
    assert "compiled raised AssertionError" in output
    assert "Compiled as you compile it" not in output
    (repro,) = artifacts.rglob("repro.py")
    text = " ".join(repro.read_text().split())
    assert ONLY_WITH in text
    assert "The replay sets torch._inductor.config.fallback_random=True" in text


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_dropout_in_training_passes(pytester, backend):
    pytester.makepyfile(
        """
        import pytest, torch

        @pytest.mark.compile_parity
        def test_it(compile_parity):
            model = torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.Dropout(0.5)).train()
            compile_parity(model, torch.randn(8, 16, requires_grad=True))
            compile_parity(model, torch.randn(8, 16, requires_grad=True))
        """
    )
    pytester.runpytest(f"--compile-backend={backend}").assert_outcomes(passed=1)


def test_the_compile_as_you_compile_it_leaves_the_world_its_code_reaches_compared(pytester):
    # tensordict's probabilistic modules on the GPU host: the as-user run's state lacked the
    # globals and class attributes the call's code reaches, which eager's has, and every call
    # that drew random numbers failed with "present in eager only, missing from compiled".
    pytester.makepyfile(
        """
        import pytest, torch

        SEEN = []

        def noisy(x):
            SEEN.append(len(SEEN))
            return torch.nn.functional.dropout(x, 0.5) * 2

        @pytest.mark.compile_parity
        def test_it(compile_parity):
            compile_parity(noisy, torch.ones(64))
            assert SEEN == [0]
        """
    )
    pytester.runpytest("--compile-backend=aot_eager").assert_outcomes(passed=1)


def test_a_backend_corrupting_a_random_graph_still_fails(pytester):
    pytester.makepyfile(
        """
        import pytest, torch

        @pytest.mark.compile_parity
        def test_it(compile_parity):
            compile_parity(lambda x: torch.nn.functional.dropout(x, 0.5) * 2, torch.ones(64))
        """
    )
    result = pytester.runpytest("--compile-backend=planted:corrupt_output", "--compile-bisect=off")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        ["*Seen with torch._inductor.config.fallback_random=True, which the checker sets*"]
    )


COUNTING_BACKEND = """
GRAPHS = []

def counting(gm, example_inputs):
    GRAPHS.append(gm)
    return gm.forward
"""


@pytest.mark.parametrize(
    ("program", "compiles"),
    [
        ("x.sin() + 1", 1),
        ("torch.nn.functional.dropout(x, 0.5, training=False)", 1),
        ("torch.nn.functional.dropout(x, 0.5) + x.sin()", 2),
    ],
)
def test_only_callables_that_draw_compile_twice(pytester, program, compiles):
    name = f"counting_{compiles}_{abs(hash(program))}"
    pytester.makepyfile(**{name: COUNTING_BACKEND})
    pytester.syspathinsert()
    pytester.makepyfile(
        f"""
        import pytest, torch
        import {name}

        @pytest.mark.compile_parity
        def test_it(compile_parity):
            result = compile_parity(lambda x: {program}, torch.ones(8))
            assert result.graphs == 1  # the checker's second compile is not the user's graph
            assert len({name}.GRAPHS) == {compiles}
        """
    )
    pytester.runpytest(f"--compile-backend={name}:counting").assert_outcomes(passed=1)


def test_the_compile_as_you_compile_it_is_timed_as_compiling_not_as_the_compiled_sides_run(
    pytester,
):
    import json

    from pytest_torchcompile.counting.costs import AS_USER

    pytester.makepyfile(
        test_drop="""
        import pytest, torch

        @pytest.mark.compile_parity
        def test_dropout(compile_parity):
            compile_parity(lambda x: torch.nn.functional.dropout(x, 0.5) * 2, torch.randn(64))
        """
    )
    result = pytester.runpytest(
        "--compile-backend=planted:slow_compile",
        "--compile-report=r.json",
        "-p",
        "no:cacheprovider",
    )
    result.assert_outcomes(passed=1)
    costs = json.loads((pytester.path / "r.json").read_text())["tests"][
        "test_drop.py::test_dropout"
    ]
    assert costs["costs"]["added_compiles"] == {AS_USER: 1}
    seconds = costs["costs"]["seconds"]
    assert seconds["compile"] >= 0.6  # its compile and the one as you compile it, 0.3 s each
    assert seconds["compiled side"] < 0.3
