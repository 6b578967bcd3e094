"""A whole training step compiled: loss, updated parameters, optimizer state and .grad."""

from __future__ import annotations

import pytest
import torch
from models import train_step
from torch import nn

OPTIMIZERS = {
    "sgd": lambda params, cuda: torch.optim.SGD(params, lr=0.1, momentum=0.9),
    # A compiled Adam keeps its `step` counters on the GPU, as capturable=True does; eager must
    # do the same, or the optimizer states differ in device (the checker reports exactly that).
    "adam": lambda params, cuda: torch.optim.Adam(params, lr=1e-2, capturable=cuda),
}


@pytest.mark.compile_parity
@pytest.mark.parametrize("optimizer", sorted(OPTIMIZERS))
def test_train_step(compile_parity, device, optimizer):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 4)).to(device)
    opt = OPTIMIZERS[optimizer](model.parameters(), device.type == "cuda")
    x, y = torch.randn(8, 8, device=device), torch.randn(8, 4, device=device)
    first = compile_parity(train_step, model, opt, x, y)
    second = compile_parity(train_step, model, opt, x, y)  # from the state the first step left
    assert second.eager < first.eager  # the caller's model really trained
