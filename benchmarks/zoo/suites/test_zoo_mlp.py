"""An MLP returning a dict: train mode (dropout), inference under no_grad, and any batch."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given
from zoo.models import MLP

from pytest_torchcompile import strategies as tcst


@pytest.mark.compile_parity
def test_mlp_train_mode(compile_parity, device):
    torch.manual_seed(0)
    model = MLP().to(device).train()  # dropout active: the plugin gives both sides one RNG state
    compile_parity(model, torch.randn(16, 32, device=device))


@pytest.mark.compile_parity(backward=False)
def test_mlp_inference(compile_parity, device):
    torch.manual_seed(0)
    model = MLP().to(device).eval()
    with torch.no_grad():  # a server sees any batch size, an empty one when a filter drops all
        for batch in (4, 1, 0):
            compile_parity(model, torch.randn(batch, 32, device=device))


torch.manual_seed(0)
MODELS = {dtype: MLP().to(dtype).eval() for dtype in tcst.FLOAT_DTYPES}


@pytest.mark.compile_parity
@given(
    x=tcst.tensors(
        dtypes=tcst.float_dtypes(),
        shapes=tcst.shapes(min_dims=1, max_dims=2).map(lambda s: (*s, 32)),  # features fixed
    )
)
def test_mlp_any_batch(compile_parity, x):
    compile_parity(MODELS[x.dtype], x)
