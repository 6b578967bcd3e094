"""The two baselines, each run the way such tests are usually written.

A, "hand-written assert_close": compile once, call once on a contiguous float32 torch.randn
input, compare the forward outputs with torch.testing.assert_close.

B, "forward-only property test": what hypothesis-torch-style strategies give a user -- contiguous
float32 tensors of random shapes (sides from 1, values finite and bounded, as a user bounds them
so that eager does not overflow) -- with a fresh torch.compile per example and forward outputs
compared by assert_close.

Both compare with ``equal_nan=True``: the attention model's hand-written softmax overflows to
NaN in eager itself on large inputs, and a user whose test failed on that would allow it.
Each returns a Verdict: caught iff the test a user would have written fails.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from zoo.models import Entry, program

Backend = str | Callable[..., Any]


@dataclass(frozen=True)
class Verdict:
    caught: bool
    detail: str = ""  # the failure's first line when caught

    @classmethod
    def of(cls, exc: BaseException) -> Verdict:
        lines = str(exc).strip().splitlines()
        return cls(True, f"{type(exc).__name__}: {lines[0] if lines else ''}"[:160])


def _compare(entry: Entry, inputs: tuple[torch.Tensor, ...], backend: Backend) -> None:
    """Eager and a freshly compiled copy on the same inputs; assert_close on what they return."""
    torch.compiler.reset()
    fn, args = program(entry, inputs)
    expected = fn(*args)
    fn, args = program(entry, inputs)
    actual = torch.compile(fn, backend=backend)(*args)
    torch.testing.assert_close(actual, expected, equal_nan=True)


def baseline_a(entry: Entry, backend: Backend) -> Verdict:
    """One contiguous float32 torch.randn input of the entry's standard shape."""
    torch.manual_seed(0)
    inputs = tuple(torch.randn(shape) for shape in entry.standard_shapes)
    try:
        _compare(entry, inputs, backend)
    except Exception as exc:
        return Verdict.of(exc)
    finally:
        torch.compiler.reset()
    return Verdict(False)


_VALUES = st.floats(-10, 10, width=32)


def baseline_b(entry: Entry, backend: Backend, *, examples: int, seed_: int = 0) -> Verdict:
    """`examples` random-shape examples from Hypothesis seed `seed_`; no shrinking (a failure is
    a failure; shrinking would only cost time)."""

    @settings(
        max_examples=examples,
        deadline=None,
        database=None,
        phases=(Phase.generate,),
        suppress_health_check=list(HealthCheck),
    )
    @seed(seed_)
    @given(data=st.data())
    def forward_matches(data: st.DataObject) -> None:
        shapes = data.draw(entry.random_shapes, label="shapes")
        inputs = tuple(
            torch.from_numpy(data.draw(hnp.arrays(np.float32, shape, elements=_VALUES)))
            for shape in shapes
        )
        _compare(entry, inputs, backend)

    try:
        forward_matches()
    except Exception as exc:
        return Verdict.of(exc)
    finally:
        torch.compiler.reset()
    return Verdict(False)
