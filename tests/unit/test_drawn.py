"""benchmarks/edge_bugs/drawn.py's bug inputs, on the layouts and values where a plain
torch.compile (torch 2.13, CPU Inductor) was seen to diverge or not."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks" / "edge_bugs"))
import drawn

T = torch.randn(4, 3).mT  # (3, 4), stored transposed


@pytest.mark.parametrize(
    ("a", "b", "differ"),
    [
        (T, torch.randn(3, 4), True),
        (torch.randn(3, 4), T, True),
        (T, torch.randn(4), True),  # the second operand broadcast: compiled is row-major
        (T, T, False),
        (torch.randn(4), T, False),
        (T, torch.tensor(2.0), False),  # 0-d: compiled follows the first operand too
        (torch.randn(3, 8)[:, ::2], torch.randn(3, 4), False),  # sliced keeps the order
    ],
)
def test_copysign_layouts(a: torch.Tensor, b: torch.Tensor, differ: bool) -> None:
    assert drawn.TRIGGERS["test_copysign"](a, b) is differ


BYTES = torch.arange(1, 65, dtype=torch.int8)


@pytest.mark.parametrize(
    ("x", "wrong"),
    [
        (BYTES[:32].view(4, 8), True),
        (BYTES[:32].view(4, 8).mT, True),
        (BYTES[:16].expand(2, 16), True),  # rows of 16 in a row
        (BYTES[:1].expand(16), False),  # one element in memory
        (BYTES[::2], False),  # a gap between elements: not vectorized
        (BYTES[:15], False),
        (BYTES[:16].to(torch.uint8), True),
        (BYTES[:16] - 1, False),  # a zero: the minimum is what compiled returns anyway
        (BYTES[:16].to(torch.int16), False),
    ],
)
def test_amin_inputs(x: torch.Tensor, wrong: bool) -> None:
    assert drawn.TRIGGERS["test_amin"](x) is wrong


def test_margin_inputs_differ_by_the_margin_in_bfloat16() -> None:
    x2 = torch.tensor([0.0, 1.0, 2.0], dtype=torch.bfloat16)
    on = drawn.TRIGGERS["test_margin_2_9"]
    assert on(x2 + torch.tensor(2.9, dtype=torch.bfloat16), x2)
    assert not on(x2 + 2.875, x2)
    assert not on((x2 + 2.9).float(), x2.float())
