"""What a call leaves, as parity names it: private attributes, slots, weak references, generators."""

from __future__ import annotations

import weakref

import numpy as np
import torch

from pytest_torchcompile.running.state import referenced_parameters, state_after


class Cached(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(2, 2)
        self._tables = {(3, torch.float32): torch.ones(3)}
        self.table = torch.zeros(2)  # a tensor that is no buffer
        self._steps = 4
        self.generator = torch.Generator().manual_seed(0)


class Slotted:
    __slots__ = ("total",)

    def __init__(self) -> None:
        self.total = torch.zeros(2)


def test_every_attribute_of_every_submodule_is_state_private_ones_too() -> None:
    state = state_after(Cached(), (), {})
    assert "attribute _tables[(3, torch.float32)]" in state
    assert torch.equal(state["attribute table"], torch.zeros(2))
    assert state["attribute _steps"] == 4
    assert isinstance(state["attribute generator (generator state)"], bytes)
    assert "attribute _parameters" not in state and "attribute _forward_hooks" not in state


def test_inputs_slots_and_numpy_generators_are_state() -> None:
    state = state_after(None, (Slotted(), np.random.default_rng(0)), {})
    assert torch.equal(state["input 0.total after the call"], torch.zeros(2))
    assert state["input 1 (generator state) after the call"]["bit_generator"] == "PCG64"


class Tied(torch.nn.Module):
    def __init__(self, embedding: torch.nn.Embedding) -> None:
        super().__init__()
        self.embedding = weakref.ref(embedding)


def test_a_module_reached_through_a_weak_reference_is_state_and_its_parameters_get_gradients() -> (
    None
):
    embedding = torch.nn.Embedding(3, 2)
    tied = Tied(embedding)
    assert "attribute embedding(): parameter 'weight'" in state_after(tied, (), {})
    assert [name for name, _ in referenced_parameters(tied)] == ["embedding().weight"]
