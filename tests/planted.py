"""Planted wrong backends: each miscompiles in one known way, so the checker must fail on it.

They use only torch.compile's public backend contract: a backend gets Dynamo's FX graph and
its example inputs and returns a callable. The graph itself runs eagerly; each planted bug
changes what goes in or comes out.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

Compiled = Callable[..., Any]


def _as_list(out: Any) -> list[Any]:
    return list(out) if isinstance(out, (tuple, list)) else [out]


def _placeholders(gm: torch.fx.GraphModule) -> list[str]:
    return [node.name for node in gm.graph.nodes if node.op == "placeholder"]


def corrupt_output(gm: torch.fx.GraphModule, example_inputs: Sequence[Any]) -> Compiled:
    """The first floating output gets one element off by 1e-3 (relative)."""

    def run(*args: Any) -> Any:
        outs = _as_list(gm(*args))
        for i, out in enumerate(outs):
            if isinstance(out, torch.Tensor) and out.is_floating_point() and out.numel():
                flat = out.detach().reshape(-1)
                bumped = out + torch.zeros_like(out).reshape(-1).index_fill(
                    0, torch.tensor([0], device=out.device), float(flat[0].abs() + 1) * 1e-3
                ).reshape(out.shape)
                outs[i] = bumped
                break
        return outs

    return run


class _ScaleGrad(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
        return x.view_as(x)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> torch.Tensor:
        return grad * 1.01


def corrupt_gradient(gm: torch.fx.GraphModule, example_inputs: Sequence[Any]) -> Compiled:
    """Forward is right; the gradient flowing into the graph's first differentiable input is 1% off."""

    def run(*args: Any) -> Any:
        args = list(args)
        for i, arg in enumerate(args):
            if isinstance(arg, torch.Tensor) and arg.requires_grad:
                args[i] = _ScaleGrad.apply(arg)
                break
        return gm(*args)

    return run


def drop_input_mutation(gm: torch.fx.GraphModule, example_inputs: Sequence[Any]) -> Compiled:
    """Runs the graph on copies of the user's inputs, so their in-place updates are lost."""
    user = [not name.startswith("l_self") for name in _placeholders(gm)]

    def run(*args: Any) -> Any:
        return gm(
            *[
                a.clone() if keep and isinstance(a, torch.Tensor) else a
                for a, keep in zip(args, user, strict=True)
            ]
        )

    return run


def skip_buffer_update(gm: torch.fx.GraphModule, example_inputs: Sequence[Any]) -> Compiled:
    """Runs the graph on copies of module buffers, so running statistics never change."""
    buffers = ["buffers" in name for name in _placeholders(gm)]

    def run(*args: Any) -> Any:
        return gm(
            *[a.clone() if is_buffer else a for a, is_buffer in zip(args, buffers, strict=True)]
        )

    return run


def change_output_dtype(gm: torch.fx.GraphModule, example_inputs: Sequence[Any]) -> Compiled:
    """The first floating output comes back in float64 (values unchanged)."""

    def run(*args: Any) -> Any:
        outs = _as_list(gm(*args))
        for i, out in enumerate(outs):
            if isinstance(out, torch.Tensor) and out.is_floating_point():
                outs[i] = out.to(torch.float64)
                break
        return outs

    return run


def raise_when_compiled(gm: torch.fx.GraphModule, example_inputs: Sequence[Any]) -> Compiled:
    """Compiles fine, then every compiled call raises."""

    def run(*args: Any) -> Any:
        raise RuntimeError("planted: the compiled kernel failed")

    return run


def corrupt_output_on_cuda(gm: torch.fx.GraphModule, example_inputs: Sequence[Any]) -> Compiled:
    """Right on the CPU; on CUDA the first floating output has one element off by 1e-3."""
    wrong = corrupt_output(gm, example_inputs)

    def run(*args: Any) -> Any:
        on_cuda = any(isinstance(a, torch.Tensor) and a.is_cuda for a in args)
        return wrong(*args) if on_cuda else gm(*args)

    return run
