"""The state re-runs start from: the state before the call, kept as cheaply as the call allows."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import pytest
import torch
from torch import nn

from pytest_torchcompile.errors import ParityError
from pytest_torchcompile.judging import parity
from pytest_torchcompile.runner import Checker, isolated
from pytest_torchcompile.running import compiled, snapshot
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
def copied(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Any]]:
    """Every tree the checker copies with clone_tree."""
    trees: list[Any] = []
    clone = snapshot.clone_tree

    def spy(tree: Any, memo: dict[int, Any] | None = None) -> Any:
        trees.append(tree)
        return clone(tree, memo)

    for room in (compiled, snapshot):  # the compiled side's copies, and the state before a call
        monkeypatch.setattr(room, "clone_tree", spy)
    yield trees


def test_a_call_that_writes_a_buffer_keeps_only_that_buffer(copied: list[Any]) -> None:
    """Re-runs need the state before the call; a call that updates a running statistic keeps
    a copy of just that tensor, not of the module."""
    model, x = Counting(), torch.randn(2, 4)
    checker = Checker(Settings(backend="eager"))
    with isolated(checker.accountant):
        checker(model, x)  # compiles, and copies the module for the compiled side
        copied.clear()
        checker(model, x)
    assert not any(isinstance(tree, tuple) and isinstance(tree[0], nn.Module) for tree in copied)
    kept = [tree for tree in copied if isinstance(tree, dict)]
    assert kept == [{id(model.count): model.count}]


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


class CountingInPlace(Counting):
    """Counts its calls in a buffer and also doubles its input in place."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x.mul_(2)
        return super().forward(x)


def test_a_re_run_refuses_state_only_eager_wrote() -> None:
    """The compiled run (losing buffer updates) wrote only the input, so only the input's earlier
    value is kept; eager also wrote the buffer, so no re-run can start from before the call,
    and none is made up: the failure says so instead of excusing or re-judging anything."""
    model, x = CountingInPlace(), torch.randn(2, 4)
    checker = Checker(Settings(backend="planted:skip_buffer_update"))
    with isolated(checker.accountant), pytest.raises(ParityError) as failure:
        checker(model, x)
    message = str(failure.value)
    assert "buffer 'count': values are not close" in message
    assert "eager changed buffer 'count' in place where the compiled run did not" in message


def test_a_copy_written_through_an_aliasing_copy_counts_as_written() -> None:
    """deepcopy rebuilds views with their own version counters: writing one copy leaves the
    other's counter alone, but not its memory, so it is not shared as untouched."""
    base = torch.ones(6)
    x, y = base[:4], base[2:]
    x_copy, y_copy = copy.deepcopy((x, y))
    copies = snapshot.Copies({id(x): x_copy, id(y): y_copy})
    x_copy.mul_(2)
    assert copies.written() == {id(x), id(y)}
    assert copies.unchanged() == {}


def _train_step(
    model: nn.Module, optimizer: torch.optim.Optimizer, x: torch.Tensor, y: torch.Tensor
) -> torch.Tensor:
    optimizer.zero_grad()
    loss = nn.functional.mse_loss(model(x), y)
    loss.backward()
    optimizer.step()
    return loss.detach()


class Rebinding(nn.Module):
    """Binds its buffer anew on every call (no in-place write for a version counter to see)."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(4, 4)
        self.register_buffer("total", torch.zeros(4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.total = self.total + x.sum(0)
        return self.linear(x) + self.total


def _eager_and_rerun(
    monkeypatch: pytest.MonkeyPatch, fn: Any, *args: Any
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Eager's state after one checked call, and a plain eager re-run's, from the checker."""
    seen: dict[str, Any] = {}
    compare = parity.compare

    def spy(eager: Any, compiled: Any, options: Any, **reruns: Any) -> Any:
        assert reruns["eager_again"] is not None
        seen["eager"], seen["again"] = eager, reruns["eager_again"]()
        return compare(eager, compiled, options, **reruns)

    monkeypatch.setattr(parity, "compare", spy)
    checker = Checker(Settings(backend="eager"))
    with isolated(checker.accountant):
        checker(fn, *args)
    eager, again = seen["eager"], seen["again"]
    assert again.exception is None, again.exception
    return dict(eager.after, output=eager.output), dict(again.after, output=again.output)


@pytest.mark.parametrize(
    "make_optimizer",
    [
        lambda params: torch.optim.SGD(params, lr=0.1, momentum=0.9),
        # eps=1e-4: Adam's default 1e-8 is below float16's range (eager divides by zero there)
        lambda params: torch.optim.Adam(params, lr=1e-2, eps=1e-4),
    ],
    ids=["sgd-momentum", "adam"],
)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=str)
def test_a_re_run_of_a_first_optimizer_step_reproduces_eager_bit_for_bit(
    monkeypatch: pytest.MonkeyPatch, make_optimizer: Any, dtype: torch.dtype
) -> None:
    """The first step creates the optimizer's state (momentum buffers, step counters): a re-run
    must start without it, as the call did, not from the state eager's step left."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 4)).to(dtype)
    optimizer = make_optimizer(model.parameters())
    x, y = torch.randn(8, 8, dtype=dtype), torch.randn(8, 4, dtype=dtype)
    for _ in range(2):  # the first step, and one from the state it left
        eager, again = _eager_and_rerun(monkeypatch, _train_step, model, optimizer, x, y)
        assert eager.keys() == again.keys()
        assert any("optimizer state" in name for name in eager)
        for name, value in eager.items():
            if isinstance(value, torch.Tensor):
                assert torch.equal(value, again[name]), name
            else:
                assert value == again[name], name


def test_a_re_run_starts_from_a_buffer_the_call_rebinds(monkeypatch: pytest.MonkeyPatch) -> None:
    model, x = Rebinding(), torch.randn(2, 4)
    eager, again = _eager_and_rerun(monkeypatch, model, x)
    assert torch.equal(eager["buffer 'total'"], again["buffer 'total'"])
    assert torch.equal(eager["output"], again["output"])


def test_a_first_optimizer_step_with_a_planted_error_is_judged_not_called_nondeterministic() -> (
    None
):
    """The README's training example failed on a seed with "two eager runs differ": the re-run
    had started from the momentum buffers eager's step created. Judged faithfully, a planted
    gradient error is the compiler's, by the float64 reference."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 4))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    checker = Checker(Settings(backend="planted:corrupt_gradient"))
    with isolated(checker.accountant), pytest.raises(ParityError) as failure:
        checker(_train_step, model, optimizer, torch.randn(8, 8), torch.randn(8, 4))
    message = str(failure.value)
    assert "parameter '0.weight': values are not close" in message
    assert "does not reproduce" not in message
    assert "Judged against a float64 reference" in message
