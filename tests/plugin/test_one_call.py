"""Zero-change mode: the test sees one call, and every value the call leaves is judged.

Each suite below is correct and asserts what one plain call leaves (a counter, a hook's log, a
generator's next draw): it passes unchanged on `none` and `aot_eager`, and a planted backend that
corrupts exactly the value in question (a slot, a cached table, a gradient reached through a weak
reference, a draw from a generator argument) fails it as a divergence, not through the test's own
assertion.
"""

from __future__ import annotations

import pytest

WORLD = """
import torch

CALLS = 0

class Counting(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x):
        global CALLS
        CALLS += 1
        return self.lin(x)

def test_a_global_counter_counts_the_tests_calls():
    model, before = Counting(), CALLS
    model(torch.randn(2, 4))
    model(torch.randn(3, 4))
    assert CALLS == before + 2

def test_a_hook_of_the_test_sees_the_tests_calls():
    model, seen = torch.nn.Linear(4, 4), []
    model.register_forward_hook(lambda module, args, out: seen.append(out.shape))
    model(torch.randn(2, 4))
    model(torch.randn(3, 4))
    assert seen == [(2, 4), (3, 4)]

class Recorder:
    def __init__(self):
        self.calls = 0

    def hook(self, module, args, out):
        self.calls += 1

def test_a_bound_method_hook_counts_the_tests_calls():
    model, recorder = torch.nn.Linear(4, 4), Recorder()
    model.register_forward_pre_hook(lambda module, args: None)
    model.register_forward_hook(recorder.hook)
    model(torch.randn(2, 4))
    assert recorder.calls == 1

def grad_at_the_first_layer(net, x):
    saved = {}

    def hook(module, args, out):  # a new closure over a new dict per call, as an attribution's
        saved["out"] = out
        return out.clone()

    handle = net[0].register_forward_hook(hook)
    try:
        y = net(x)
    finally:
        handle.remove()
    return torch.autograd.grad(y.sum(), saved["out"])[0]

def test_a_hook_registered_for_each_call_keeps_what_the_tests_call_stored():
    net = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.Linear(4, 1))
    assert grad_at_the_first_layer(net, torch.randn(5, 3)).shape == (5, 4)
    assert grad_at_the_first_layer(net, torch.randn(2, 3)).shape == (2, 4)
"""


def _run(pytester: pytest.Pytester, backend: str, *args: str) -> pytest.RunResult:
    return pytester.runpytest(
        "--compile-parity=all", f"--compile-backend={backend}", "-p", "no:cacheprovider", *args
    )


def _passes(pytester: pytest.Pytester, backend: str, suite: str, tests: int, counts: str) -> None:
    """Each of the suite's `tests` passes on `backend`, its own assertions holding, and the
    intercepted calls are `counts`."""
    pytester.makepyfile(test_suite=suite)
    result = _run(pytester, backend)
    result.assert_outcomes(passed=tests)
    result.stdout.fnmatch_lines([f"*intercepted module calls in {tests} test(s): {counts}*"])


@pytest.mark.parametrize("backend", ["none", "aot_eager"])
def test_replays_leave_globals_hooks_and_their_objects_as_one_call_does(pytester, backend):
    _passes(pytester, backend, WORLD, 4, "6 checked, 0 diverged, 0 checked partly")


def test_under_a_wrong_backend_the_divergence_fails_not_the_tests_own_assertion(pytester):
    pytester.makepyfile(test_world=WORLD)
    result = _run(pytester, "planted:corrupt_output")
    result.assert_outcomes(failed=4)
    result.stdout.fnmatch_lines(["*ParityError: 1 intercepted module call(s) diverged*"])
    result.stdout.no_fnmatch_line("*differentiated Tensor*")
    result.stdout.no_fnmatch_line("*assert CALLS ==*")
    result.stdout.no_fnmatch_line("*assert seen ==*")
    result.stdout.no_fnmatch_line("*assert recorder.calls ==*")


LEFT = """
import weakref
import torch

class Slotted:
    __slots__ = ("total",)

    def __init__(self):
        self.total = torch.zeros(4)

class Accumulate(torch.nn.Module):
    def forward(self, x, state):
        state.total = state.total + x.sum(0)
        return x  # the slot alone holds what the call computes

def test_slots():
    state = Slotted()
    Accumulate()(torch.randn(3, 4), state)
    assert state.total.shape == (4,)

class Rotary(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("inv", torch.arange(1, 5, dtype=torch.float32))
        self._tables = {}

    def forward(self, x):
        n = x.shape[0]
        if n not in self._tables:
            self._tables[n] = torch.outer(torch.arange(n, dtype=torch.float32), self.inv).sin()
        return x  # the cached table alone holds what the call computes

def test_a_private_cache_keyed_by_size():
    rotary = Rotary()
    rotary(torch.randn(3, 4))
    assert list(rotary._tables) == [3]

class TiedDecoder(torch.nn.Module):
    def __init__(self, embedding):
        super().__init__()
        self.embedding = weakref.ref(embedding)

    def forward(self, h):
        return h @ self.embedding().weight.t()

def test_a_weight_reached_through_a_weak_reference():
    embedding = torch.nn.Embedding(5, 4)
    decoder = TiedDecoder(embedding)
    decoder(torch.randn(3, 4)).sum().backward()
    assert embedding.weight.grad is not None
"""


@pytest.mark.parametrize("backend", ["none", "aot_eager"])
def test_what_a_call_leaves_in_slots_private_caches_and_weak_references_passes(pytester, backend):
    _passes(pytester, backend, LEFT, 3, "3 checked, 0 diverged, 0 checked partly")


@pytest.mark.parametrize(
    ("test", "backend", "leaf"),
    [
        ("test_slots", "corrupt_output", "input 1.total after the call"),
        ("test_a_private_cache_keyed_by_size", "corrupt_output", "attribute _tables[3]"),
        (
            "test_a_weight_reached_through_a_weak_reference",
            "corrupt_gradient",
            "grad of parameter 'embedding().weight'",
        ),
    ],
)
def test_a_wrong_value_left_in_a_slot_a_cache_or_through_a_weak_reference_fails(
    pytester, test, backend, leaf
):
    pytester.makepyfile(test_left=LEFT)
    result = _run(pytester, f"planted:{backend}", "-k", test)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([f"*differing at {leaf.replace('[', '[[]')}:*"])


GENERATORS = """
import numpy as np
import torch

class Noisy(torch.nn.Module):
    def forward(self, x, generator):
        return x + torch.randn(x.shape, generator=generator)

def test_a_torch_generator_argument():
    generator = torch.Generator().manual_seed(0)
    out = Noisy()(torch.zeros(3), generator)
    reference = torch.Generator().manual_seed(0)
    assert torch.equal(out, torch.randn(3, generator=reference))
    assert torch.equal(torch.rand(2, generator=generator), torch.rand(2, generator=reference))

class NumpyNoisy(torch.nn.Module):
    def forward(self, x, rng):
        return x + torch.from_numpy(rng.standard_normal(x.shape).astype("float32"))

def test_a_numpy_generator_argument():
    rng = np.random.default_rng(0)
    out = NumpyNoisy()(torch.zeros(3), rng)
    reference = np.random.default_rng(0)
    assert torch.equal(out, torch.from_numpy(reference.standard_normal(3).astype("float32")))
    assert rng.random() == reference.random()
"""


@pytest.mark.parametrize("backend", ["none", "aot_eager"])
def test_generators_among_the_inputs_are_state_put_back_before_every_run(pytester, backend):
    _passes(pytester, backend, GENERATORS, 2, "2 checked, 0 diverged, 0 checked partly")


def test_a_wrong_draw_from_a_generator_argument_fails_and_is_not_excused(pytester):
    pytester.makepyfile(test_generators=GENERATORS)
    result = _run(pytester, "planted:corrupt_output")
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(["*differing at output:*"])
    result.stdout.no_fnmatch_line("*not judged*")


IDENTITY = """
import types
import torch

A, B = object(), object()

class Mode(torch.nn.Module):
    def forward(self, x, settings):
        return x * 2 if settings.mode is A else x * 3

def test_mode_switch():
    model, settings = Mode(), types.SimpleNamespace(mode=A)
    assert torch.equal(model(torch.ones(2), settings), torch.full((2,), 2.0))
    settings.mode = B
    assert torch.equal(model(torch.ones(2), settings), torch.full((2,), 3.0))
"""


def test_module_level_sentinels_keep_their_identity_and_dynamos_identity_guard_bug_is_caught(
    pytester,
):
    # torch.compile(backend="aot_eager") still returns x * 2 after `settings.mode = B` (torch
    # 2.13, and the plain eager backend too): a real Dynamo bug. The second call is another
    # program (the sentinel is part of its signature), and its copies hold A and B themselves.
    pytester.makepyfile(test_identity=IDENTITY)
    assert _run(pytester, "none").ret == 0
    result = _run(pytester, "aot_eager")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*module call 2 (test_identity.Mode), differing at output:*"])


LAZY = {
    "lazylib/__init__.py": """
import torch

__all__ = ["double", "made_on_first_use"]

class Loader:
    # a lazy loader of an optional dependency: any attribute imports it (or asks to install it)
    def __getattr__(self, name):
        raise RuntimeError(f"finding functions ran the lazy loader's __getattr__({name!r})")

optional = Loader()

def double(x):
    return x * 2

def __getattr__(name):
    raise RuntimeError(f"finding functions ran the module's __getattr__({name!r})")
""",
}


def test_finding_functions_never_runs_a_lazy_loader_or_a_module_getattr(pytester):
    for path, text in LAZY.items():
        pytester.path.joinpath(*path.split("/")[:-1]).mkdir(exist_ok=True)
        pytester.path.joinpath(path).write_text(text)
    pytester.makepyfile(
        """
        import torch
        import lazylib

        def test_double():
            assert torch.equal(lazylib.double(torch.ones(2)), torch.full((2,), 2.0))
        """
    )
    pytester.syspathinsert()
    result = _run(pytester, "none", "--compile-parity-functions=lazylib")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*intercepted function calls in 1 test(s): 1 checked*"])
    result.stdout.no_fnmatch_line("*finding functions ran*")
    report = _run(pytester, "none", "--compile-parity-functions=lazylib", "-rA")
    report.stdout.fnmatch_lines(["*lazylib.made_on_first_use: not classified*"])


# A module that takes its parameter from a store each call, as Pyro's modules take theirs from
# the parameter store: the checker's long-lived copy then holds the test's own tensor, and
# syncing it into itself would bump its version under the test's autograd graph.
STORE = """
import torch

STORE = {}

class FromStore(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.ones(3, dtype=torch.float64))
        STORE["w"] = self.w

    def forward(self, x):
        self._parameters["w"] = STORE["w"]
        return x * self.w

def test_two_calls_then_one_backward():
    model, x = FromStore(), torch.ones(3, dtype=torch.float64, requires_grad=True)
    total = model(x).sum() + model(torch.ones(2, 3, dtype=torch.float64)).sum()
    total.backward()
    assert model.w.grad.tolist() == [3.0, 3.0, 3.0]
"""


@pytest.mark.parametrize("backend", ["none", "aot_eager"])
def test_a_copy_holding_the_tests_own_tensor_leaves_it_unwritten(pytester, backend):
    pytester.makepyfile(test_suite=STORE)
    _run(pytester, backend).assert_outcomes(passed=1)
