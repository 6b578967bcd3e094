"""What a failure says about the call's inputs: one line per input, and how to draw it otherwise."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from pytest_torchcompile.snapshot import named_inputs


def first_line(exc: BaseException) -> str:
    """`Type: the first line of the message`, for one-line summaries of an exception."""
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"


def inputs_note(args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> str:
    """An `Inputs:` block: each scalar and tensor input in one line (dtype, shape, strides,
    offset, device, layout), with the inputs that share a storage named."""
    from pytest_torchcompile.strategies import describe  # strategies import Hypothesis

    lines: list[str] = []
    owners: dict[int, str] = {}  # storage address -> the first input on it
    for name, value in named_inputs(args, kwargs):
        if isinstance(value, (bool, int, float, complex, str)):
            lines.append(f"  {name}: {type(value).__name__} {value!r}")  # a stale scalar?
            continue
        if not isinstance(value, torch.Tensor):
            continue
        line = f"  {name}: {describe(value)}"
        if value.layout == torch.strided and value.untyped_storage().nbytes():
            owner = owners.setdefault(value.untyped_storage().data_ptr(), name)
            line += f" (shares storage with {owner})" if owner != name else ""
        lines.append(line)
    return "\nInputs:\n" + "\n".join(lines) if lines else ""


def exclusion_hints(args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> list[str]:
    """For each unusual property of a tensor input, the strategy argument that excludes it."""
    hints: list[str] = []
    for name, value in named_inputs(args, kwargs):
        if not isinstance(value, torch.Tensor) or value.layout != torch.strided:
            continue
        found: list[str] = []
        if any(s == 0 and n > 1 for s, n in zip(value.stride(), value.shape, strict=True)):
            found.append(
                "is expanded (stride 0: in-place ops reject it): draw it with tcst.tensors("
                "layouts=[k for k in tcst.LAYOUT_KINDS if k != 'expanded'])"
            )
        if value.numel() == 0:
            found.append("is empty: draw it with tcst.shapes(min_side=1)")
        elif 1 in value.shape:
            found.append(
                "has a dimension of size 1: draw it with tcst.shapes(min_side=2) if the program "
                "needs more"
            )
        if (value.is_floating_point() or value.is_complex()) and not bool(value.isfinite().all()):
            found.append("holds NaN or an infinity: draw it with tcst.tensors(specials=False)")
        if value.dtype in (torch.float16, torch.bfloat16):
            found.append(
                f"is {value.dtype}: draw it with tcst.float_dtypes(sizes=(32, 64)) if the program "
                "does not support half precision"
            )
        hints += [f"{name} {what}" for what in found]
    return hints
