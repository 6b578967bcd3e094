"""A function that updates its input in place: the mutated input is compared after the call."""

from __future__ import annotations

import pytest
import torch
from models import ema_update


@pytest.mark.compile_parity(max_graph_breaks=0)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=str)
def test_ema_update(compile_parity, device, dtype):
    average = torch.zeros(64, device=device, dtype=dtype)
    for step in range(3):
        value = torch.full((64,), float(step + 1), device=device, dtype=dtype)
        compile_parity(ema_update, average, value)
    expected = torch.tensor(0.9 * (0.9 * 0.1 + 0.2) + 0.3, dtype=torch.float64)
    torch.testing.assert_close(average.double().cpu(), expected.expand(64), rtol=1e-2, atol=1e-3)


@pytest.mark.compile_parity
def test_update_of_a_slice(compile_parity, device):
    buffer = torch.arange(12.0, device=device).reshape(3, 4)
    compile_parity(lambda t: t.mul_(2).sum(), buffer[1:, ::2])  # strided view into a bigger storage
    assert buffer[1, 0] == 8.0  # the caller's own tensor was updated, as by a plain call
