"""Conv + BatchNorm in train mode: running statistics after each call are part of parity."""

from __future__ import annotations

import pytest
import torch
from models import ConvBN


@pytest.mark.compile_parity
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=str)
def test_conv_bn_train(compile_parity, device, dtype):
    torch.manual_seed(0)
    model = ConvBN().to(device=device, dtype=dtype).train()
    for _ in range(2):  # the second call starts from the running stats the first one left
        compile_parity(model, torch.randn(4, 3, 8, 8, device=device, dtype=dtype))
    assert int(model.bn.num_batches_tracked) == 2  # the caller's model saw both calls


@pytest.mark.compile_parity
def test_conv_bn_channels_last(compile_parity, device):
    torch.manual_seed(0)
    model = ConvBN().to(device).train()
    x = torch.randn(4, 3, 8, 8, device=device).to(memory_format=torch.channels_last)
    compile_parity(model, x)
