"""Bounds hold for every dtype drawn: min_value and max_value bound every element of every public
tensor strategy's tensors, whatever the dtype, and a dtype given that holds no value between them
is an error that names it."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument

from pytest_torchcompile import strategies as tcst

FAST = settings(max_examples=25, derandomize=True, database=None, deadline=None)

Bounds = tuple[float | None, float | None]
BOUNDS: list[Bounds] = [(0.1, None), (None, -0.5), (0.1, 0.9), (2.5, 3.5), (-1e5, -7e4)]
"""A bound float16 rounds below itself (0.1), one no unsigned value meets (-0.5), an interval
holding no integer (0.1 to 0.9), one holding a single integer (3), one beyond float16's range."""

STRATEGIES: dict[str, Callable[..., st.SearchStrategy[Any]]] = {
    "tensors": tcst.tensors,
    "tensor_groups(2)": lambda **kw: tcst.tensor_groups(2, **kw),
    "tensor_groups(2, same_dtype=False)": lambda **kw: tcst.tensor_groups(
        2, same_dtype=False, **kw
    ),
}


def _holds(dtype: torch.dtype, low: float | None, high: float | None) -> bool:
    """Whether some value of `dtype` lies between the bounds, worked out apart from the code."""
    if dtype.is_floating_point or dtype.is_complex:
        info = torch.finfo(dtype)
        return (low is None or low <= info.max) and (high is None or high >= info.min)
    if dtype == torch.bool:
        values = range(2)
    else:
        info_i = torch.iinfo(dtype)
        values = range(info_i.min, info_i.max + 1)
    first = values[0] if low is None else max(math.ceil(low), values[0])
    last = values[-1] if high is None else min(math.floor(high), values[-1])
    return first <= last


def _outside(tensors: Any, low: float | None, high: float | None) -> list[str]:
    """Each drawn tensor with an element (of either part, for complex) outside the bounds."""
    found = []
    for t in tensors if isinstance(tensors, tuple) else (tensors,):
        parts = torch.view_as_real(t.detach()) if t.is_complex() else t.detach()
        values = parts.double()
        wrong = (values < low if low is not None else values != values) | (
            values > high if high is not None else values != values
        )
        if wrong.any():
            found.append(f"{t.dtype}: {values[wrong][:4].tolist()}")
    return found


@pytest.mark.parametrize("bounds", BOUNDS, ids=str)
@pytest.mark.parametrize("name", STRATEGIES)
@pytest.mark.parametrize("dtype", [None, *tcst.supported_dtypes()], ids=str)
def test_every_element_lies_within_the_bounds(
    name: str, dtype: torch.dtype | None, bounds: Bounds
) -> None:
    low, high = bounds
    if dtype is not None and not _holds(dtype, low, high):
        with pytest.raises(InvalidArgument, match=rf"dtypes={dtype} holds no value"):
            STRATEGIES[name](dtypes=dtype, min_value=low, max_value=high)
        return

    @FAST
    @given(STRATEGIES[name](dtypes=dtype, min_value=low, max_value=high))
    def check(drawn: Any) -> None:
        assert not _outside(drawn, low, high)

    check()


def test_a_strategy_of_dtypes_draws_only_those_that_meet_the_bounds() -> None:
    drawn: set[torch.dtype] = set()

    @settings(FAST, max_examples=60)
    @given(tcst.tensors(dtypes=tcst.integer_dtypes(), max_value=-0.5))
    def check(t: torch.Tensor) -> None:
        assert (t <= -1).all()
        drawn.add(t.dtype)

    check()
    assert torch.uint8 not in drawn and torch.int8 in drawn


def test_past_float32_s_range_the_default_mix_draws_float64() -> None:
    @settings(FAST, max_examples=20)
    @given(tcst.tensors(min_value=1e300))
    def check(t: torch.Tensor) -> None:
        assert t.dtype in (torch.float64, torch.complex128) and not _outside(t, 1e300, None)

    check()


@pytest.mark.parametrize(
    "kwargs",
    [
        {"dtypes": torch.uint8, "max_value": -0.5},
        {"dtypes": torch.bool, "min_value": 0.2, "max_value": 0.8},
        {"dtypes": torch.float16, "min_value": 1e5},
        {"dtypes": torch.bfloat16, "min_value": 0.1, "max_value": 0.1},
    ],
    ids=str,
)
def test_a_dtype_given_that_cannot_meet_the_bounds_is_an_error(kwargs: dict[str, Any]) -> None:
    with pytest.raises(
        InvalidArgument, match=r"dtypes=torch\.\w+ holds no value between min_value"
    ):
        tcst.tensors(**kwargs)
    with pytest.raises(InvalidArgument, match=r"dtypes=torch\.\w+ holds no value"):
        tcst.tensor_groups(2, **kwargs)
