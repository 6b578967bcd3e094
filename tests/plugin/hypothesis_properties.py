"""Property tests written the way a user would: strategy defaults, default max_examples.

tests/plugin/test_hypothesis_planted.py runs them in pytester against planted wrong backends
(each must be caught) and correct ones (all must pass). Run them directly with any backend:

    pytest tests/plugin/hypothesis_properties.py --compile-backend=inductor --hypothesis-seed=0
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from pytest_torchcompile import strategies as tcst


def softmax(t):
    return torch.softmax(t, dim=-1)


@pytest.mark.compile_parity
@given(x=tcst.tensors(dtypes=tcst.float_dtypes()))  # softmax takes floating dtypes
def test_softmax(compile_parity, x):
    compile_parity(softmax, x)


@pytest.mark.compile_parity
@given(xs=tcst.tensor_groups(2, broadcast=False))
def test_maximum(compile_parity, xs):
    compile_parity(torch.maximum, *xs)


@pytest.mark.compile_parity
@given(shapes=tcst.shape_sequences(), data=st.data())
def test_calls_in_sequence(compile_parity, shapes, data):
    dtype = data.draw(tcst.float_dtypes())
    inputs = [data.draw(tcst.tensors(dtypes=dtype, shapes=shape)) for shape in shapes]
    for x in inputs:
        compile_parity(softmax, x)


class Block(torch.nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.conv = torch.nn.Conv2d(channels, 4, 3, padding=1)

    def forward(self, x):
        return torch.relu(self.conv(x))


@pytest.mark.compile_parity
@given(
    x=tcst.tensors(
        dtypes=tcst.float_dtypes(),  # a module takes floating dtypes only
        shapes=tcst.shapes(min_dims=4, max_dims=4, min_side=1),
    )
)
def test_conv_block(compile_parity, x):
    torch.manual_seed(0)
    compile_parity(Block(x.shape[1]).to(x.dtype), x)
