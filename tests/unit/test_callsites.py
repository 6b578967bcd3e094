"""Which `__call__`s the interception wraps, and that it puts every one back."""

from __future__ import annotations

import inspect
from typing import Any

import torch

from pytest_torchcompile.adoption.callsites import CallSites, Constructions, overriding_classes


class LibraryModule(torch.nn.Module):
    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.forward(*args, **kwargs)


class LibraryModel(LibraryModule):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + 1


class ReCalling(LibraryModule):
    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return super().__call__(*args, **kwargs)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * 2


def test_overriding_classes_are_found_and_torch_machinery_is_not() -> None:
    found = overriding_classes()
    assert found[0] is torch.nn.Module
    assert LibraryModule in found and ReCalling in found
    assert LibraryModel not in found  # inherits LibraryModule's
    assert all(cls is torch.nn.Module or not cls.__module__.startswith("torch") for cls in found)


def test_wrappers_see_every_call_and_are_removed_and_suspended() -> None:
    seen: list[str] = []

    def make(original: Any) -> Any:
        def wrapper(module: torch.nn.Module, *args: Any, **kwargs: Any) -> Any:
            seen.append(type(module).__name__)
            return original(module, *args, **kwargs)

        return wrapper

    originals = {
        cls: cls.__dict__["__call__"] for cls in (torch.nn.Module, LibraryModule, ReCalling)
    }
    sites = CallSites(make)
    sites.install()
    try:
        LibraryModel()(torch.zeros(1))
        ReCalling()(torch.zeros(1))  # its own wrapper, then LibraryModule's through super()
        torch.nn.ReLU()(torch.zeros(1))
        with sites.suspended():
            LibraryModel()(torch.zeros(1))
    finally:
        sites.remove()
    assert seen == ["LibraryModel", "ReCalling", "ReCalling", "ReLU"]
    assert {cls: cls.__dict__["__call__"] for cls in originals} == originals


def test_constructions_record_classes_and_pause() -> None:
    before = torch.nn.Module.__dict__["__init__"]  # Dynamo may have wrapped it already
    with Constructions() as built:
        LibraryModel()
        with built.paused():
            torch.nn.ReLU()
    torch.nn.Tanh()
    assert built.classes == {f"{__name__}.LibraryModel"}
    assert torch.nn.Module.__dict__["__init__"] is before


def test_torchs_compile_machinery_is_not_counted_as_constructed_models() -> None:
    with Constructions() as built:
        torch.nn.Module()  # a bare root, as torch.fx makes
        torch.fx.symbolic_trace(torch.nn.ReLU())
        torch.nn.Linear(2, 2)
    assert built.classes == {"torch.nn.modules.activation.ReLU", "torch.nn.modules.linear.Linear"}


class TakesOver(LibraryModel):
    """Skips `super().__init__()`: it takes over another module's state."""

    def __init__(self, other: torch.nn.Module, scale: float = 1.0) -> None:
        self.__dict__ = other.__dict__
        self.scale = scale


def test_a_class_that_skips_super_init_is_recorded_and_its_init_put_back() -> None:
    own, signature = TakesOver.__dict__["__init__"], inspect.signature(TakesOver)
    other = LibraryModel()
    with Constructions() as built:
        assert inspect.signature(TakesOver) == signature  # unchanged for introspection
        TakesOver(other)
    assert built.classes == {f"{__name__}.TakesOver"}
    assert TakesOver.__dict__["__init__"] is own
    assert TakesOver(other).scale == 1.0


class Named:
    """A base whose `__new__` does work, as a registry's does."""

    def __new__(cls, *args: Any, **kwargs: Any) -> Any:
        made = super().__new__(cls)
        made.registered = args[0]
        return made


class NamedModule(torch.nn.Module, Named):
    def __init__(self, name: str) -> None:
        super().__init__()


class MappingModule(torch.nn.Module, dict):  # type: ignore[misc]
    """A C base with its own `__new__` after nn.Module, as ptwt's wavelets subclass pywt's."""

    def __init__(self, name: str) -> None:
        torch.nn.Module.__init__(self)


def test_a_base_new_after_module_runs_with_the_arguments_while_constructions_are_seen() -> None:
    # ptwt's `_ShannonWavelet(nn.Module, pywt.ContinuousWavelet)`: object.__new__ refused it
    # ("not safe, use ContinuousWavelet.__new__()"), and a Python base's __new__ never ran.
    with Constructions() as built:
        assert NamedModule("db1").registered == "db1"
        assert isinstance(MappingModule("shan1-1"), dict)
        LibraryModel()
    assert built.classes == {
        f"{__name__}.{c}" for c in ("NamedModule", "MappingModule", "LibraryModel")
    }
