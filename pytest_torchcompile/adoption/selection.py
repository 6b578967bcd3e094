"""Which intercepted calls are cross-checked, and what makes two calls the same program.

A module call is checked unless the user's patterns leave its class out, it cannot be replayed (a module
compiled or scripted by the test itself, a call under tracing, tensor subclasses or meta tensors
as inputs, parameters not initialized yet), or a call with the same signature was checked
already: the same module tree (each submodule's class and settings, parameter-free layers
included), the same tensors in it, the same input types, shapes, dtypes and layouts, and the
same modes. A function call (--compile-parity-functions) is keyed by the function's qualified name,
its input signature and the modes. The inputs' signature, and the inputs no call is checked with,
are the running stage's (running/signatures.py): the runner tells calls apart by it too.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any

import torch

from pytest_torchcompile import _compat
from pytest_torchcompile.running.signatures import SCALARS, Skip, inputs_signature


@dataclass(frozen=True)
class Selection:
    """Which calls are cross-checked: class and function name patterns, and re-checking."""

    include: tuple[str, ...] = ("*",)
    exclude: tuple[str, ...] = ()
    every_call: bool = False

    def skips(self, qualified: str) -> str | None:
        """Why a class or function is not selected, or None; patterns match the qualified name
        (`pkg.mod.Class`, `pkg.mod.f`) or the last part (`Class`, `f`)."""
        names = (qualified, qualified.rsplit(".", 1)[-1])

        def matches(patterns: tuple[str, ...]) -> bool:
            return any(fnmatch.fnmatchcase(n, p) for p in patterns for n in names)

        if not matches(self.include):
            return "not matched by --compile-parity-include"
        if matches(self.exclude):
            return "matched by --compile-parity-exclude"
        return None


def refusal(module: torch.nn.Module | None) -> str | None:
    """Why a call of `module` (None: of a function) cannot be replayed whatever its inputs, or
    None."""
    if module is not None and _compat.is_compiled_module(module):
        return "compiled by the test itself (torch.compile)"
    if module is not None and isinstance(module, torch.jit.ScriptModule):
        return "a TorchScript module"
    if torch.jit.is_tracing():  # type: ignore[attr-defined,no-untyped-call]
        return "called under torch.jit.trace"
    return None


def call_signature(name: str, program: Hashable, args: Any, kwargs: Any) -> Hashable:
    """What makes two calls one program for Dynamo: the class or function's name, `program` (a
    module's structure and training flag; None for a function), the inputs and the modes."""
    return (
        name,
        program,
        inputs_signature((args, kwargs)),
        torch.is_grad_enabled(),
        torch.is_inference_mode_enabled(),
        torch.is_autocast_enabled("cpu"),
        torch.is_autocast_enabled("cuda"),
    )


def module_structure(module: torch.nn.Module) -> Hashable:
    """What makes two modules of one class different programs: the tree of their submodules,
    each with its class and settings (so Linear, Softplus, Linear is not Linear, Softplus,
    Linear, Sigmoid, nor a Conv2d of stride 2 one of stride 1), and their tensors."""
    tree = tuple(
        (name, type(submodule), _settings(submodule)) for name, submodule in module.named_modules()
    )
    tensors = []
    for name, tensor in (*module.named_parameters(), *module.named_buffers()):
        if torch.nn.parameter.is_lazy(tensor):
            raise Skip("a lazy module whose parameters are not initialized yet")
        shape = tuple(tensor.shape)
        tensors.append((name, shape, tensor.dtype, tensor.device, tensor.requires_grad))
    return tree, tuple(tensors)


def _settings(module: torch.nn.Module) -> tuple[tuple[str, Hashable], ...]:
    """A module's public attributes that hold constants: sizes, flags, a Softplus's beta, a
    convolution's stride. The training flag is left to the call's own signature (it changes
    between calls; this is read once per module and test)."""
    return tuple(
        sorted(
            (name, value)
            for name, value in vars(module).items()
            if not name.startswith("_") and name != "training" and _constant(value)
        )
    )


def _constant(value: Any) -> bool:
    if isinstance(value, tuple):
        return all(_constant(item) for item in value)
    return isinstance(value, SCALARS)


__all__ = ["Selection", "call_signature", "module_structure", "refusal"]
