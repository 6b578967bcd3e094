"""The control: the compiled side's own path with no compiler, behind every failing verdict.

A difference the control shows too is the checker's (a state it cannot rebuild, a value it cannot
compare): the leaf is not judged, the test does not fail, and the summary says "checked partly".
A difference the control does not show is the compiler's, and fails as before. The same path is
the backend `none`, which gives a plain run's verdicts on any suite.
"""

from __future__ import annotations

import json

import pytest

# The id of the module an output was computed on: eager's is the caller's, every copy's its own.
CHECKER_LIMIT = """
import pytest
import torch
from torch import nn


class Tagged(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 3)

    def forward(self, x):
        return self.lin(x), id(self) % 1000003


@pytest.mark.compile_parity
def test_checked(compile_parity):
    compile_parity(Tagged(), torch.randn(2, 3))


def test_adopted():
    Tagged()(torch.randn(2, 3))
"""


def test_a_difference_the_control_shows_too_is_the_checker_s_and_not_judged(pytester):
    pytester.makepyfile(CHECKER_LIMIT)
    result = pytester.runpytest(
        "--compile-backend=aot_eager", "--compile-parity=all", "--compile-report=report.json", "-rA"
    )
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(
        [
            "*output?1?: not judged: the control run (this call through the compiled side's own "
            "path*differs from eager here too (output?1?: eager has *",
            "*checked partly: 2 test(s) with 2 leaf verdict(s) the checker could not give*",
        ]
    )
    result.stdout.fnmatch_lines(["*checked partly 1 call(s) of *Tagged: not judged (the control)*"])
    report = json.loads((pytester.path / "report.json").read_text())
    assert report["totals"]["not_judged"] == 2
    for test in report["tests"].values():
        assert test["not_judged"] == {"the control": 1}
        assert "stage" not in test  # no triage: nothing was confirmed
    assert (
        report["coverage"]["classes"][
            "test_a_difference_the_control_shows_too_is_the_checker_s_and_not_judged.Tagged"
        ]["status"]
        == "checked partly"
    )


def test_a_difference_the_control_does_not_show_is_the_compiler_s(pytester):
    pytester.makepyfile(CHECKER_LIMIT)
    result = pytester.runpytest("--compile-backend=planted:corrupt_output", "-k", "test_checked")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*output?0?: values are not close*", "*stage: *"])


PLAIN = """
import pytest
import torch
from torch import nn


def test_model_trains():
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = torch.randn(16, 4), torch.randn(16, 1)
    for _ in range(3):
        optimizer.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        optimizer.step()


def test_rejects_bad_input():
    with pytest.raises(RuntimeError):
        nn.Linear(4, 2)(torch.randn(3, 5))


@pytest.mark.compile_parity
def test_marked(compile_parity):
    compile_parity(torch.nn.functional.softmax, torch.randn(3, 5), dim=-1)
"""


@pytest.mark.parametrize("mode", ["all", "marked"])
def test_the_backend_none_compiles_nothing_and_gives_a_plain_run_s_verdicts(pytester, mode):
    pytester.makepyfile(PLAIN)
    result = pytester.runpytest(
        "--compile-backend=none", f"--compile-parity={mode}", "--compile-report=report.json"
    )
    result.assert_outcomes(passed=3)
    report = json.loads((pytester.path / "report.json").read_text())
    assert report["totals"]["graphs"] == 0 and report["totals"]["not_judged"] == 0
    assert {test["backend"] for test in report["tests"].values()} == {"none"}


def test_the_backend_none_is_a_marker_setting_too(pytester):
    pytester.makepyfile(
        """
        import pytest, torch
        from pytest_torchcompile import assert_compile_parity

        def test_outside_pytest_s_fixtures():
            result = assert_compile_parity(torch.sin, torch.randn(3), backend="none")
            assert result.graphs == 0
        """
    )
    pytester.runpytest().assert_outcomes(passed=1)
