"""What --compile-parity=all claims is what it did: a call is "already checked" only where the same
program was, the counts are those of the user's calls alone, and every module class the suite
constructs is in the coverage table."""

from __future__ import annotations

import json

import pytest

from pytest_torchcompile import _compat

WRONG_SIGMOID = """
import torch

def backend(gm, example_inputs):
    '''Compiles sigmoid as tanh: a miscompile of the one parameter-free layer.'''
    for node in gm.graph.nodes:
        if node.op == "call_function" and getattr(node.target, "__name__", "") == "sigmoid":
            node.target = torch.tanh
    gm.recompile()
    return gm.forward
"""


def _run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest("--compile-parity=all", "-p", "no:cacheprovider", *args)


def test_a_network_with_other_parameter_free_layers_is_checked_not_already_checked(pytester):
    """Linear, Softplus, Linear and the same plus a Sigmoid have the same parameters but are two
    programs: the second is compiled and checked, so a miscompiled sigmoid is caught."""
    pytester.makepyfile(wrong_sigmoid=WRONG_SIGMOID)
    pytester.syspathinsert()
    pytester.makepyfile(
        test_nets="""
        import torch
        from torch import nn

        def mlp(*extra):
            return nn.Sequential(nn.Linear(3, 8), nn.Softplus(), nn.Linear(8, 1), *extra)

        def test_a_plain_head():
            mlp()(torch.randn(4, 3))

        def test_b_sigmoid_head():
            net = mlp(nn.Sigmoid())
            net(torch.randn(4, 3))
            net(torch.randn(4, 3))
        """
    )
    result = _run(pytester, "--compile-backend=aot_eager")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(
        [
            "*intercepted module calls in 2 test(s): 2 checked, 0 diverged, 0 checked partly, 1 skipped"
        ]
    )
    wrong = _run(pytester, "--compile-backend=wrong_sigmoid:backend")
    wrong.assert_outcomes(passed=1, failed=1)
    wrong.stdout.fnmatch_lines(["FAILED test_nets.py::test_b_sigmoid_head - *ParityE*"])


DROPOUT_BATCHES = """
import pytest, torch
from torch import nn

def net():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(3, 8), nn.Dropout(0.2), nn.Linear(8, 1))

@pytest.mark.compile_parity(max_recompiles=5)
def test_checked(compile_parity):
    model = net()
    for batch in range(1, 7):
        result = compile_parity(model, torch.randn(batch, 3))
    assert result.recompiles == 5  # what torch.compile(model, dynamic=False) makes of 6 batches

def test_intercepted():
    model = net()
    for batch in range(1, 7):
        model(torch.randn(batch, 3))
"""


@pytest.mark.skipif(
    not _compat.own_recompile_region(),
    reason="this torch shares Dynamo's entries of a code object between all its compiles",
)
def test_the_checkers_own_compiles_neither_use_up_nor_show_in_the_users_recompiles(pytester):
    """A network that draws random numbers is also compiled as the user compiles it (without
    fallback_random). Those compiles of the same forward used to share Dynamo's entries with the
    counted ones: six batch sizes hit the recompile limit of 8 after three recompiles, and a
    recompile's failed guard could be the other compile's."""
    pytester.makepyfile(test_batches=DROPOUT_BATCHES)
    result = _run(
        pytester,
        "--compile-backend=aot_eager",
        "--compile-dynamic=false",
        "--compile-max-recompiles=5",
        "--compile-report=report.json",
    )
    result.assert_outcomes(passed=2)
    tests = json.loads((pytester.path / "report.json").read_text())["tests"]
    for name in ("test_checked", "test_intercepted"):
        recompiles = tests[f"test_batches.py::{name}"]["recompiles"]
        assert [r["category"] for r in recompiles] == ["size"] * 5, recompiles
        assert all("expected" in r["reason"] for r in recompiles)


def test_a_module_class_that_skips_super_init_is_in_the_coverage_table(pytester):
    pytester.makepyfile(
        test_wrappers="""
        import torch

        class Head(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.linear = torch.nn.Linear(3, 2)

            def forward(self, x):
                return self.linear(x)

        class Shared(Head):
            '''Takes over another head's state instead of calling super().__init__().'''
            def __init__(self, other):
                self.__dict__ = other.__dict__

        def test_only_built():
            Shared(Head())
        """
    )
    result = _run(pytester, "--compile-backend=eager")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        ["*test_wrappers.Shared (constructed in 1 test(s); no check called it or held it)"]
    )
