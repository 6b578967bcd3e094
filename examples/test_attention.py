"""The seeds' self-attention block: forward, gradients and parameters, eager vs compiled."""

from __future__ import annotations

import pytest
import torch
from models import Attention

DTYPES = [torch.float32, torch.float16, torch.bfloat16]


@pytest.mark.compile_parity(max_graph_breaks=0)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_attention(compile_parity, device, dtype):
    torch.manual_seed(0)
    model = Attention(64).to(device=device, dtype=dtype)
    x = torch.randn(2, 8, 64, device=device, dtype=dtype)
    result = compile_parity(model, x)
    assert result.graph_breaks == 0


@pytest.mark.compile_parity(max_recompiles=1)
def test_attention_new_batch_size_recompiles_once(compile_parity, device):
    torch.manual_seed(0)
    model = Attention(32).to(device)
    compile_parity(model, torch.randn(2, 4, 32, device=device))
    result = compile_parity(model, torch.randn(3, 4, 32, device=device))  # dynamic shapes kick in
    # --compile-backend=none (the control, no compiler) compiles nothing, so nothing recompiles
    assert result.recompiles == (0 if compile_parity.settings.backend == "none" else 1)
