"""An MLP with dropout returning a dict: outputs by key, RNG parity, gradients."""

from __future__ import annotations

import pytest
import torch
from models import MLP


@pytest.mark.compile_parity
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=str)
def test_mlp_train_mode(compile_parity, device, dtype):
    torch.manual_seed(0)
    model = MLP().to(device=device, dtype=dtype).train()  # dropout active: RNG must match
    compile_parity(model, torch.randn(16, 32, device=device, dtype=dtype))


@pytest.mark.compile_parity(backward=False)
def test_mlp_inference(compile_parity, device):
    torch.manual_seed(0)
    model = MLP().to(device).eval()
    with torch.no_grad():
        result = compile_parity(model, torch.randn(4, 32, device=device))
    assert set(result.compiled) == {"logits", "probs"}
