"""Self-attention: parity on a standard batch, on growing batches, and on any input Hypothesis draws."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given
from zoo.models import Attention

from pytest_torchcompile import strategies as tcst

DIM = 32


@pytest.mark.compile_parity(max_graph_breaks=0)
def test_attention(compile_parity, device):
    torch.manual_seed(0)
    model = Attention(DIM).to(device)
    compile_parity(model, torch.randn(2, 8, DIM, device=device))


@pytest.mark.compile_parity(max_recompiles=1)
def test_attention_batch_sizes(compile_parity, device):
    torch.manual_seed(0)
    model = Attention(DIM).to(device)
    for batch in (2, 3, 4):  # the second size recompiles with a dynamic batch; then no more
        compile_parity(model, torch.randn(batch, 8, DIM, device=device))


torch.manual_seed(0)
MODELS = {dtype: Attention(DIM).to(dtype) for dtype in tcst.FLOAT_DTYPES}


@pytest.mark.compile_parity
@given(
    x=tcst.tensors(
        dtypes=tcst.float_dtypes(),
        shapes=tcst.shapes(min_dims=2, max_dims=2).map(lambda s: (*s, DIM)),  # features fixed
    )
)
def test_attention_any_input(compile_parity, x):
    compile_parity(MODELS[x.dtype], x)
