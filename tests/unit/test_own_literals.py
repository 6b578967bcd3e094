"""The running test's own float literals reach the ties lattice: Hypothesis collects none from a
test file, so a margin written in the test would otherwise never be drawn."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from hypothesis import given, settings

from pytest_torchcompile import _compat
from pytest_torchcompile import strategies as tcst
from pytest_torchcompile.strategies._literals import own_literals

THRESHOLD = 0.83  # a module constant the test names


def _helper(x: torch.Tensor) -> torch.Tensor:
    return x.clamp(max=2.63)


def _groups_holding_the_margin() -> int:
    """How many of 60 derandomized float64 groups hold the test's margin or twice it."""
    held = []

    @settings(max_examples=60, derandomize=True, database=None, deadline=None)
    @given(tcst.tensor_groups(2, dtypes=torch.float64, broadcast=False, shapes=(64,)))
    def test(xs: tuple[torch.Tensor, ...]) -> None:
        margin = 1.37  # written here only: no module Hypothesis reads holds it
        held.append(any(((x.abs() == margin) | (x.abs() == 2 * margin)).any() for x in xs))

    test()
    return sum(held)


def test_a_literal_written_in_the_test_is_on_the_lattice() -> None:
    assert _groups_holding_the_margin() >= 10


def test_without_the_test_s_literals_it_is_never_drawn(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_compat, "hypothesis_test_function", lambda: None)
    assert _groups_holding_the_margin() == 0


def test_the_test_s_code_its_nested_code_and_its_module_s_helpers_are_read() -> None:
    def test(x: Any) -> Any:
        scale = lambda t: t * 0.61  # noqa: E731
        return _helper(scale(x)) > THRESHOLD

    assert set(own_literals(test)) == {0.61, 2.63, 0.83}
