"""Which Dynamo graphs draw random numbers (and so compile with fallback_random)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch
import torch.nn.functional as F

from pytest_torchcompile.running.randomness import draws_random


def _graphs(fn: Callable[..., Any], *args: Any) -> list[torch.fx.GraphModule]:
    seen: list[torch.fx.GraphModule] = []

    def backend(gm: torch.fx.GraphModule, example_inputs: Any) -> Any:
        seen.append(gm)
        return gm.forward

    torch._dynamo.reset()
    torch.compile(fn, backend=backend)(*args)
    return seen


def _checkpointed_dropout(x: torch.Tensor) -> torch.Tensor:
    return torch.utils.checkpoint.checkpoint(F.dropout, x, 0.5, use_reentrant=False)


def _attention(dropout: float) -> torch.nn.MultiheadAttention:
    """As TransformerEncoderLayer holds it: in training unless made otherwise."""
    return torch.nn.MultiheadAttention(8, 2, dropout=dropout, batch_first=True)


X = torch.randn(2, 4, 8)
DRAWING = {
    "dropout module in training": torch.nn.Dropout(0.3).train(),
    "dropout1d": lambda x: F.dropout1d(x, 0.1),
    "alpha_dropout": lambda x: F.alpha_dropout(x, 0.2, True),
    "distribution sample": lambda x: torch.distributions.Normal(x, 1.0).sample(),
    "Tensor.uniform_": lambda x: x.clone().uniform_(),
    "randn_like": lambda x: torch.randn_like(x) + x,
    "bernoulli": lambda x: torch.bernoulli(x.sigmoid()),
    "multinomial": lambda x: torch.multinomial(x.flatten().softmax(0), 2),
    "rrelu in training": lambda x: F.rrelu(x, training=True),
    "gumbel_softmax": lambda x: F.gumbel_softmax(x),
    "attention with dropout": lambda x: F.scaled_dot_product_attention(x, x, x, dropout_p=0.1),
    "an ATen op called directly": lambda x: torch.ops.aten.bernoulli.p(x, 0.5),
    "dropout inside a checkpoint": _checkpointed_dropout,
    "multi-head attention with dropout": lambda x: _attention(0.1)(x, x, x)[0],
}
NOT_DRAWING = {
    "arithmetic": lambda x: x.sin() @ x.transpose(-1, -2),
    "dropout module in eval": torch.nn.Dropout(0.3).eval(),
    "dropout with p=0": lambda x: F.dropout(x, 0.0),
    "rrelu outside training": lambda x: F.rrelu(x),
    "attention without dropout": lambda x: F.scaled_dot_product_attention(x, x, x),
    "multi-head attention without dropout": lambda x: _attention(0.0)(x, x, x)[0],
    "multi-head attention in eval": lambda x: _attention(0.1).eval()(x, x, x)[0],
}


@pytest.mark.parametrize("fn", DRAWING.values(), ids=DRAWING.keys())
def test_graphs_that_draw_are_found(fn):
    assert any(draws_random(gm) for gm in _graphs(fn, X))


@pytest.mark.parametrize("fn", NOT_DRAWING.values(), ids=NOT_DRAWING.keys())
def test_graphs_that_do_not_draw_are_left_alone(fn):
    graphs = _graphs(fn, X)
    assert graphs
    assert not any(draws_random(gm) for gm in graphs)
