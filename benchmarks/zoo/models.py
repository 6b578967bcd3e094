"""The zoo: the example models (reused from examples/models.py, not copied) and one op more.

Each entry also says how the two baselines drive it: baseline A's one standard input, and
baseline B's random shapes. The pytest suites in ``suites/`` build the same programs themselves,
as a user's test module would.
"""

from __future__ import annotations

import copy
import importlib.util
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import torch
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

REPO = Path(__file__).resolve().parents[2]


def _load_examples() -> ModuleType:
    """examples/models.py under its own name, so it never shadows another ``models`` module."""
    name = "zoo_example_models"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, REPO / "examples" / "models.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


_examples = _load_examples()
Attention: type[torch.nn.Module] = _examples.Attention
MLP: type[torch.nn.Module] = _examples.MLP
ConvBN: type[torch.nn.Module] = _examples.ConvBN
ema_update: Callable[..., torch.Tensor] = _examples.ema_update
train_step: Callable[..., torch.Tensor] = _examples.train_step


def softmax(x: torch.Tensor) -> torch.Tensor:
    """The zoo's one op: a softmax over the last dimension, the normalisation in every model."""
    return torch.softmax(x, dim=-1)


def small_net() -> torch.nn.Module:
    """The network train_step trains: two linear layers with a tanh between."""
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 4))


Program = tuple[Callable[..., Any], tuple[Any, ...]]


@dataclass(frozen=True)
class Entry:
    """One zoo program, as the baselines drive it.

    `setup` turns input tensors into the callable and its arguments, building any model or
    optimizer afresh from seed 0: called twice, it gives the eager and the compiled side
    identical, independent state.
    """

    name: str
    setup: Callable[[tuple[torch.Tensor, ...]], Program]
    standard_shapes: tuple[tuple[int, ...], ...]  # baseline A's torch.randn inputs
    random_shapes: st.SearchStrategy[tuple[tuple[int, ...], ...]]  # baseline B's


def _module(make: Callable[[], torch.nn.Module]) -> Callable[[tuple[torch.Tensor, ...]], Program]:
    def setup(inputs: tuple[torch.Tensor, ...]) -> Program:
        torch.manual_seed(0)
        return make(), inputs

    return setup


def _ema(inputs: tuple[torch.Tensor, ...]) -> Program:
    average, value = inputs
    return ema_update, (average, value)


def _train_step(inputs: tuple[torch.Tensor, ...]) -> Program:
    torch.manual_seed(0)
    model = small_net()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    x, y = inputs
    return train_step, (model, optimizer, x, y)


def _sides(low: int, high: int) -> st.SearchStrategy[int]:
    return st.integers(low, high)


def _batch_of(*features: int, high: int = 16) -> st.SearchStrategy[tuple[tuple[int, ...], ...]]:
    return _sides(1, high).map(lambda b: tuple((b, f) for f in features))


def _conv_shapes() -> st.SearchStrategy[tuple[tuple[int, ...], ...]]:
    # Train-mode BatchNorm needs more than one value per channel, in eager as compiled.
    shapes = st.tuples(_sides(1, 4), st.just(3), _sides(1, 8), _sides(1, 8))
    return shapes.filter(lambda s: s[0] * s[2] * s[3] > 1).map(lambda s: (s,))


def _same_shape_pair() -> st.SearchStrategy[tuple[tuple[int, ...], ...]]:
    return hnp.array_shapes(min_dims=1, max_dims=3, max_side=8).map(lambda s: (s, s))


ZOO: dict[str, Entry] = {
    entry.name: entry
    for entry in (
        Entry(
            "attention",
            _module(lambda: Attention(32)),
            ((2, 8, 32),),
            st.tuples(_sides(1, 8), _sides(1, 8)).map(lambda s: ((*s, 32),)),
        ),
        # Baselines compare forward outputs, so dropout is off (eval); the pytest suite also
        # checks train mode, where the plugin makes both sides draw the same random numbers.
        Entry("mlp", _module(lambda: MLP().eval()), ((16, 32),), _batch_of(32)),
        Entry("conv_bn", _module(lambda: ConvBN().train()), ((4, 3, 8, 8),), _conv_shapes()),
        Entry("ema_update", _ema, ((64,), (64,)), _same_shape_pair()),
        Entry(
            "softmax",
            lambda inputs: (softmax, inputs),
            ((8, 64),),
            hnp.array_shapes(min_dims=1, max_dims=4, max_side=8).map(lambda s: (s,)),
        ),
        Entry("train_step", _train_step, ((8, 8), (8, 4)), _batch_of(8, 4)),
    )
}


def program(entry: Entry, inputs: tuple[torch.Tensor, ...]) -> Program:
    """`entry`'s program on private copies of `inputs` (a side never sees the other's updates)."""
    return entry.setup(tuple(copy.deepcopy(t) for t in inputs))
