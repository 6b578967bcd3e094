"""Hypothesis strategies for tensors that reach the inputs where compilers go wrong.

Generated tensors are deliberately unlike the contiguous float32 tensors with offset 0 that tests
usually build: shapes favour the sizes compilers specialize on (0 and 1) and sizes around vector
widths and block sizes, layouts cover transposes, slices with gaps, storage offsets, zero strides and
channels_last, dtypes include integers and bool, and values are all positive, many zeros, hold NaN,
infinities, -0.0, subnormals or extremes, or come from an edge class (`_edges`): ties on a lattice
of common constants and the program's own literals, a large offset, magnitudes whose squares
overflow, rows that sum to a whole number.

The classes are drawn as a swarm (Groce et al., "Swarm Testing", ISSTA 2012): each example
switches a random subset of them on and draws only from those, so classes meet (a transposed
int8 tensor of positive values) and adding a class does not starve the others;
benchmarks/draws.py measures how often each is drawn. Everything shrinks toward no class on:
float32, contiguous, offset 0, small and low rank, so a failure ends on the simplest input that
still diverges.

Modelled on ``hypothesis.extra.numpy``: plural nouns, keyword-only ``min_``/``max_`` bounds, eager
validation raising ``InvalidArgument`` that names ``arg=value``.
"""

from __future__ import annotations

from pytest_torchcompile.strategies._checks import Shape
from pytest_torchcompile.strategies._dtypes import (
    BOOL_DTYPES,
    COMPLEX_DTYPES,
    FLOAT_DTYPES,
    INTEGER_DTYPES,
    boolean_dtypes,
    complex_dtypes,
    dtypes,
    float_dtypes,
    integer_dtypes,
    supported_dtypes,
)
from pytest_torchcompile.strategies._layouts import LAYOUT_KINDS, Layout, LayoutKind, layouts
from pytest_torchcompile.strategies._shapes import (
    shape_groups,
    shape_sequences,
    shapes,
    size_probes,
)
from pytest_torchcompile.strategies._tensors import (
    TensorOptions,
    TensorSpec,
    build_tensor,
    tensor_groups,
    tensors,
)
from pytest_torchcompile.strategies._values import EDGE_CLASSES, EdgeClass, SpecialKind, Values
from pytest_torchcompile.tensor_text import describe

__all__ = [
    "BOOL_DTYPES",
    "COMPLEX_DTYPES",
    "EDGE_CLASSES",
    "FLOAT_DTYPES",
    "INTEGER_DTYPES",
    "LAYOUT_KINDS",
    "EdgeClass",
    "Layout",
    "LayoutKind",
    "Shape",
    "SpecialKind",
    "TensorOptions",
    "TensorSpec",
    "Values",
    "boolean_dtypes",
    "build_tensor",
    "complex_dtypes",
    "describe",
    "dtypes",
    "float_dtypes",
    "integer_dtypes",
    "layouts",
    "shape_groups",
    "shape_sequences",
    "shapes",
    "size_probes",
    "supported_dtypes",
    "tensor_groups",
    "tensors",
]
