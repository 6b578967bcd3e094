"""The arguments' types and their eager checks: a bad value raises ``InvalidArgument`` naming
``arg=value`` when a strategy is built, not when it is drawn; and the short repr of the spec
classes a failing example prints."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any, TypeAlias, TypeVar

import torch
from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument

T = TypeVar("T")
Shape: TypeAlias = tuple[int, ...]
DeviceLike: TypeAlias = str | torch.device


def check(ok: object, message: str) -> None:
    if not ok:
        raise InvalidArgument(message)


def as_strategy(value: T | st.SearchStrategy[T]) -> st.SearchStrategy[T]:
    return value if isinstance(value, st.SearchStrategy) else st.just(value)


def check_int(value: object, name: str, minimum: int) -> int:
    check(
        isinstance(value, int) and not isinstance(value, bool) and value >= minimum,
        f"{name}={value!r} must be an integer >= {minimum}",
    )
    return value  # type: ignore[return-value]


def check_bounds(low: int, high: int, name: str) -> None:
    check(low <= high, f"min_{name}={low} is larger than max_{name}={high}")


def shape_value(shape: object, name: str) -> Shape:
    check(
        isinstance(shape, Sequence)
        and all(isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in shape),
        f"{name}={shape!r} must be a sequence of integers >= 0",
    )
    return tuple(shape)  # type: ignore[arg-type]


def device_value(device: object, name: str) -> str:
    if not isinstance(device, str | torch.device):
        raise InvalidArgument(f"{name}={device!r} must be a str or torch.device")
    try:
        return str(torch.device(device))
    except RuntimeError as err:
        raise InvalidArgument(f"{name}={device!r} is not a device: {err}") from None


class Compact:
    """A dataclass repr that shows only fields that differ from their defaults: short and valid
    Python, also in Hypothesis's falsifying-example output."""

    def __repr__(self) -> str:
        shown = []
        for f in dataclasses.fields(self):  # type: ignore[arg-type]
            value = getattr(self, f.name)
            if f.default is dataclasses.MISSING or value != f.default:
                shown.append(f"{f.name}={value!r}")
        return f"{type(self).__name__}({', '.join(shown)})"

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(repr(self))
