"""What calls.pt holds for a value pickle cannot save, and how repro.py turns it back into one.

A test's callable closes over whatever the test had at hand: a local function, an OpInfo entry
whose sample generator is a local function of torch's, an object holding an open generator.
Pickle refuses all of them, so the repro writer saves each as a stand-in: the function rebuilt
from its source, the object found again by its import path, or taken apart the way pickle would
take it apart, each piece saved the same way. Only a piece that none of these can save becomes a
Placeholder, which raises, naming what it stands for, if the replay ever uses it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(eq=False)
class FromSource:
    """A lambda or nested function that repro.py rebuilds with maker `maker` from its source."""

    maker: str
    captured: dict[str, Any]  # the names it closes over and the globals it reads, saved


@dataclass(eq=False)
class ByImport:
    """An object found again as `module.name`, or as `module.name[key]` (an entry of a table)."""

    module: str
    name: str
    key: Any = None
    indexed: bool = False


@dataclass(eq=False)
class Reduced:
    """An object rebuilt as pickle would rebuild it: `factory(*args)`, then its state and items."""

    factory: Any
    args: tuple[Any, ...]
    state: Any = None
    items: list[Any] = field(default_factory=list)
    entries: list[tuple[Any, Any]] = field(default_factory=list)


@dataclass(eq=False)
class FillIn:
    """The callable under test, which repro.py's FILL IN line `name = ...` must provide."""

    name: str


class Placeholder:
    """Stands for a value that could not be saved; using it in the replay raises, naming it."""

    def __init__(self, what: str, reason: str) -> None:
        self.what = what
        self.reason = reason

    def _refuse(self) -> RuntimeError:
        return RuntimeError(
            f"repro.py: {self.what} could not be saved ({self.reason}), and the replay used the "
            "placeholder that stands for it; build it in repro.py by hand"
        )

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):  # copy and pickle probe for dunders: a plain object's answer
            raise AttributeError(name)
        raise self._refuse()

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise self._refuse()

    def __repr__(self) -> str:
        return f"<placeholder for {self.what}: {self.reason}>"


def resolve(
    value: Any,
    makers: Mapping[str, Callable[..., Any]],
    fill_ins: Mapping[str, Any],
    memo: dict[int, Any] | None = None,
) -> Any:
    """The value a stand-in stands for (other values as they are), each stand-in built once."""
    memo = {} if memo is None else memo
    if id(value) in memo:
        return memo[id(value)]

    def again(item: Any) -> Any:
        return resolve(item, makers, fill_ins, memo)

    if isinstance(value, FromSource):
        built = makers[value.maker](**{k: again(v) for k, v in value.captured.items()})
    elif isinstance(value, ByImport):
        import importlib

        built = getattr(importlib.import_module(value.module), value.name)
        built = built[value.key] if value.indexed else built
    elif isinstance(value, FillIn):
        built = fill_ins[value.name]
    elif isinstance(value, Reduced):
        built = again(value.factory)(*again(value.args))
        memo[id(value)] = built  # before its state, which may refer back to it
        _set_state(built, again(value.state))
        for item in value.items:
            built.append(again(item))
        for key, item in value.entries:
            built[again(key)] = again(item)
        return built
    elif type(value) in (tuple, list):
        built = type(value)(again(item) for item in value)
    elif type(value) is dict:
        built = {again(k): again(v) for k, v in value.items()}
    else:
        return value
    memo[id(value)] = built
    return built


def _set_state(obj: Any, state: Any) -> None:
    """What pickle does with an object's state (its BUILD step)."""
    if state is None:
        return
    setstate = getattr(obj, "__setstate__", None)
    if setstate is not None:
        setstate(state)
        return
    slots = None
    if isinstance(state, tuple) and len(state) == 2:
        state, slots = state
    if state:
        obj.__dict__.update(state)
    for key, item in (slots or {}).items():
        setattr(obj, key, item)


__all__ = ["ByImport", "FillIn", "FromSource", "Placeholder", "Reduced", "resolve"]
