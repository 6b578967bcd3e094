"""The peer: PyTorch CI's own way of running a suite under compile, as a pytest plugin.

PyTorch runs its test suites under compile from torch/testing/_internal/common_utils.py
(`PYTORCH_TEST_WITH_DYNAMO`, `_AOT_EAGER`, `_INDUCTOR`): `TestCase._run_custom` wraps each
test's whole run in `torch._dynamo.optimize(backend, nopython=False)`, with `suppress_errors`
off and Dynamo reset before and after (strict mode, the default for PyTorch's own test files),
and the test's own assertions are the only oracle. That is what a library author can do today,
and what zero-change mode (`--compile-parity=all`) is judged against, so this plugin does the
same to every test of any suite, plain pytest functions and unittest methods alike:

    python -m pytest -p peer --peer-backend=aot_eager --peer-report=peer.json tests/

(with benchmarks/ on the path; benchmarks/third_party.py --peer runs it beside the plugin).
`--peer-backend` takes a registered backend name or `package.module:attr`, as
`--compile-backend` does. Each test's call report carries `peer.compile_time_s` (what Dynamo
and the backend spent compiling in it) and, where compiling the test body raised (a Dynamo or
backend exception rather than the test's own failure), `peer.compile_failure` with the
exception's type; both land in the JUnit XML as properties and, with `--peer-report`, in a
JSON file with their totals.
"""

from __future__ import annotations

import importlib
import json
import unittest
import unittest.mock
from collections.abc import Callable, Generator, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import torch
import torch._dynamo
import torch._dynamo.utils
import torch._inductor.config

Backend = str | Callable[..., Any]

COMPILE_ERRORS = (
    torch._dynamo.exc.TorchDynamoException,  # BackendCompilerFailed (InductorError),
    # TorchRuntimeError, InternalTorchDynamoError, Unsupported (under nopython), UserError...
    torch._dynamo.exc.FailOnRecompileLimitHit,
)
"""What compiling the test body raises; any other exception is the test's own failure."""

_COMPILE_TIME = pytest.StashKey[float]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("peer", "each test under torch._dynamo.optimize, as PyTorch CI runs")
    group.addoption(
        "--peer-backend",
        metavar="NAME",
        help="compile every test with this backend: a registered name (eager, aot_eager,"
        " inductor) or package.module:attr",
    )
    group.addoption(
        "--peer-report", metavar="PATH", help="write each test's compile time and failure as JSON"
    )
    group.addoption(
        "--peer-no-compiled-autograd",
        action="store_true",
        help="leave compiled autograd off on backends other than inductor"
        " (common_utils' PYTORCH_TEST_WITHOUT_COMPILED_AUTOGRAD=1)",
    )


def pytest_configure(config: pytest.Config) -> None:
    name = config.getoption("peer_backend")
    if not name:
        return
    # What common_utils sets at import when a PYTORCH_TEST_WITH_* flag is on.
    torch._dynamo.config.accumulated_recompile_limit = 64
    torch._dynamo.config.log_compilation_metrics = False
    torch._dynamo.config.issue_3_13_0_warning = False
    if name == "inductor":
        torch._inductor.config.fallback_random = True
    else:
        no_compiled_autograd = config.getoption("peer_no_compiled_autograd")
        torch._dynamo.config.compiled_autograd = not no_compiled_autograd
    config.pluginmanager.register(Peer(name, config.getoption("peer_report")), "peer-session")


def load_backend(spec: str) -> Backend:
    """A registered backend's name as it is, or the callable `package.module:attr` names
    (resolved as pytest_torchcompile.settings.load_backend_callable does, without importing
    the plugin that is being compared)."""
    if ":" not in spec:
        return spec
    module_name, _, attr = spec.partition(":")
    try:
        target: Any = importlib.import_module(module_name)
        for part in attr.split("."):
            target = getattr(target, part)
    except (ImportError, AttributeError) as exc:
        raise pytest.UsageError(f"--peer-backend {spec!r}: {exc}") from None
    if not callable(target):
        raise pytest.UsageError(f"--peer-backend {spec!r} is not callable")
    return target  # type: ignore[no-any-return]


def compile_failure(error: BaseException | None) -> str:
    """The qualified type of the compile error that failed a test (the raised exception or one
    it was raised from), or "" for the test's own failure."""
    while error is not None:
        if isinstance(error, COMPILE_ERRORS):
            return f"{type(error).__module__}.{type(error).__qualname__}"
        error = error.__cause__
    return ""


@contextmanager
def _optimized(item: pytest.Function, backend: Backend) -> Iterator[None]:
    """The test's run under `torch._dynamo.optimize(backend, nopython=False)`, built per test as
    common_utils' `compile_fn` is: for a TestCase, its whole `run` (setUp, the test, tearDown),
    as common_utils compiles `super().run`; for a test function, the function (pytest sets its
    fixtures up outside it, as unittest does setUpClass)."""
    optimize = torch._dynamo.optimize(backend, nopython=False)
    case = item.instance
    if isinstance(case, unittest.TestCase):
        case.run = optimize(case.run)  # type: ignore[method-assign]  # TestCase.__call__'s
        try:
            yield
        finally:
            del case.run
    else:
        function = item.obj
        item.obj = optimize(function)  # what pytest_pyfunc_call calls
        try:
            yield
        finally:
            item.obj = function


class Peer:
    """The session's hooks with the peer on: compile each test, and record what it cost."""

    def __init__(self, name: str, report: str | None) -> None:
        self.name = name
        self.backend = load_backend(name)
        self.report = report
        self.tests: dict[str, dict[str, Any]] = {}

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Generator[None, None, None]:
        if not isinstance(item, pytest.Function):  # a doctest or a plugin's own item
            return (yield)
        torch._dynamo.reset()
        torch.compiler.set_stance("default")
        try:
            with (
                unittest.mock.patch("torch._dynamo.config.suppress_errors", False),
                _optimized(item, self.backend),
            ):
                return (yield)
        finally:
            # Dynamo's compile time since the reset above (the reset clears it); a name of
            # torch._dynamo.utils that torch does not re-export.
            spent = torch._dynamo.utils.calculate_time_spent()["total_wall_time"]
            item.stash[_COMPILE_TIME] = spent
            torch._dynamo.reset()

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(
        self, item: pytest.Item, call: pytest.CallInfo[None]
    ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
        report = yield  # for a TestCase, pytest's unittest hook has set call.excinfo by now
        if call.when == "call" and _COMPILE_TIME in item.stash:
            spent: float = item.stash[_COMPILE_TIME]
            properties: list[tuple[str, object]] = [("peer.compile_time_s", round(spent, 3))]
            failure = compile_failure(call.excinfo.value if call.excinfo else None)
            if failure:
                properties.append(("peer.compile_failure", failure))
            report.user_properties.extend(properties)
            item.user_properties.extend(properties)  # the JUnit XML writes the teardown's
        return report

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when == "call" or (report.when == "setup" and not report.passed):
            entry: dict[str, Any] = {"outcome": report.outcome}
            for key, value in report.user_properties:
                if key.startswith("peer."):
                    entry[key.removeprefix("peer.")] = value
            self.tests[report.nodeid] = entry

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if not self.report or hasattr(session.config, "workerinput"):  # xdist: the controller's
            return
        tests = dict(sorted(self.tests.items()))
        totals = {
            "tests": len(tests),
            "compile_time_s": round(sum(t.get("compile_time_s", 0.0) for t in tests.values()), 3),
            "compile_failures": sum(bool(t.get("compile_failure")) for t in tests.values()),
        }
        document = {"backend": self.name, "totals": totals, "tests": tests}
        path = Path(self.report)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
