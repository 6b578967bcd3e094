"""The zoo's op: a softmax over the last dimension, on a standard input and on any tensor."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given
from zoo.models import softmax

from pytest_torchcompile import strategies as tcst


@pytest.mark.compile_parity(max_graph_breaks=0)
def test_softmax(compile_parity, device):
    torch.manual_seed(0)
    compile_parity(softmax, torch.randn(8, 64, device=device))


@pytest.mark.compile_parity
@given(x=tcst.tensors(dtypes=tcst.float_dtypes(), shapes=tcst.shapes(min_dims=1, max_dims=4)))
def test_softmax_any_input(compile_parity, x):
    compile_parity(softmax, x)
