"""A module that holds a closure over itself (`self.step = counted`, as torchmetrics wraps a
metric's `update`) and no copy protocol of its own: the compiled side's copy holds the same code
over the copy, so its run writes the copy's buffer, which is compared, and never the caller's."""

from __future__ import annotations

import pytest

SUITE = """
import functools
import torch


class Counter(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("total", torch.zeros(3))
        self.calls = 0
        step = self.step

        @functools.wraps(step)
        def counted(x):
            self.calls += 1
            return step(x)

        self.step = counted

    def step(self, x):
        self.total.add_(x)  # what the call leaves: the output does not show it
        return x * 2

    def forward(self, x):
        return self.step(x)


def test_counter():
    m = Counter()
    m(torch.ones(3))
    m(torch.full((3,), 2.0))
    assert m.calls == 2
    torch.testing.assert_close(m.total, torch.full((3,), 3.0))
"""


@pytest.mark.parametrize("backend", ["none", "aot_eager"])
def test_the_test_sees_its_own_calls_and_passes(pytester, backend):
    pytester.makepyfile(test_suite=SUITE)
    result = pytester.runpytest("--compile-parity=all", f"--compile-backend={backend}")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*1 checked, 0 diverged, 0 checked partly*"])


def test_a_buffer_update_the_compiled_side_drops_fails(pytester):
    # Before the copy's closure was rebuilt, the compiled side ran on the caller's module (the
    # closure's `self`), its copy's buffer was never written, and this passed as checked.
    pytester.makepyfile(test_suite=SUITE)
    result = pytester.runpytest(
        "--compile-parity=all", "--compile-backend=planted:skip_buffer_update"
    )
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*buffer 'total'*"])
