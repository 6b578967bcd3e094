"""What makes two calls' inputs the same program to Dynamo, and the inputs no call can be checked
with (a tensor subclass, meta tensors, a call under symbolic tracing).

A checked call (calls.py) tells two calls of a test one kind by it (a reproduced eager re-run
serves the next ones), and adoption's selection keys the calls it checked by it, so it lives
here, below both.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

import torch

from pytest_torchcompile.running import trees
from pytest_torchcompile.running.copier import is_atomic, is_shared

SCALARS = (bool, int, float, complex, str, bytes, type(None))  # inputs keyed by their value


class Skip(Exception):
    """A call the interceptor does not check, with the reason the report gives."""


def inputs_signature(value: Any, depth: int = 3) -> Hashable:
    """Types, shapes, dtypes and layouts of the inputs, the values of Python scalars, and what
    the objects among them hold: their attributes' signatures, a module-level object by its
    identity (`s.mode is A` and `s.mode is B` are two programs to Dynamo, and two checks)."""
    if isinstance(value, torch.Tensor):
        if type(value) not in (torch.Tensor, torch.nn.Parameter):
            raise Skip(f"an input is a tensor subclass ({type(value).__name__})")
        if value.device.type == "meta":
            raise Skip("meta tensors hold no values to compare")
        return (
            tuple(value.shape),
            value.stride() if value.layout == torch.strided else (),
            value.dtype,
            value.device,
            value.layout,
            value.requires_grad,
        )
    if isinstance(value, torch.fx.Proxy):
        raise Skip("called during torch.fx symbolic tracing")
    if isinstance(value, (tuple, list)):
        return type(value).__name__, tuple(inputs_signature(item, depth) for item in value)
    if isinstance(value, dict):
        return "dict", tuple((key, inputs_signature(item, depth)) for key, item in value.items())
    if isinstance(value, SCALARS):
        return type(value).__name__, value
    if depth and not isinstance(value, (torch.nn.Module, type)) and not is_atomic(value):
        if is_shared(value):
            return "module-level", id(value)
        held = trees.object_attributes(value)
        if held:
            attributes = ((k, inputs_signature(v, depth - 1)) for k, v in sorted(held.items()))
            return type(value).__qualname__, tuple(attributes)
    return (type(value).__qualname__,)


__all__ = ["SCALARS", "Skip", "inputs_signature"]
