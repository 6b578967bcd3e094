"""The snapshot re-runs start from: the state before the call, sharing what the compiled call left alone."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import torch
from torch import nn

from pytest_torchcompile import runner
from pytest_torchcompile.errors import ParityError
from pytest_torchcompile.runner import Checker, isolated
from pytest_torchcompile.settings import Settings


class Counting(nn.Module):
    """A linear layer that counts its calls in a buffer and scales its output by the count."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(4, 4)
        self.register_buffer("count", torch.zeros(()))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.count.add_(1)
        return self.linear(x) * self.count


@pytest.fixture
def snapshots(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[dict[int, Any]]]:
    """The memo of every snapshot the checker takes of a module's call (module, args, kwargs)."""
    memos: list[dict[int, Any]] = []
    clone = runner.clone_tree

    def spy(tree: Any, memo: dict[int, Any] | None = None) -> Any:
        if isinstance(tree, tuple) and len(tree) == 3 and isinstance(tree[0], nn.Module):
            memos.append(dict(memo or {}))
        return clone(tree, memo)

    monkeypatch.setattr(runner, "clone_tree", spy)
    yield memos


def test_the_snapshot_copies_only_what_the_compiled_call_changed(
    snapshots: list[dict[int, Any]],
) -> None:
    model, x = Counting(), torch.randn(2, 4)
    checker = Checker(Settings(backend="eager"))
    with isolated(checker.accountant):
        checker(model, x)
        copy = checker._module_copies[id(model)][1]
    (memo,) = snapshots
    for name in ("linear.weight", "linear.bias"):  # untouched: the compiled copy's own tensor
        assert memo[id(model.get_parameter(name))] is copy.get_parameter(name)
    assert id(model.count) not in memo  # written by the call: copied from the caller's buffer
    assert id(x) in memo  # the compiled side's input copy, which the call did not write


def test_re_runs_start_from_the_state_before_the_call() -> None:
    """A call that writes its state still re-runs from the state before it: a plain eager re-run
    reproduces eager, so the failure is the compiler's, not eager's nondeterminism."""
    model = Counting()
    _blames_the_compiler(model)
    assert model.count.item() == 1  # the caller's module saw one call


def _blames_the_compiler(model: nn.Module) -> None:
    """A corrupted output fails the check, and an eager re-run reproduced eager's result."""
    checker = Checker(Settings(backend="planted:corrupt_output"))
    with isolated(checker.accountant), pytest.raises(ParityError) as failure:
        checker(model, torch.randn(2, 4))
    assert "output: values are not close" in str(failure.value)
    assert "does not reproduce" not in str(failure.value)


class FirstCall(nn.Module):
    """Doubles its output on the first call only, which it remembers in an attribute it creates."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        scale = 3.0 if hasattr(self, "called") else 2.0
        self.called = True
        return self.linear(x) * scale


def test_an_attribute_the_call_creates_is_a_change_to_re_run_before() -> None:
    """A plain attribute that appears during the call is state the call changed: re-runs start
    from before it existed, so eager re-run reproduces eager and the compiler is blamed."""
    model = FirstCall()
    _blames_the_compiler(model)
    assert model.called
