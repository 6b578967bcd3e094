"""Three real torch 2.13 CPU Inductor bugs, tested as a user writes them (the README's block):
the strategies at their defaults, no value-specific arguments, Hypothesis's 100 examples. Each
fails on Inductor (caught) and passes on aot_eager:

    python3 -m pytest benchmarks/edge_bugs --compile-backend=inductor --hypothesis-seed=1 \
        --hypothesis-profile=noshrink -p no:cacheprovider
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings

from pytest_torchcompile import strategies as tcst

ROWS = tcst.shapes(min_dims=1)
FLOATS = tcst.float_dtypes()  # var and softmax take floating dtypes (Inductor also integers)


@pytest.mark.compile_parity
@settings(max_examples=100)
@given(xs=tcst.tensor_groups(2, broadcast=False, requires_grad=True))
def test_margin_ranking_loss(compile_parity, xs):
    x1, x2 = xs
    compile_parity(lambda a, b: F.margin_ranking_loss(a, b, torch.ones_like(a), margin=0.1), x1, x2)


@pytest.mark.compile_parity
@settings(max_examples=100)
@given(x=tcst.tensors(dtypes=FLOATS, shapes=ROWS))
def test_var(compile_parity, x):
    compile_parity(lambda t: torch.var(t, dim=-1), x)


@pytest.mark.compile_parity
@settings(max_examples=100)
@given(x=tcst.tensors(dtypes=FLOATS, shapes=ROWS))
def test_softmax_floor(compile_parity, x):
    compile_parity(lambda t: torch.floor(torch.softmax(t, dim=-1).sum(dim=-1)), x)
