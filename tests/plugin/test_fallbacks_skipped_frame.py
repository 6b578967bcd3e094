"""A frame Dynamo gave up on is skipped from then on: later calls run it eagerly, with no compile
to say so, and are reported as eager fallbacks, never counted as parity."""

from __future__ import annotations

import pytest

from tests.plugin.test_false_alarms import OBSERVED_IN_A_TRACE, TRACE_STACK

# The module of test_false_alarms' suite, called in a trace first and outside it then.
OBSERVED = OBSERVED_IN_A_TRACE.split("@pytest.mark.parametrize")[0]
TRACE_THEN_OUTSIDE = (
    OBSERVED
    + """
@pytest.mark.parametrize("n", [2, 3])
def test_inside_a_trace(n):
    model = Observed()
    with tracelib.Trace() as trace:
        model(torch.ones(n))
    assert list(trace.sites) == ["obs"]
    torch.testing.assert_close(model(torch.ones(n)), torch.full((n,), 2.0))
"""
)


@pytest.mark.parametrize(
    ("backend", "summary"),
    [
        # The frame raised while Dynamo traced it (the replay in the trace), so Dynamo skips it:
        # the call outside the trace never reaches the corrupting backend.
        ("planted:corrupt_output", "*calls in 2 test(s): 0 checked, 0 diverged*"),
        ("aot_eager", "*calls in 2 test(s): 0 checked, 0 diverged*"),
        ("none", "*calls in 2 test(s): 2 checked, 0 diverged*"),  # no Dynamo: nothing skipped
    ],
)
def test_a_call_into_a_frame_dynamo_now_skips_is_an_eager_fallback(pytester, backend, summary):
    pytester.makepyfile(tracelib=TRACE_STACK, test_suite=TRACE_THEN_OUTSIDE)
    result = pytester.runpytest(
        "--compile-parity=all", "-p", "no:cacheprovider", f"--compile-backend={backend}"
    )
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines([summary])
    if backend != "none":
        result.stdout.fnmatch_lines(
            ["*test_suite.Observed: the compiled side ran eagerly: Dynamo skips this frame*"]
        )
