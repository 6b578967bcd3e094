"""Is this call checkable as given? Misuse is an error that says so (chex), before any compiler runs.

A call whose inputs or module hold meta tensors has no values to compare, and one that returns an
iterator has none until it is consumed. Left to the comparison, the first failed deep inside torch
(`Cannot copy out of meta tensor`) and the second read as a compiler bug with a stage and a repro;
here each is an `UncheckableCallError` naming the part and what to write instead.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterator, Mapping
from typing import Any

import torch

from pytest_torchcompile.errors import UncheckableCallError
from pytest_torchcompile.running.state import named_inputs
from pytest_torchcompile.running.targets import Target
from pytest_torchcompile.running.trees import containers


def check_call(target: Target, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> None:
    """Refuse a call the checker cannot check before anything is copied or compiled: a meta
    tensor among the inputs or the parameters and buffers of the module (a callable that is
    not one is refused as the call enters, by targets.target_of)."""
    __tracebackhide__ = True
    for name, value in [*target.owned(), *_named_leaves(named_inputs(args, kwargs))]:
        where = _meta_tensor_in(value)
        if where is not None:
            raise _meta_tensor(f"{where} of {name}" if where else name)


def check_output(output: Any) -> None:
    """Refuse eager's output where it cannot be compared: an iterator (a generator, `map`,
    `zip`...) anywhere in its tuples, lists and dicts, or a meta tensor (a callable that closes
    over a meta module)."""
    __tracebackhide__ = True
    for name, value in _named_leaves([("output", output)]):
        if isinstance(value, torch.Tensor) and value.is_meta:
            raise _meta_tensor(name)
        if hasattr(type(value), "__next__"):
            what = (
                "a generator"
                if inspect.isgenerator(value)
                else f"an iterator ({type(value).__qualname__})"
            )
            raise UncheckableCallError(
                f"compile_parity cannot check {name}: it is {what}, which cannot be compared "
                "without consuming it (its values come only as it is iterated, after the call "
                "returned). Consume it inside the callable, e.g. "
                "compile_parity(lambda x: list(fn(x)), x), or return a tuple or list."
            )


def _meta_tensor(part: str) -> UncheckableCallError:
    return UncheckableCallError(
        f"compile_parity cannot check {part}: it is a meta tensor, which holds no values to "
        "compare. Pass tensors that hold values, or materialize the module first: "
        'module.to_empty(device="cpu"), then initialize it (load a state_dict, or call '
        "reset_parameters()). Meta tensors carry shapes and dtypes only, which a plain eager "
        "call already shows."
    )


def _named_leaves(named: list[tuple[str, Any]]) -> Iterator[tuple[str, Any]]:
    """(name, leaf) for what sits inside each value's tuples, lists and dicts: `input 1[0]`."""
    for name, value in named:
        items = containers(value)
        if items is None:
            yield name, value
        else:
            yield from _named_leaves([(name + suffix, item) for suffix, item in items])


def _meta_tensor_in(value: Any) -> str | None:
    """Where `value` holds a meta tensor: "" for the value itself, "parameter 'weight'" or
    "buffer 'bn.running_mean'" for a module's; None where it holds none."""
    if isinstance(value, torch.Tensor):
        return "" if value.is_meta else None
    if not isinstance(value, torch.nn.Module):
        return None
    for kind, named in (("parameter", value.named_parameters()), ("buffer", value.named_buffers())):
        for name, tensor in named:
            if tensor.is_meta:
                return f"{kind} {name!r}"
    return None


__all__ = ["check_call", "check_output"]
