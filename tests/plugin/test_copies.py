"""One copier for every copy the checker makes: identity kept, any object a library passes taken,
the state before the call restored whole (attributes and Python's and NumPy's generators).

Each pattern here once passed as "checked partly" or was skipped as "cannot snapshot": a real
miscompile could hide behind each one.
"""

from __future__ import annotations

import json

import pytest

# pytorch#196173's pattern: no guard on an identity test, so a compiled `flip` keeps taking the
# branch it was traced on, where eager alternates.
FLIP = """
import pytest, torch

class Holder:
    def __init__(self):
        self.left, self.right = object(), object()
        self.current = self.left

def flip(h, x):
    if h.current is h.left:
        h.current = h.right
        return x + 1
    h.current = h.left
    return x - 1

@pytest.mark.compile_parity
def test_flip(compile_parity):
    h = Holder()
    for _ in range(4):
        compile_parity(flip, h, torch.ones(2))

class Flip(torch.nn.Module):  # the same on a module: its copies are synced call by call
    def __init__(self):
        super().__init__()
        self.left, self.right = object(), object()
        self.current = self.left

    def forward(self, x):
        return flip(self, x)

@pytest.mark.compile_parity
def test_flip_module(compile_parity):
    m = Flip()
    for _ in range(4):
        compile_parity(m, torch.ones(2))
"""


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_a_miscompiled_identity_test_fails_at_dynamo(pytester, backend):
    pytester.makepyfile(FLIP)
    result = pytester.runpytest(f"--compile-backend={backend}")
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(["*ParityError*", "*stage: Dynamo diverges*"] * 2)
    result.stdout.no_fnmatch_line("*checked partly*")


def test_an_identity_test_passes_with_no_compiler(pytester):
    pytester.makepyfile(FLIP)
    result = pytester.runpytest("--compile-backend=none", "--compile-report=report.json")
    result.assert_outcomes(passed=2)
    assert json.loads((pytester.path / "report.json").read_text())["totals"]["not_judged"] == 0


JUDGED_WHOLE = """
import dataclasses, pytest, torch

MODE_A, MODE_B = object(), object()

class Settings:
    def __init__(self, mode):
        self.mode = mode

def by_mode(s, x):
    return x * 2 if s.mode is MODE_A else x * 3

@pytest.mark.compile_parity
def test_module_level_sentinel(compile_parity):
    compile_parity(by_mode, Settings(MODE_A), torch.ones(2))

@dataclasses.dataclass
class Cache:
    keys: torch.Tensor
    values: torch.Tensor

def attend(cache, q):
    return torch.softmax(q @ cache.keys.T, -1) @ cache.values

@pytest.mark.compile_parity
def test_cache_of_non_leaf_tensors(compile_parity):
    x = torch.randn(4, 3)
    w = torch.randn(3, 3, requires_grad=True)
    q = torch.randn(2, 3, requires_grad=True)
    compile_parity(attend, Cache(keys=x @ w, values=torch.tanh(x @ w)), q)

class Sized(torch.nn.Module):
    def __new__(cls, dim):
        return super().__new__(cls)

    def __init__(self, dim):
        super().__init__()
        self.lin = torch.nn.Linear(dim, dim)

    def forward(self, x):
        return self.lin(x).relu()

@pytest.mark.compile_parity
def test_class_with_its_own_new(compile_parity):
    compile_parity(Sized(4), torch.randn(2, 4))

@pytest.mark.compile_parity
def test_jagged_nested_input(compile_parity):
    nt = torch.nested.nested_tensor(
        [torch.randn(2, 4), torch.randn(3, 4)], layout=torch.jagged, requires_grad=True
    )
    compile_parity(lambda t: (t * 2).sin(), nt)
"""


@pytest.mark.parametrize("backend", ["none", "aot_eager"])
def test_what_libraries_pass_is_copied_and_every_leaf_judged(pytester, backend):
    pytester.makepyfile(JUDGED_WHOLE)
    result = pytester.runpytest(f"--compile-backend={backend}", "--compile-report=report.json")
    result.assert_outcomes(passed=4)
    report = json.loads((pytester.path / "report.json").read_text())
    assert report["totals"]["not_judged"] == 0
    leaves = {
        name.rsplit("::", 1)[-1]: {row["leaf"] for row in test["largest_errors"]}
        for name, test in report["tests"].items()
    }
    # The gradients reach w through the cache's non-leaf tensors, and q directly.
    assert {"grad of input 0.keys", "grad of input 0.values", "grad of input 1"} <= leaves[
        "test_cache_of_non_leaf_tensors"
    ]
    assert "grad of parameter 'lin.weight'" in leaves["test_class_with_its_own_new"]


def test_a_wrong_gradient_through_what_libraries_pass_fails(pytester):
    pytester.makepyfile(JUDGED_WHOLE)
    result = pytester.runpytest(
        "--compile-backend=planted:corrupt_gradient", "--compile-bisect=off"
    )
    result.assert_outcomes(failed=3, passed=1)  # the sentinel's call has no gradient
    result.stdout.fnmatch_lines_random(
        [
            "*grad of input 0.keys: values are not close*",
            "*grad of parameter 'lin.weight': values are not close*",
            "*grad of input 0._values: values are not close*",
        ]
    )


RANDOM = """
import random
import numpy as np
import pytest, torch

def noisy(x):
    if random.random() < 0.5:
        x = x * 2
    return x + float(np.random.rand()) + torch.rand(2)

@pytest.mark.compile_parity
@pytest.mark.parametrize("i", range(20))
def test_draws(compile_parity, i):
    compile_parity(noisy, torch.ones(2))
"""


@pytest.mark.parametrize("backend", ["none", "aot_eager"])
def test_python_and_numpy_draws_are_part_of_the_state_before_the_call(pytester, backend):
    pytester.makepyfile(RANDOM)
    result = pytester.runpytest(f"--compile-backend={backend}", "-rA")
    result.assert_outcomes(passed=20)
    result.stdout.no_fnmatch_line("*nondeterministic*")


def test_a_dropped_write_into_a_tensor_an_object_holds_fails(pytester):
    pytester.makepyfile(
        """
        import dataclasses, pytest, torch

        @dataclasses.dataclass
        class Cache:
            keys: torch.Tensor

        def append(cache, k):
            cache.keys[0].copy_(k)
            return k * 2

        @pytest.mark.compile_parity
        def test_append(compile_parity):
            compile_parity(append, Cache(torch.zeros(2, 3)), torch.ones(3))
        """
    )
    assert pytester.runpytest("--compile-backend=aot_eager").ret == 0
    result = pytester.runpytest("--compile-backend=planted:drop_input_mutation")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*input 0.keys after the call: values are not close*"])


def test_a_module_holding_a_non_leaf_tensor_in_a_list_is_checked_in_zero_change_mode(pytester):
    # As GPyTorch's ExactGP holds its train_inputs after get_fantasy_model.
    pytester.makepyfile(
        """
        import torch

        class M(torch.nn.Module):
            def __init__(self, x):
                super().__init__()
                self.lin = torch.nn.Linear(2, 2)
                self.inputs = [x]

            def forward(self, y):
                return self.lin(y) + self.inputs[0].sum()

        def test_call():
            w = torch.ones(2, 2, requires_grad=True)
            M(torch.ones(3, 2) @ w)(torch.ones(1, 2))
        """
    )
    result = pytester.runpytest("--compile-parity=all", "--compile-backend=none")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*intercepted module calls in 1 test(s): 1 checked*"])
    planted = pytester.runpytest("--compile-parity=all", "--compile-backend=planted:corrupt_output")
    planted.assert_outcomes(failed=1)
