"""Zero-change mode: each test compiles afresh by default, compiles that serve later tests
(--compile-parity-shared), and the signature cap."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_torchcompile.running.shared_compiles import SharedCompiles

SUITE = """
import pytest, torch

class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(4, 3)

    def forward(self, x):
        return torch.relu(self.a(x)).sum(-1)

@pytest.mark.parametrize("batch", [2, 3, 5])
def test_net(batch):
    torch.manual_seed(batch)
    assert Net()(torch.randn(batch, 4)).shape == (batch,)
"""

needs_regions = pytest.mark.skipif(
    not SharedCompiles.available(),
    reason="this torch has no isolate_recompiles: each test compiles afresh",
)


def _run(pytester: pytest.Pytester, *args: str, shared: bool = True) -> pytest.RunResult:
    sharing = ("--compile-parity-shared",) if shared else ()
    return pytester.runpytest(
        "--compile-parity=all", "-p", "no:cacheprovider", "--compile-report=r.json", *sharing, *args
    )


def _checks(pytester: pytest.Pytester) -> dict[str, dict[str, int]]:
    """Each test's intercepted checks by how they got their compiled code."""
    report = json.loads((pytester.path / "r.json").read_text())
    tests = report["tests"]
    return {node.split("::")[-1]: test["costs"].get("checks", {}) for node, test in tests.items()}


@needs_regions
def test_a_later_test_reuses_the_compile_and_a_new_size_compiles_one_dynamic_graph(pytester):
    pytester.makepyfile(test_suite=SUITE)
    result = _run(pytester, "--compile-backend=aot_eager")
    result.assert_outcomes(passed=3)
    assert _checks(pytester) == {
        "test_net[2]": {"compiled static": 1},
        "test_net[3]": {"compiled dynamic": 1},
        "test_net[5]": {"reused a compile": 1},
    }
    result.stdout.fnmatch_lines(
        ["*intercepted checks: 1 compiled static, 1 compiled dynamic, 1 reused a compile*"]
    )


@needs_regions
def test_a_dynamic_graph_bug_is_caught_where_it_was_compiled_and_where_it_was_reused(pytester):
    pytester.makepyfile(
        test_suite=SUITE
        + """
def test_two_sizes():
    assert Net()(torch.randn(7, 4)).shape == (7,)
    assert Net()(torch.randn(11, 4)).shape == (11,)
"""
    )
    planted = "--compile-backend=planted:wrong_for_dynamic_shapes"
    # Every call: the test's second call would otherwise be skipped, its class diverged already.
    result = _run(pytester, planted, "--compile-parity-every-call", "-k", "2 or two")
    result.assert_outcomes(passed=1, failed=1)  # test_net[2]'s static graph is right
    result.stdout.fnmatch_lines(
        [
            "*module call 1 (test_suite.Net), differing at output*",
            "*(the compiled side ran graphs compiled for this call, with dynamic shapes)",
            "*module call 2 (test_suite.Net), differing at output*",
            "*(the compiled side reused graphs compiled for an earlier call of this class and "
            "structure in the session*",
        ]
    )


@needs_regions
def test_triage_replays_a_divergence_of_a_session_dynamic_graph_with_dynamic_shapes(pytester):
    """The test's one call ran the dynamic graph test_net[2]'s size and its own made: a fresh
    replay would compile it static (and agree), so triage replays it with dynamic=true."""
    pytester.makepyfile(
        test_suite=SUITE
        + """
def test_one_size():
    assert Net()(torch.randn(7, 4)).shape == (7,)
"""
    )
    result = _run(pytester, "--compile-backend=planted:wrong_for_dynamic_shapes", "-k", "2 or one")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*(the compiled side ran graphs compiled for this call, with dynamic shapes)",
            "*stage: Dynamo OK, AOTAutograd OK, decompositions OK -> "
            "planted:wrong_for_dynamic_shapes diverges (replayed with dynamic=true: *",
        ]
    )
    report = json.loads((pytester.path / "r.json").read_text())
    repro = Path(report["tests"]["test_suite.py::test_one_size"]["repro"])
    assert "'dynamic': 'true'" in repro.read_text()
    # without the bisect's replays, the repro takes the dynamic shapes its graphs had
    result = _run(
        pytester,
        "--compile-backend=planted:wrong_for_dynamic_shapes",
        "-k",
        "2 or one",
        "--compile-bisect=off",
    )
    result.assert_outcomes(passed=1, failed=1)
    report = json.loads((pytester.path / "r.json").read_text())
    repro = Path(report["tests"]["test_suite.py::test_one_size"]["repro"])
    assert "'dynamic': 'true'" in repro.read_text()


def test_the_none_backend_counts_no_check_as_compiled_or_reused(pytester):
    pytester.makepyfile(test_suite=SUITE)
    result = _run(pytester, "--compile-backend=none")
    result.assert_outcomes(passed=3)
    assert _checks(pytester) == {f"test_net[{batch}]": {} for batch in (2, 3, 5)}
    result.stdout.no_fnmatch_line("*intercepted checks*")


def test_by_default_each_test_compiles_afresh(pytester):
    pytester.makepyfile(test_suite=SUITE)
    result = _run(pytester, "--compile-backend=planted:wrong_for_dynamic_shapes", shared=False)
    result.assert_outcomes(passed=3)  # each test's one call compiles a static graph
    assert set(map(json.dumps, _checks(pytester).values())) == {'{"compiled static": 1}'}


@needs_regions
def test_the_sessions_compiles_never_count_against_a_tests_own_compile(pytester):
    pytester.makepyfile(
        test_suite=SUITE
        + """
def test_own_compile():
    graphs = []

    def counting(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    torch._dynamo.config.error_on_recompile = True
    try:
        model = torch.compile(Net(), backend=counting)
        model(torch.randn(2, 4))
        model(torch.randn(2, 4))
    finally:
        torch._dynamo.config.error_on_recompile = False
    assert len(graphs) == 1
"""
    )
    result = _run(pytester, "--compile-backend=aot_eager")
    result.assert_outcomes(passed=4)


@needs_regions
def test_a_module_with_its_own_hook_compiles_in_each_test(pytester):
    pytester.makepyfile(
        """
        import pytest, torch

        @pytest.mark.parametrize("scale", [2.0, 3.0])
        def test_hooked(scale):
            model = torch.nn.Linear(4, 3)
            model.register_forward_hook(lambda module, args, out: out * scale)
            torch.testing.assert_close(model(torch.ones(2, 4)), (torch.ones(2, 4) @ model.weight.T + model.bias) * scale)
        """
    )
    result = _run(pytester, "--compile-backend=aot_eager", "--compile-parity-every-call")
    result.assert_outcomes(passed=2)
    assert set(map(json.dumps, _checks(pytester).values())) == {'{"compiled static": 1}'}


def test_the_signature_cap_skips_later_signatures_of_a_class_and_says_so(pytester):
    pytester.makepyfile(test_suite=SUITE)
    result = _run(
        pytester, "--compile-backend=planted:corrupt_output", "--compile-parity-signatures=1"
    )
    result.assert_outcomes(passed=2, failed=1)  # only the first signature is checked
    result.stdout.fnmatch_lines(
        [
            "*2 call(s) in 2 tests: test_suite.Net: the cap on input signatures per module class or "
            "function is reached: 1 input signatures of it checked (--compile-parity-signatures)"
        ]
    )


def test_the_cap_is_a_marker_key_too(pytester):
    pytester.makepyfile(
        SUITE.replace(
            "@pytest.mark.parametrize",
            "@pytest.mark.compile_parity(parity_signatures=2)\n@pytest.mark.parametrize",
        )
    )
    result = _run(pytester, "--compile-backend=aot_eager")
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(["*input signatures of it checked (marker*"])


def test_a_cap_of_zero_is_refused_naming_where_it_came_from(pytester):
    pytester.makepyfile(test_suite=SUITE)
    result = _run(pytester, "--compile-parity-signatures=0")
    assert result.ret != 0
    result.stderr.fnmatch_lines(["*Invalid --compile-parity-signatures='0'*positive integer*"])


@needs_regions
def test_a_class_at_the_recompile_limit_starts_afresh_and_the_other_classes_keep_theirs(
    pytester,
):
    import torch._dynamo.config

    pytester.makepyfile(
        test_suite="""
import pytest, torch

class Net(torch.nn.Module):
    def forward(self, x):
        return torch.sin(x) * 2

class Other(torch.nn.Module):
    def forward(self, x):
        return torch.cos(x) + 1

def test_other_first():
    Other()(torch.randn(3))

@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_net(dtype):
    Net()(torch.randn(3, dtype=dtype))

def test_other_again():
    Other()(torch.randn(3))
"""
    )
    with torch._dynamo.config.patch(recompile_limit=2):  # the in-process run's
        result = _run(pytester, "--compile-backend=aot_eager", "--compile-parity-every-call")
    result.assert_outcomes(passed=5)
    checks = _checks(pytester)
    assert checks["test_net[dtype2]"] == {"compiled static": 1}  # in a region of its own
    assert checks["test_other_again"] == {"reused a compile": 1}
    result.stdout.fnmatch_lines(["*1 a fresh compile cache after the recompile limit*"])


WRAPPED_UPDATE = """
import pytest, torch

class Summing(torch.nn.Module):
    # As torchmetrics' Metric: `update` is kept wrapped in a closure over the module and its
    # own bound method, and a copy (deepcopy, pickling) wraps its own methods anew.
    def __init__(self):
        super().__init__()
        self.register_buffer("total", torch.zeros(()))
        self.calls = 0
        self.update = self._wrap(self.update)

    def _wrap(self, update):
        def wrapped(x):
            self.calls += 1
            update(x)
        return wrapped

    def update(self, x):
        self.total += x.sum()

    def forward(self, x):
        self.update(x)
        return self.total * 2

    def __getstate__(self):
        return {k: v for k, v in self.__dict__.items() if k != "update"}

    def __setstate__(self, state):
        self.__dict__.update(state)
        self.update = self._wrap(self.update)

@pytest.mark.parametrize("n", [1, 2, 3])
def test_sums(n):
    metric = Summing()
    x = torch.arange(4.0)
    for _ in range(n):
        out = metric(x)
    assert metric.calls == n
    torch.testing.assert_close(out, torch.tensor(12.0 * n))
"""


# The same closure over a lock too: the copier cannot rebuild it over the copy.
WRAPPED_WITH_LOCK = WRAPPED_UPDATE.replace(
    "import pytest, torch", "import threading, pytest, torch"
).replace(
    "        def wrapped(x):\n",
    "        lock = threading.Lock()\n\n        def wrapped(x):\n            assert lock is not None\n",
)


@needs_regions
@pytest.mark.parametrize("backend", ["none", "aot_eager"])
def test_a_module_holding_code_bound_to_itself_is_shared_with_its_closure_rebuilt(
    pytester, backend
):
    """The synced copy's `update` is the closure rebuilt over the copy (its calls update the
    copy, never the test's module): the module is shared like any other."""
    pytester.makepyfile(test_suite=WRAPPED_UPDATE)
    result = _run(pytester, f"--compile-backend={backend}", "--compile-parity-every-call")
    result.assert_outcomes(passed=3)
    report = json.loads((pytester.path / "r.json").read_text())
    [calls] = report["tests"]["test_suite.py::test_sums[3]"]["module_calls"]
    assert (calls["outcome"], calls["calls"], calls["reason"]) == ("checked", 3, "")
    if backend == "aot_eager":
        assert _checks(pytester)["test_sums[3]"].get("reused a compile", 0) >= 2


@needs_regions
@pytest.mark.parametrize("backend", ["none", "aot_eager"])
def test_a_module_holding_code_bound_to_itself_that_cannot_be_rebuilt_is_compiled_per_test(
    pytester, backend
):
    """Where the closure also holds what cannot be copied (a lock), a synced copy would hold
    the test's module's closure, and its calls would update the test's module: such a module
    is never shared (each test copies it through its own copy protocol and compiles it), and
    the report says why."""
    pytester.makepyfile(test_suite=WRAPPED_WITH_LOCK)
    result = _run(pytester, f"--compile-backend={backend}", "--compile-parity-every-call")
    result.assert_outcomes(passed=3)
    report = json.loads((pytester.path / "r.json").read_text())
    [calls] = report["tests"]["test_suite.py::test_sums[3]"]["module_calls"]
    assert (calls["outcome"], calls["calls"]) == ("checked", 3)
    assert calls["reason"].startswith(
        "compiled for this test alone, not shared: attribute 'update' of the module holds code "
        "that reaches the module synced from (update.<closure variable "
    )


@needs_regions
def test_a_wrong_backend_still_fails_a_module_holding_code_bound_to_itself(pytester):
    pytester.makepyfile(test_suite=WRAPPED_UPDATE)
    wrong = "--compile-backend=planted:corrupt_output"
    result = _run(pytester, wrong, "--compile-parity-every-call")
    result.assert_outcomes(failed=3)  # compiled per test, each call is checked
    result.stdout.fnmatch_lines(["*module call 3 (test_suite.Summing), differing at output*"])
