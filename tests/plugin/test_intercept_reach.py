"""--compile-parity=all reaches a library's own classes (their base overrides `__call__`, as
GPyTorch's does), says which classes its checks reached, and triages what diverged."""

from __future__ import annotations

import json
import re
import sys

import pytest

# A miniature GP library: its base module overrides __call__ (forward, then wraps the result) and
# returns what the checker cannot compare as a plain tensor: a lazy operator with a dense view, a
# distribution, and an object with no equality at all.
LIBRARY = """
import torch

class Module(torch.nn.Module):
    def __call__(self, *inputs, **kwargs):
        outputs = self.forward(*inputs, **kwargs)
        if isinstance(outputs, (list, tuple)) and len(outputs) == 1:
            return outputs[0]
        return outputs

class LazyProduct:
    '''x @ x.T, kept as its factor (the way a LinearOperator keeps its representation).'''
    def __init__(self, factor):
        self.factor = factor
    def to_dense(self):
        return self.factor @ self.factor.transpose(-1, -2)

import collections

_MADE = collections.deque(maxlen=1)  # not a plain list: the checker restores it, not compares it

class Opaque:
    '''No equality, no pytree, no attributes or slots the checker can see (it keeps its tensor
    outside itself, as a C object would): it cannot be compared.'''
    __slots__ = ()
    def __init__(self, tensor):
        _MADE.append(tensor)
    @property
    def tensor(self):
        return _MADE[-1]

class RBFKernel(Module):
    def __init__(self):
        super().__init__()
        self.raw_lengthscale = torch.nn.Parameter(torch.zeros(1))
        self.softplus = torch.nn.Softplus()
    def forward(self, x):
        return LazyProduct(x / self.softplus(self.raw_lengthscale))

class ConstantMean(Module):
    def __init__(self):
        super().__init__()
        self.constant = torch.nn.Parameter(torch.tensor(0.5))
    def forward(self, x):
        return self.constant.expand(x.shape[:-1])

class GPModel(Module):
    def __init__(self):
        super().__init__()
        self.mean = ConstantMean()
        self.kernel = RBFKernel()
    def forward(self, x):
        covar = self.kernel(x).to_dense() + torch.eye(x.shape[0])
        return torch.distributions.MultivariateNormal(self.mean(x), covariance_matrix=covar)

class Embedder(Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(3, 3)
    def forward(self, x):
        return Opaque(self.linear(x))

class Prior(Module):
    '''Used through log_prob only: constructed, never called.'''
"""

SUITE = """
import unittest
import torch
from minigp import GPModel, RBFKernel, Embedder, Prior

def test_posterior():
    torch.manual_seed(0)
    model = GPModel()
    x = torch.randn(6, 3)
    out = model(x)
    assert isinstance(out, torch.distributions.MultivariateNormal)
    (-out.log_prob(torch.zeros(6))).backward()
    assert model.kernel.raw_lengthscale.grad is not None

def test_kernel():
    kernel = RBFKernel()
    assert kernel(torch.randn(4, 2)).to_dense().shape == (4, 4)

def test_embedder():
    assert Embedder()(torch.randn(2, 3)).tensor.shape == (2, 3)

def test_prior():
    Prior()

class TestKernelCase(unittest.TestCase):  # GPyTorch's own tests are unittest cases
    def test_kernel_in_a_test_case(self):
        self.assertEqual(RBFKernel()(torch.randn(5, 2)).to_dense().shape, (5, 5))
"""


@pytest.fixture
def library(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makepyfile(minigp=LIBRARY, test_gp=SUITE)
    return pytester


def _run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest("--compile-parity=all", "-p", "no:cacheprovider", *args)


def test_classes_overriding_call_are_checked_and_covered(library: pytest.Pytester) -> None:
    result = _run(library, "--compile-backend=aot_eager", "--compile-report=report.json")
    result.assert_outcomes(passed=5)
    result.stdout.fnmatch_lines(
        [
            "*2 call(s) in 2 tests: minigp.RBFKernel",
            "*1 call(s) in test_gp.py::test_posterior: minigp.GPModel",
            "module classes constructed or called: 7 in 2 package(s)",
        ]
    )
    document = json.loads((library.path / "report.json").read_text())
    classes = document["coverage"]["classes"]
    assert classes["minigp.GPModel"]["status"] == "checked"
    assert classes["minigp.RBFKernel"]["status"] == "checked"
    assert classes["minigp.ConstantMean"]["status"] == "inside checked"
    assert classes["torch.nn.modules.activation.Softplus"]["status"] == "inside checked"
    assert classes["minigp.Prior"]["status"] == "never reached"
    embedder = classes["minigp.Embedder"]
    assert embedder["status"] == "skipped"
    (reason,) = embedder["skipped_calls"]
    assert reason == "output: cannot compare a Opaque"
    assert document["coverage"]["packages"]["minigp"] == {
        "diverged": 0,
        "checked": 2,
        "checked partly": 0,
        "inside checked": 1,
        "skipped": 1,
        "never reached": 1,
    }
    result.stdout.fnmatch_lines(
        [
            "skipped classes (1):",
            "  minigp.Embedder: 1 call(s) output: cannot compare a Opaque",
            "never reached classes (2):",
            "  minigp.Prior (constructed in 1 test(s); no check called it or held it)",
            "  torch.nn.modules.linear.Linear (constructed in 1 test(s);*",
        ]
    )


def test_a_planted_backend_fails_naming_the_library_classes(library: pytest.Pytester) -> None:
    result = _run(library, "--compile-backend=planted:corrupt_output")
    # GPModel's first graph output (its mean, before the distribution is built) is one its
    # result does not use: corrupting it changes nothing the caller sees, and GPModel passes.
    # That graph held the whole forward only once the first torch.compile of the process had
    # turned distributions' argument validation off: the verdict depended on test order until
    # every compiled run got torch.compile's switches.
    result.assert_outcomes(failed=2, passed=3)
    result.stdout.fnmatch_lines(
        ["*module call 1 (minigp.RBFKernel), differing at output.to_dense()*"]
    )
    assert "nondeterministic" not in result.stdout.str()


def test_intercepted_failures_are_triaged(library: pytest.Pytester) -> None:
    result = _run(
        library,
        "--compile-backend=planted:corrupt_output",
        "-k",
        "test_kernel_in_a_test_case",
    )
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*stage: Dynamo OK, AOTAutograd OK, decompositions OK -> planted:corrupt_output*",
            "*repro: python *repro.py  (replays 1 checker call(s))",
            "*artifacts: *",
        ]
    )
    assert "torch.__trace" not in result.stdout.str()  # no trace records in the captured log
    found = re.search(r"repro: python (\S+repro\.py)", result.stdout.str())
    assert found is not None  # under pytest's temporary directory: no --compile-artifacts given
    ran = library.run(sys.executable, found.group(1))
    assert ran.ret == 1, ran.stdout.str()


def test_a_package_never_checked_says_so(library: pytest.Pytester) -> None:
    result = _run(library, "--compile-backend=aot_eager", "-k", "prior or embedder")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["minigp: none of its 2 module classes was cross-checked"])


SIDE_EFFECTS = """
import torch

calls = [0]

def step(layer, x):
    return layer(x) + 1

class Scaled(torch.nn.Module):
    def forward(self, x):
        return x * 2

class Many(torch.nn.Module):
    '''Twelve layer classes through one helper, with a graph break in the loop: Dynamo compiles
    the helper once per class and reaches its recompile limit within one call.'''
    def __init__(self):
        super().__init__()
        kinds = [type(f"Kind{i}", (Scaled,), {}) for i in range(12)]
        self.layers = torch.nn.ModuleList(kind() for kind in kinds)

    def forward(self, x):
        for layer in self.layers:
            print("", end="")  # a graph break in the loop
            x = step(layer, x)
        return x

class Counted(torch.nn.Module):
    def forward(self, x):
        return self.hook(x)

    def hook(self, x):
        calls[0] += 1
        return x + 1

def test_a_recompile_limit_inside_one_call_is_a_skip_not_a_failure():
    assert Many()(torch.ones(2)).shape == (2,)

def test_the_replay_leaves_the_tests_counters_as_its_call_did():
    Counted()(torch.ones(2))
    assert calls == [1]
"""


def test_what_the_replay_cannot_show_or_must_not_change(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_effects=SIDE_EFFECTS)
    result = _run(pytester, "--compile-backend=aot_eager")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(
        ["*test_effects.Many: the compiled side would run eagerly: RecompileLimitExceeded*"]
    )


def test_a_recompile_limit_under_a_budget_is_a_divergence_that_counts_toward_the_cap(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(
        test_effects=SIDE_EFFECTS
        + """
def test_two_sizes():
    Many()(torch.ones(2))
    Many()(torch.ones(3, 2))
"""
    )
    result = _run(
        pytester,
        "--compile-backend=aot_eager",
        "--compile-max-recompiles=100",
        "--compile-parity-signatures=1",
        "-k",
        "two_sizes",
    )
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*1 intercepted module call(s) diverged*",
            "*test_effects.Many: the cap on input signatures per module class or function is "
            "reached: 1 input signatures of it checked*",
        ]
    )
