"""dynamic_dims: the compiled side's input tensors marked dynamic or unbacked before each call.

Automatic dynamic shapes compile every first call static, so a graph traced with symbolic sizes
is only met after a size changes; a program that calls `torch._dynamo.mark_dynamic` (or
`mark_unbacked`) meets it on its first call. The marks go on the compiled side's copies only:
the caller's tensors keep none, and eager never sees one.
"""

from __future__ import annotations

from typing import Any

import torch

from pytest_torchcompile import _compat
from pytest_torchcompile.running.trees import leaves

DimMarks = tuple[bool, tuple[int, ...] | None]  # (unbacked, the dimensions or None for all)


def mark_inputs(copies: Any, marks: DimMarks | None, originals: Any) -> None:
    """Mark the chosen dimensions of every tensor among `copies` (the compiled side's inputs).

    A dimension a tensor does not have is left alone (inputs differ in rank). A backed mark
    skips sizes 0 and 1, which Dynamo specializes whatever the mark says (older torch raises
    on such a mark); unbacked marks keep them symbolic. A tensor among `originals` (the
    caller's inputs) is never marked, should a copy be the object itself.
    """
    if marks is None:
        return
    unbacked, dims = marks
    callers = {id(leaf) for leaf in leaves(originals)}
    for tensor in leaves(copies):
        if not isinstance(tensor, torch.Tensor) or id(tensor) in callers:
            continue
        chosen = range(tensor.dim()) if dims is None else dims
        for dim in chosen:
            if not -tensor.dim() <= dim < tensor.dim():
                continue
            if unbacked or tensor.shape[dim] > 1:
                _compat.mark_dimension(tensor, dim % tensor.dim(), unbacked=unbacked)


__all__ = ["DimMarks", "mark_inputs"]
