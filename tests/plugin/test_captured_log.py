"""A failing parity test's report holds the user's log records, never torch's internal ones.

torch's structured trace (the `torch.__trace` logger behind TORCH_TRACE and tlparse) logs an
empty DEBUG record for every compile event; when anything lets those reach pytest's log capture,
each failure drowns in hundreds of them. torch 2.11 lets them propagate to the root logger
(2.13 does not); the tests set that up explicitly, so they exercise the fix on either release.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

from pytest_torchcompile._compat import TORCH_VERSION

FAILING = """
import logging

import pytest
import torch

@pytest.mark.compile_parity
def test_model(compile_parity):
    logging.getLogger("user").debug("the user's own record")
    compile_parity(lambda x: torch.relu(x.sin() * 2) + 1, torch.randn(8))
"""


@pytest.fixture(params=[False, True], ids=["no trace", "structured trace on"])
def structured_trace(request: pytest.FixtureRequest) -> Iterator[list[logging.LogRecord] | None]:
    """torch's trace logger propagating, as on torch 2.11; with the param on, also a handler on
    it, as TORCH_TRACE installs one: torch then really emits its trace records (without one,
    2.13 skips them). Yields what the handler received."""
    trace, parent = logging.getLogger("torch.__trace"), logging.getLogger("torch")
    propagate = trace.propagate, parent.propagate
    trace.propagate = parent.propagate = True
    received: list[logging.LogRecord] = []

    class Trace(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            received.append(record)

    handler = Trace()
    if request.param:
        trace.addHandler(handler)
    yield received if request.param else None
    trace.removeHandler(handler)
    trace.propagate, parent.propagate = propagate


@pytest.mark.xfail(
    TORCH_VERSION < (2, 13),
    reason="torch 2.11 still puts trace records in the captured log by a path not yet found "
    "(seen on the GPU machine); the trace logger does not propagate during the test",
    strict=False,
)
@pytest.mark.parametrize("level", [[], ["--log-level=DEBUG"]], ids=["default", "DEBUG"])
def test_a_failure_report_holds_no_torch_trace_records(
    pytester: pytest.Pytester, structured_trace: list[logging.LogRecord] | None, level: list[str]
) -> None:
    pytester.makepyfile(test_failing=FAILING)
    result = pytester.runpytest("--compile-backend=planted:corrupt_output", *level)
    result.assert_outcomes(failed=1)
    output = result.stdout.str()
    assert "torch.__trace" not in output
    if level:  # the user asked for DEBUG: their record is there, and nothing of torch's
        result.stdout.fnmatch_lines(["*Captured log call*", "DEBUG    user:*the user's own record"])
        captured = output.split("Captured log call", 1)[1].split("\n-", 1)[0]
        assert " torch" not in captured, captured
    else:
        assert "Captured log" not in output
    if structured_trace is not None:
        assert structured_trace, "torch emitted no trace record: the test would prove nothing"
