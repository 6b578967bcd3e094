"""A failing parity test's report holds the user's log records, never torch's internal ones.

torch's structured trace (the `torch.__trace` logger behind TORCH_TRACE and tlparse) logs an
empty DEBUG record for every compile event; when anything lets those reach pytest's log capture,
each failure drowns in hundreds of them. They reach it two ways: propagating to the root
logger (torch 2.11 before its logging is configured), or, with pytest >= 9.1, through the capture
handlers pytest attaches to every logger that does not propagate (torch's default). The tests set
up both, so they exercise the fix on either torch release.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

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
def structured_trace(
    request: pytest.FixtureRequest, propagating: bool
) -> Iterator[list[logging.LogRecord] | None]:
    """torch's trace logger propagating or not; with the param on, also a handler on it, as
    TORCH_TRACE installs one: torch then really emits its trace records (without one, 2.13 skips
    them). Yields what the handler received."""
    trace, parent = logging.getLogger("torch.__trace"), logging.getLogger("torch")
    propagate = trace.propagate, parent.propagate
    trace.propagate = parent.propagate = propagating
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


@pytest.mark.parametrize(
    "propagating", [True, False], ids=["propagating (torch 2.11)", "not propagating (pytest 9.1)"]
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
