"""The world around a call: found statically, captured, and put back exactly."""

from __future__ import annotations

import random
import types

import numpy as np
import torch

from pytest_torchcompile.running.world import World

COUNT = 0
LOG: list[int] = []
TABLE = torch.zeros(3)
RNG = np.random.default_rng(0)


class Settings:
    __slots__ = ("scale",)

    def __init__(self) -> None:
        self.scale = 1.0


SETTINGS = Settings()
CONFIG = types.SimpleNamespace(mode="a")


class Counter:
    total = 0


def counting(x: torch.Tensor) -> torch.Tensor:
    global COUNT, CREATED
    COUNT += 1
    CREATED = True
    LOG.append(COUNT)
    TABLE.add_(1)
    SETTINGS.scale *= 2
    CONFIG.mode = "b"
    CONFIG.added = 1
    Counter.total += 1
    return x * float(RNG.random())


def test_a_functions_globals_objects_classes_tensors_and_generators_are_put_back() -> None:
    world = World.of(counting)
    before = world.capture()
    log, rng_state = LOG, RNG.bit_generator.state
    counting(torch.ones(1))
    world.restore(before)
    assert COUNT == 0 and "CREATED" not in globals()
    assert LOG is log and LOG == []  # in place: the program holds the list
    assert torch.equal(TABLE, torch.zeros(3))
    assert SETTINGS.scale == 1.0
    assert vars(CONFIG) == {"mode": "a"}
    assert Counter.total == 0
    assert RNG.bit_generator.state == rng_state


def test_what_the_call_left_is_put_back_after_the_replays() -> None:
    world = World.of(counting)
    counting(torch.ones(1))
    left = world.capture()
    counting(torch.ones(1))
    world.restore(left)
    assert COUNT == 1 and LOG == [1] and torch.equal(TABLE, torch.ones(3))
    world.restore(World.of(counting).capture())  # leave the module as the next test expects


def test_the_parts_parity_compares_are_the_user_files_plain_ones() -> None:
    state = World.of(counting).state()
    assert set(state) >= {"global 'COUNT' after the call", "global 'LOG' after the call"}
    assert "global 'TABLE' after the call" not in state  # a tensor: restored, not a plain value


def test_hooks_and_the_objects_of_bound_methods_are_part_of_a_modules_world() -> None:
    seen: list[int] = []

    class Recorder:
        def __init__(self) -> None:
            self.calls = 0

        def hook(self, module: object, args: object, out: object) -> None:
            self.calls += 1

    model, recorder = torch.nn.Linear(2, 2), Recorder()
    model.register_forward_hook(lambda m, a, o: seen.append(1))
    model.register_forward_hook(recorder.hook)
    world = World.of(model)
    before = world.capture()
    model(torch.ones(1, 2))
    world.restore(before)
    assert seen == [] and recorder.calls == 0


def test_generators_among_the_inputs_and_the_global_ones_are_put_back() -> None:
    generator, python = torch.Generator().manual_seed(1), random.Random(2)
    world = World.of(torch.nn.Identity()).for_call((generator,), {"rng": python})
    before = world.capture()
    expected = (torch.rand(2, generator=generator), python.random(), torch.rand(2))
    world.restore(before)
    assert torch.equal(torch.rand(2, generator=generator), expected[0])
    assert python.random() == expected[1]
    assert torch.equal(torch.rand(2), expected[2])


class Lazy:
    """A lazy loader: any attribute would import an optional dependency."""

    def __getattr__(self, name: str) -> object:
        raise AssertionError(f"the walk ran __getattr__({name!r})")

    @property
    def loaded(self) -> object:
        raise AssertionError("the walk ran a property")


LAZY = Lazy()


def uses_lazy(x: torch.Tensor) -> torch.Tensor:
    return x if LAZY is None else x * 2


def test_the_walk_reads_objects_statically_and_never_runs_their_code() -> None:
    world = World.of(uses_lazy)
    world.restore(world.capture())
