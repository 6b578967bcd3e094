"""--compile-parity=all: cross-checking the outermost module calls of tests written without the plugin.

While an intercepted test's body runs, `nn.Module.__call__` is wrapped. An outermost call (no
other module call in progress) is snapshotted, then runs exactly as the test wrote it and returns
its own result; afterwards the checker replays it from the snapshot, eager against compiled, with
its rules: outputs, input mutations, parameters and buffers, and gradients for the checker's fixed
cotangent (the replay's own backward, so the test's autograd graph is never touched). A divergence
is kept and fails the test after its body, so code under test (`pytest.raises`, retries) never
sees it; anything else the check path raises is a skip with its reason, never the test's failure.

Each test keeps the checker's compile world (Dynamo reset, so graph breaks and recompiles are
counted per test); within a test, instances of a module class share Dynamo's cache entry, and
across tests Inductor's on-disk FX-graph cache serves graphs already compiled. A module class,
structure and input signature checked once in the session is not checked again unless
`--compile-parity-every-call` is given.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from types import TracebackType
from typing import Any

import torch

from pytest_torchcompile import _compat
from pytest_torchcompile.errors import CompileParityFailure, ParityError
from pytest_torchcompile.records import ModuleCallRecord
from pytest_torchcompile.runner import Checker, isolated
from pytest_torchcompile.settings import Settings
from pytest_torchcompile.sides import RngState
from pytest_torchcompile.snapshot import clone_tree, sync_module

_REASON_LIMIT = 200  # characters of an exception kept in a skip reason


@dataclass(frozen=True)
class Selection:
    """Which module calls are cross-checked: class-name patterns and re-checking."""

    include: tuple[str, ...] = ("*",)
    exclude: tuple[str, ...] = ()
    every_call: bool = False

    def skips(self, qualified: str) -> str | None:
        """Why a class is not selected, or None; patterns match `pkg.mod.Class` or `Class`."""
        names = (qualified, qualified.rsplit(".", 1)[-1])

        def matches(patterns: tuple[str, ...]) -> bool:
            return any(fnmatch.fnmatchcase(n, p) for p in patterns for n in names)

        if not matches(self.include):
            return "not matched by --compile-parity-include"
        if matches(self.exclude):
            return "matched by --compile-parity-exclude"
        return None


class _Skip(Exception):
    """A call the interceptor does not check, with the reason the report gives."""


class Interceptor:
    """One test's interception: the wrapper around `nn.Module.__call__`, its checker and tally.

    Use as a context manager around the test body; then `finish()` raises the divergences, and
    `module_calls()` is what the report shows.
    """

    def __init__(self, settings: Settings, selection: Selection, checked: set[Hashable]) -> None:
        self.checker = Checker(settings, examples=True)  # a recompile limit starts a fresh cache
        self.selection = selection
        self.outermost_calls = 0
        self.divergences: list[str] = []
        self._checked = checked  # session-wide: signatures already checked
        self._diverged: set[Hashable] = set()  # this test's: other tests still check them
        self._tally: dict[tuple[str, str, str], int] = {}
        # (id of the test's module, inference mode) -> (that module, its pre-call stand-in)
        self._stand_ins: dict[tuple[int, bool], tuple[torch.nn.Module, torch.nn.Module]] = {}
        self._structures: dict[int, tuple[torch.nn.Module, Hashable]] = {}  # id -> (module, ...)
        self._original: Callable[..., Any] = torch.nn.Module.__call__
        self._wrapper: Callable[..., Any] | None = None
        self._busy = False  # a module call or a check is in progress: calls pass straight through
        self._isolation: Any = None

    # --- the wrapper --------------------------------------------------------------------------

    def __enter__(self) -> Interceptor:
        self._isolation = isolated(self.checker.accountant)
        self._isolation.__enter__()
        original, intercept = self._original, self._intercept

        def __call__(module: torch.nn.Module, *args: Any, **kwargs: Any) -> Any:
            if self._busy or torch.compiler.is_compiling():
                return original(module, *args, **kwargs)
            return intercept(module, args, kwargs)

        self._wrapper = __call__
        self._patch(__call__)
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._patch(self._original)
        self._isolation.__exit__(kind, value, traceback)

    def _patch(self, call: Callable[..., Any]) -> None:
        """Set nn.Module.__call__, unless someone else (torch.fx tracing) has replaced ours."""
        current = torch.nn.Module.__call__
        if current is self._original or current is self._wrapper:
            setattr(torch.nn.Module, "__call__", call)  # noqa: B010 (mypy refuses a method assignment)

    def _plain(self, module: torch.nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """The test's own call, with every module call inside it passed straight through."""
        self._busy = True
        try:
            return self._original(module, *args, **kwargs)
        finally:
            self._busy = False

    def _intercept(
        self, module: torch.nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        self.outermost_calls += 1
        number = self.outermost_calls
        name = _qualified_name(type(module))
        try:
            signature = self._select(module, name, args, kwargs)
            stand_in = self._stand_in(module)
            inputs = clone_tree((args, dict(kwargs)))
        except _Skip as skip:
            self._count(name, "skipped", str(skip))
            return self._plain(module, args, kwargs)
        except Exception as exc:  # the snapshot failed: the test's call runs as written
            self._count(name, "skipped", f"cannot snapshot the call: {_text(exc)}")
            return self._plain(module, args, kwargs)
        before = RngState.capture()
        try:
            output = self._plain(module, args, kwargs)
        except BaseException as exc:
            self._count(name, "skipped", f"the call raised {type(exc).__name__}: not replayed")
            raise
        after = RngState.capture()
        before.restore()
        try:
            self._check(number, name, signature, stand_in, inputs)
        finally:
            after.restore()
        return output

    # --- selecting and snapshotting -----------------------------------------------------------

    def _select(
        self, module: torch.nn.Module, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Hashable:
        """The call's signature, or _Skip with the reason it is not checked."""
        reason = self.selection.skips(name)
        if reason is not None:
            raise _Skip(reason)
        if _compat.is_compiled_module(module):
            raise _Skip("compiled by the test itself (torch.compile)")
        if isinstance(module, torch.jit.ScriptModule):
            raise _Skip("a TorchScript module")
        if torch.jit.is_tracing():  # type: ignore[attr-defined,no-untyped-call]
            raise _Skip("called under torch.jit.trace")
        signature = (
            name,
            self._structure(module),
            module.training,
            _inputs_signature((args, kwargs)),
            torch.is_grad_enabled(),
            torch.is_inference_mode_enabled(),
            torch.is_autocast_enabled("cpu"),
            torch.is_autocast_enabled("cuda"),
        )
        if not self.selection.every_call and signature in self._checked:
            raise _Skip("already checked in this session with this structure and input signature")
        if not self.selection.every_call and signature in self._diverged:
            raise _Skip("already diverged in this test with this structure and input signature")
        return signature

    def _structure(self, module: torch.nn.Module) -> Hashable:
        """A module's tensors (names, shapes, dtypes, devices), computed once per module per test.

        Walking a large model on every call would cost milliseconds; a module restructured in
        the middle of a test keeps its first structure here (its stand-in is still copied anew).
        """
        kept = self._structures.get(id(module))
        if kept is None or kept[0] is not module:
            kept = (module, _structure(module))
            self._structures[id(module)] = kept
        return kept[1]

    def _stand_in(self, module: torch.nn.Module) -> torch.nn.Module:
        """A copy holding the module's state before the call: the replay's module.

        One per module (and inference mode) for the whole test, synced before each call, so the
        checker keeps one compiled copy for it and Dynamo sees the sequence of calls.
        """
        key = (id(module), torch.is_inference_mode_enabled())
        kept = self._stand_ins.get(key)
        with torch.inference_mode(False):  # parameters of a copy made here stay normal tensors
            if kept is not None:
                try:
                    sync_module(module, kept[1])
                    return kept[1]
                except Exception:  # restructured, or state sync cannot copy: copy it afresh
                    pass
            copied = clone_tree(module)
        self._stand_ins[key] = (module, copied)
        return copied  # type: ignore[no-any-return]

    # --- checking -------------------------------------------------------------------------------

    def _check(
        self,
        number: int,
        name: str,
        signature: Hashable,
        stand_in: torch.nn.Module,
        inputs: tuple[tuple[Any, ...], dict[str, Any]],
    ) -> None:
        """Replay the call from its snapshot through the checker; tally the outcome."""
        args, kwargs = inputs
        fallbacks = len(self.checker.accountant.counts()["fallbacks"])
        self._busy = True
        self._patch(self._original)  # Dynamo traces nested calls as it would without the plugin
        try:
            self.checker.check(stand_in, args, kwargs)
        except CompileParityFailure as failure:
            report = self.checker.last_report
            leaves = [leaf.leaf for leaf in report.failures] if report and not report.ok else []
            where = ", ".join(leaves) or type(failure).__name__
            self._diverged.add(signature)
            self._count(name, "diverged", where)
            self.divergences.append(
                f"module call {number} ({name}), differing at {where}:\n{failure}"
            )
            return
        except Exception as exc:  # not a verdict: the replay itself could not run
            self._count(name, "skipped", f"the replay raised {_text(exc)}")
            return
        finally:
            if self._wrapper is not None:
                self._patch(self._wrapper)
            self._busy = False
        fallback = self.checker.accountant.counts()["fallbacks"][fallbacks:]
        if fallback:
            self._count(name, "skipped", f"the compiled side ran eagerly: {fallback[0]['reason']}")
            return
        self._checked.add(signature)
        self._count(name, "checked", "")

    def _count(self, module: str, outcome: str, reason: str) -> None:
        key = (module, outcome, reason)
        self._tally[key] = self._tally.get(key, 0) + 1

    # --- after the test body ------------------------------------------------------------------

    def module_calls(self) -> list[ModuleCallRecord]:
        return [
            ModuleCallRecord(module=module, outcome=outcome, reason=reason, calls=calls)
            for (module, outcome, reason), calls in sorted(self._tally.items())
        ]

    def finish(self) -> None:
        """Fail the test for its divergences; then budgets, when the user set one.

        Without a budget, a call whose compiled side ran eagerly was already reported as skipped:
        it showed no parity, but it is no divergence of the test's program.
        """
        __tracebackhide__ = True
        if self.divergences:
            count = len(self.divergences)
            raise ParityError(
                f"{count} intercepted module call(s) diverged under torch.compile "
                "(--compile-parity=all replays each call from a snapshot, eager vs compiled):\n\n"
                + "\n\n".join(self.divergences)
            )
        settings = self.checker.settings
        budgets = (settings.max_graph_breaks, settings.max_recompiles)
        if settings.fullgraph or any(budget is not None for budget in budgets):
            self.checker.finish()


def _qualified_name(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def _text(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    text = f"{type(exc).__name__}: {lines[0] if lines else ''}"
    return text if len(text) <= _REASON_LIMIT else text[:_REASON_LIMIT] + " [...]"


def _structure(module: torch.nn.Module) -> Hashable:
    """What makes two modules of one class different programs: their tensors."""
    tensors = []
    for name, tensor in (*module.named_parameters(), *module.named_buffers()):
        if torch.nn.parameter.is_lazy(tensor):
            raise _Skip("a lazy module whose parameters are not initialized yet")
        tensors.append((name, tuple(tensor.shape), tensor.dtype, tensor.device))
    return tuple(tensors)


def _inputs_signature(value: Any) -> Hashable:
    """Types, shapes, dtypes and layouts of the inputs, and the values of Python scalars."""
    if isinstance(value, torch.Tensor):
        if type(value) not in (torch.Tensor, torch.nn.Parameter):
            raise _Skip(f"an input is a tensor subclass ({type(value).__name__})")
        if value.device.type == "meta":
            raise _Skip("meta tensors hold no values to compare")
        return (
            tuple(value.shape),
            value.stride() if value.layout == torch.strided else (),
            value.dtype,
            value.device,
            value.layout,
            value.requires_grad,
        )
    if isinstance(value, torch.fx.Proxy):
        raise _Skip("called during torch.fx symbolic tracing")
    if isinstance(value, (tuple, list)):
        return type(value).__name__, tuple(_inputs_signature(item) for item in value)
    if isinstance(value, dict):
        return "dict", tuple((key, _inputs_signature(item)) for key, item in value.items())
    if isinstance(value, (bool, int, float, complex, str, bytes, type(None))):
        return type(value).__name__, value
    return (type(value).__qualname__,)


__all__ = ["Interceptor", "Selection"]
