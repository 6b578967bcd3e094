"""One check as one value: `Checker.outcome` keeps the exception a check ends in, `check` raises it."""

from __future__ import annotations

import pytest
import torch

from pytest_torchcompile.errors import ParityError, UncheckableCallError
from pytest_torchcompile.outcome import Happened
from pytest_torchcompile.runner import Checker
from pytest_torchcompile.settings import Settings


def _sin(x: torch.Tensor) -> torch.Tensor:
    return torch.sin(x)


def _shifted_when_compiled(x: torch.Tensor) -> torch.Tensor:
    return x + 1 if torch.compiler.is_compiling() else x


def _iterator(x: torch.Tensor) -> object:
    return iter([x])


def test_each_ending_is_one_outcome_and_check_raises_the_same_exception() -> None:
    checker = Checker(Settings(backend="eager"))
    x = torch.ones(3)
    with checker.isolated():
        passed = checker.outcome(_sin, (x,), {})
        diverged = checker.outcome(_shifted_when_compiled, (x,), {})
        uncheckable = checker.outcome(_iterator, (x,), {})
        raised = checker.outcome(3, (x,), {})  # type: ignore[arg-type]
        with pytest.raises(ParityError) as failure:
            checker.check(_shifted_when_compiled, (x,), {})
    assert passed.happened is Happened.PASSED and passed.error is None
    assert torch.equal(passed.eager, torch.sin(x)) and "output" in passed.errors
    assert passed.how_checked == ("checked", "") and not passed.uncompared
    assert diverged.happened is Happened.DIVERGED and isinstance(diverged.error, ParityError)
    assert diverged.failing_leaves == ["output"]
    assert str(failure.value) == str(diverged.error)
    assert uncheckable.happened is Happened.UNCHECKABLE
    assert isinstance(uncheckable.error, UncheckableCallError)
    assert raised.happened is Happened.RAISED and isinstance(raised.error, TypeError)


def test_the_summary_is_what_the_record_reads() -> None:
    checker = Checker(Settings(backend="eager"))
    with checker.isolated():
        checker(_sin, torch.ones(3))
        summary = checker.summary()
    assert summary.calls == checker.calls == 1
    assert summary.devices_seen == ("cpu",)
    assert summary.counts == checker.accountant.counts()
    leaves = [error["leaf"] for error in summary.largest_errors]
    assert leaves == sorted(checker.largest_errors) and "output" in leaves
    assert summary.notes == tuple(checker.notes)
    assert summary.settings is checker.settings and summary.rejected == 0
