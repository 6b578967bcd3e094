"""torch.export and AOTInductor as the compiled side: the deployment paths, checked as torch.compile is.

`Exported` stands where `torch.compile(target)` stands on the compiled side (compiled.py): called
as the target is, it exports the target with the call's own inputs the first time it meets their
signature (torch.export.export: the whole program as one graph, so never a graph break) and runs
the exported program's module (backend `export`) or an AOTInductor package compiled from it and
loaded (backend `aot_inductor`). Shapes are static, as torch.export makes them by default: a call
with a new input signature is exported again, and that counts as a recompile.

An AOTInductor package has no autograd: its outputs never require grad and it has no backward, so
on that path gradients and outputs' `requires_grad` are not compared, and the report says so. Its
weights and buffers are bound in place to the compiled side's module copy, none folded into the
code (`always_keep_tensor_constants`), so buffer updates are compared and weights changed between
calls are seen, as they are by a program compiled with torch.compile.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
import weakref
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any

import torch

from pytest_torchcompile import _compat
from pytest_torchcompile.counting.accounting import Accountant
from pytest_torchcompile.counting.records import GraphRecord, RecompileRecord
from pytest_torchcompile.running import randomness
from pytest_torchcompile.running.state import named_inputs
from pytest_torchcompile.running.targets import Target
from pytest_torchcompile.running.trees import tensors
from pytest_torchcompile.settings import EXPORT_PATHS, Settings

EXPORT = EXPORT_PATHS["export"]
PACKAGING = EXPORT_PATHS["aot_inductor"]
_CATEGORIES = {
    "shape": "size",
    "strides": "stride",
    "dtype": "dtype",
    "device": "device",
    "requires_grad": "requires_grad",
    "grad mode": "grad_mode",
}


@dataclass(frozen=True)
class Refusal:
    """The exporter (or AOTInductor's packaging) raised instead of making a program."""

    path: str  # "torch.export" or "AOTInductor packaging"
    exception: BaseException


@dataclass(frozen=True)
class _Scalar:
    """A Python scalar input as a program is specialised on it: its type and its value."""

    kind: str
    value: Hashable

    def __str__(self) -> str:
        return repr(self.value)


class Exported:
    """A target exported (and packaged, for `aot_inductor`) once per input signature.

    `fallback_random`: a package whose graph draws random numbers is compiled with Inductor's
    `fallback_random` (the checked side; `drew` says it happened); False compiles as the user
    does. `accountant`: where each export is counted (None for the uncounted as-user side).
    """

    def __init__(
        self,
        target: Target,
        backend: str,
        accountant: Accountant | None,
        *,
        fallback_random: bool,
    ) -> None:
        self.target = target
        self.backend = backend
        self.accountant = accountant
        self.fallback_random = fallback_random
        self.drew = False
        self.refusal: Refusal | None = None  # set when the last call's export raised
        self._programs: dict[tuple[tuple[str, Hashable], ...], Callable[..., Any]] = {}
        self._last: dict[str, Hashable] | None = None  # the latest signature exported
        self._directory: str | None = None  # packages live here until this object goes

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        self.refusal = None
        facts = signature(self.target, args, kwargs)
        key = tuple(facts.items())
        program = self._programs.get(key)
        if program is None:
            started = time.perf_counter()
            program, ops = self._make(args, kwargs)
            self._programs[key] = program
            self._count(facts, ops, time.perf_counter() - started)
        return program(*args, **kwargs)

    def refused(self, exc: BaseException | None) -> str | None:
        """The path that refused the program, where `exc` is the refusal; None otherwise."""
        if self.refusal is not None and self.refusal.exception is exc:
            return self.refusal.path
        return None

    # make ---------------------------------------------------------------------------------------

    def _make(
        self, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> tuple[Callable[..., Any], int]:
        """The program for this signature, and the operator count of its graph."""
        try:
            program = torch.export.export(self.target.as_module(), args, kwargs=kwargs)
        except Exception as exc:
            self.refusal = Refusal(EXPORT, exc)
            raise
        ops = sum(1 for node in program.graph.nodes if node.op == "call_function")
        if self.backend == "export":
            return program.module(), ops
        try:
            return self._package(program, args, kwargs), ops
        except Exception as exc:
            self.refusal = Refusal(PACKAGING, exc)
            raise

    def _package(
        self, program: torch.export.ExportedProgram, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Callable[..., Any]:
        configs: dict[str, Any] = {"always_keep_tensor_constants": True}
        if self.fallback_random and randomness.draws_random(program.graph_module):
            configs["fallback_random"] = True
            self.drew = True
        path = os.path.join(self._package_directory(), f"program{len(self._programs)}.pt2")
        package = _compat.aoti_package(program, path, configs)
        check_loader(package)
        loaded = _compat.aoti_load(package, _device_index(self.target, args, kwargs))
        named = {**program.state_dict, **program.constants}
        tensors = {k: v for k, v in named.items() if isinstance(v, torch.Tensor)}
        _compat.aoti_bind_constants(loaded, tensors)
        buffers = [tensors[name] for name in program.graph_signature.buffers if name in tensors]
        return LoadedPackage(loaded, buffers)

    def _package_directory(self) -> str:
        if self._directory is None:
            self._directory = tempfile.mkdtemp(prefix="pytest-torchcompile-aoti-")
            weakref.finalize(self, shutil.rmtree, self._directory, ignore_errors=True)
        return self._directory

    # count --------------------------------------------------------------------------------------

    def _count(self, facts: dict[str, Hashable], ops: int, seconds: float) -> None:
        """One more program, made in `seconds`: a graph, and a recompile where another
        signature came before."""
        last, self._last = self._last, facts
        if self.accountant is None:
            return
        frame = self.target.label
        how = "exported whole by torch.export (no graph breaks)"
        if self.backend == "aot_inductor":
            how += ", packaged by AOTInductor"
        self.accountant.exported(
            GraphRecord(frame=frame, ops=ops, reason=how),
            None if last is None else recompile_record(frame, last, facts),
            seconds,
        )


class LoadedPackage:
    """A loaded AOTInductor package, called as the program is.

    It writes inputs and buffers in place from C++, where autograd's version counters do not
    see it, and the checker reads those counters to know what a call may have changed (and so
    keep its state before the call for re-runs): after each call every tensor input and bound
    buffer is counted as written, which costs at most a copy kept that was not needed.
    """

    def __init__(self, loaded: Callable[..., Any], buffers: list[torch.Tensor]) -> None:
        self._loaded = loaded
        self._buffers = buffers

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        out = self._loaded(*args, **kwargs)
        inputs = tensors((args, kwargs))
        for tensor in [*inputs, *self._buffers]:
            torch.autograd.graph.increment_version(tensor)
        return out


_LOADERS_TRIED: set[str] = set()  # devices whose first package was loaded apart


def check_loader(package: str) -> None:
    """Load this process's first package once in a separate process: where torch's loader
    crashes (seen: torch 2.11 on a CUDA 13 machine, any program, CPU and CUDA alike), the
    crash becomes an environment fault instead of the end of the test session."""
    device = "cuda" if torch.cuda.is_available() else "cpu"
    if device in _LOADERS_TRIED:
        return
    crash = _compat.aoti_load_crash(package)
    if crash is not None:
        raise _compat.LoaderCrash(crash, package)
    _LOADERS_TRIED.add(device)


def signature(target: Target, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Hashable]:
    """What an exported program is specialised on, by name: each input tensor's shape, strides,
    dtype, device and requires_grad, each other input's value, grad mode and training mode."""
    facts: dict[str, Hashable] = {"grad mode": torch.is_grad_enabled()}
    facts |= target.specialised_on()
    for name, value in named_inputs(args, kwargs):
        _facts(name, value, facts)
    return facts


def _facts(name: str, value: Any, facts: dict[str, Hashable]) -> None:
    if isinstance(value, torch.Tensor):
        strided = value.layout == torch.strided
        facts[f"{name} shape"] = tuple(value.shape)
        facts[f"{name} strides"] = value.stride() if strided else None
        facts[f"{name} dtype"] = value.dtype
        facts[f"{name} device"] = value.device
        facts[f"{name} requires_grad"] = value.requires_grad
    elif isinstance(value, (tuple, list)):
        facts[f"{name} length"] = (type(value).__name__, len(value))
        for index, item in enumerate(value):
            _facts(f"{name}[{index}]", item, facts)
    elif isinstance(value, dict):
        facts[f"{name} keys"] = tuple(value)
        for key, item in value.items():
            _facts(f"{name}[{key!r}]", item, facts)
    elif value is None or isinstance(value, (bool, int, float, complex, str)):
        facts[name] = _Scalar(type(value).__name__, value)  # 1, 1.0, True: three programs
    else:
        facts[f"{name} object"] = id(value)  # exported for this very object


def recompile_record(
    frame: str, last: dict[str, Hashable], facts: dict[str, Hashable]
) -> RecompileRecord:
    """The re-export as a recompile, named by the first fact of the signature that changed."""
    changed = [key for key in {**last, **facts} if last.get(key) != facts.get(key)]
    key = changed[0] if changed else "signature"
    category = next(
        (kind for what, kind in _CATEGORIES.items() if key.endswith(what)), "python_value"
    )
    reason = f"exported again: {key} was {_shown(last.get(key))}, now {_shown(facts.get(key))}"
    return RecompileRecord(frame=frame, reason=reason, category=category)


def _shown(value: Hashable) -> str:
    return "absent" if value is None else str(value)


def _device_index(target: Target, args: tuple[Any, ...], kwargs: dict[str, Any]) -> int:
    """The CUDA device the package is loaded onto: that of the first CUDA tensor of the call."""
    for tensor in [*tensors((args, kwargs)), *target.state_tensors()]:
        if tensor.device.type == "cuda":
            index = tensor.device.index
            return index if index is not None else torch.cuda.current_device()
    return -1


def path_notes(settings: Settings) -> list[str]:
    """What the report should say about a test checked on an export path: what is not compared,
    and the settings that do not apply."""
    if settings.backend not in EXPORT_PATHS:
        return []
    notes: list[str] = []
    if not settings.has_autograd:
        notes.append(
            f"backend={settings.backend}: gradients and outputs' requires_grad not compared "
            "(an AOTInductor package runs without autograd); outputs, input mutations and "
            "module state compared"
        )
    ignored = [
        f"{name}={value}"
        for name, value, default in (
            ("mode", settings.mode, "default"),
            ("dynamic", settings.dynamic, "auto"),
        )
        if value != default
    ]
    if ignored:
        notes.append(
            f"{' and '.join(ignored)} not applied on backend={settings.backend}: torch.export "
            "exports static shapes, once per input signature"
        )
    return notes
