"""--compile-parity=all: cross-checking the outermost module calls of tests written without the plugin.

While an intercepted test's body runs, `nn.Module.__call__` and every class's own override of it
(callsites.py) are wrapped. An outermost call (no other module call in progress) is snapshotted,
then runs exactly as the test wrote it and returns its own result; afterwards the checker replays
it from the snapshot, eager against compiled, with its rules: outputs, input mutations,
parameters and buffers, and gradients for the checker's fixed cotangent (the replay's own
backward, so the test's autograd graph is never touched). A divergence is kept and fails the
test after its body, so code under test (`pytest.raises`, retries) never sees it; anything else
the check path raises is a skip with its reason, never the test's failure.

Each test compiles afresh (its own Dynamo cache). With `--compile-parity-shared` compiles serve
later tests, as in one long-running program: the compiled side keeps one compile per module
class and structure for the session (shared_compiles.py), so Dynamo's guards and automatic
dynamic shapes decide what a later call reuses or recompiles; each test's report says which of
its checks compiled (static or dynamic graphs) and which reused a compile. A module class, structure
and input signature checked once in the session is not checked again unless
`--compile-parity-every-call` is given, and `--compile-parity-signatures=K` checks at most K
signatures of a class or function (selection.py).

With --compile-parity-functions, the public functions of the named packages are wrapped too
(functions.py), and a function call takes the same path: no other module or function call in
progress makes it outermost; the calls it makes are "inside checked" once it is checked.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Hashable
from contextlib import AbstractContextManager, ExitStack, nullcontext
from dataclasses import dataclass
from types import FunctionType, TracebackType
from typing import Any

import torch

from pytest_torchcompile.adoption.callsites import CallSites, Constructions, qualified_name
from pytest_torchcompile.adoption.functions import Found, FunctionSites
from pytest_torchcompile.adoption.selection import (
    Selection,
    call_signature,
    module_structure,
    refusal,
)
from pytest_torchcompile.counting.costs import CHECK_KINDS
from pytest_torchcompile.counting.records import ALREADY_CHECKED, ModuleCallRecord
from pytest_torchcompile.errors import ParityError
from pytest_torchcompile.outcome import NO_COMPILER, CheckOutcome, Happened
from pytest_torchcompile.runner import Checker
from pytest_torchcompile.running.copier import clone_tree
from pytest_torchcompile.running.recorder import Recorder
from pytest_torchcompile.running.shared_compiles import SharedCompiles
from pytest_torchcompile.running.signatures import Skip
from pytest_torchcompile.running.snapshot import sync_module
from pytest_torchcompile.running.world import World, unseen
from pytest_torchcompile.settings import CONTROL_BACKEND, Settings

_REASON_LIMIT = 200  # characters of an exception kept in a skip reason

Inputs = tuple[tuple[Any, ...], dict[str, Any]]


@dataclass(frozen=True)
class _Call:
    """One call as the test made it: the module (None for a function call), the `__call__` or
    function it reached, the arguments, and the class or function's qualified name."""

    module: torch.nn.Module | None
    original: Callable[..., Any]
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    name: str

    @property
    def kind(self) -> str:
        return "module" if self.module is not None else "function"

    def run(self) -> Any:
        if self.module is None:
            return self.original(*self.args, **self.kwargs)
        return self.original(self.module, *self.args, **self.kwargs)


class Interceptor:
    """One test's interception: the wrappers around module (and function) calls, its checker
    and tally.

    Use as a context manager around the test body; then `finish()` raises the divergences, and
    `module_calls()`, `inside_checked` and `inside_checked_functions` are what the report shows.
    """

    def __init__(
        self,
        settings: Settings,
        selection: Selection,
        checked: set[Hashable],
        constructions: Constructions | None = None,
        shared: SharedCompiles | None = None,
        checked_per_class: dict[str, set[Hashable]] | None = None,
        functions: Found | None = None,
    ) -> None:
        # Hypothesis examples: a recompile limit starts a fresh cache.
        self.checker = Checker(settings, examples=True, shared=shared)
        self._shared = shared  # the session's compiles, or None: this test compiles afresh
        self.selection = selection
        self.outermost_calls = 0
        self.divergences: list[str] = []
        self.inside_checked: set[str] = set()  # classes of submodules of checked calls
        self.inside_checked_functions: set[str] = set()  # functions the checked calls made
        self._checked = checked  # session-wide: signatures already checked
        # session-wide: signatures checked or diverged per class (--compile-parity-signatures)
        self._per_class = {} if checked_per_class is None else checked_per_class
        self._diverged: set[Hashable] = set()  # this test's: other tests still check them
        self._tally: dict[tuple[str, str, str, str], int] = {}  # kind, name, outcome, reason
        self._last: tuple[str, str, str, str] = ("", "", "", "")  # the key counted last
        self._diverged_kinds: set[str] = set()  # module, function
        self._copies = _ModuleCopies()
        self._sites = CallSites(self._wrapper)
        self.functions = functions  # --compile-parity-functions: what is wrapped, and not
        self._functions = (
            FunctionSites(functions, self._function_wrapper) if functions is not None else None
        )
        self._constructions = constructions  # the test's: paused while the checker copies
        self._busy = False  # a module call or a check is in progress: calls pass straight through
        self._plain_s = 0.0  # the test's own call, of the call being intercepted
        self._open = False  # the test body runs: a wrapper someone kept afterwards passes through
        self._nested: set[str] = set()  # functions the outermost call in progress made
        self._worlds: dict[int, tuple[Callable[..., Any], World]] = {}  # by id of a callable
        self._recorders: dict[int, tuple[Callable[..., Any], Recorder]] = {}  # by id of a replay
        self._isolation: Any = None

    # --- the wrappers -------------------------------------------------------------------------

    def __enter__(self) -> Interceptor:
        self._isolation = self.checker.isolated(reset=self._shared is None)
        self._isolation.__enter__()
        self._sites.install()
        if self._functions is not None:
            self._functions.install()
        self._open = True
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._open = False
        if self._functions is not None:
            self._functions.remove()
        self._sites.remove()
        self._isolation.__exit__(kind, value, traceback)

    def _wrapper(self, original: Callable[..., Any]) -> Callable[..., Any]:
        """What replaces one class's `__call__` (`original`) while the test body runs."""
        intercept = self._intercept

        def __call__(module: torch.nn.Module, *args: Any, **kwargs: Any) -> Any:
            if self._busy or torch.compiler.is_compiling():
                return original(module, *args, **kwargs)
            name = qualified_name(type(module))
            return intercept(_Call(module, original, args, kwargs, name))

        return __call__

    def _function_wrapper(self, name: str, original: FunctionType) -> Callable[..., Any]:
        """What replaces one function (`original`, named `name`) while the test body runs."""
        intercept = self._intercept

        @functools.wraps(original)
        def call(*args: Any, **kwargs: Any) -> Any:
            if self._busy or not self._open or torch.compiler.is_compiling():
                if self._busy:
                    self._nested.add(name)
                return original(*args, **kwargs)
            return intercept(_Call(None, original, args, kwargs, name))

        return call

    def _plain(self, call: _Call) -> Any:
        """The test's own call, with every call inside it passed straight through."""
        self._busy = True
        started = time.perf_counter()
        try:
            return call.run()
        finally:
            self._plain_s += time.perf_counter() - started
            self._busy = False

    def _intercept(self, call: _Call) -> Any:
        """Check the call, and count the time spent on it besides the test's own call and the
        checker's parts: under "skipped calls" where it was then not checked, else under
        "intercepting" (the time outside the breakdown is counted too)."""
        started, self._plain_s = time.perf_counter(), 0.0
        counted = self.checker.seconds_counted()
        try:
            return self._intercept_call(call)
        finally:
            parts = self.checker.seconds_counted() - counted
            own = time.perf_counter() - started - self._plain_s - parts
            skipped = self._last[2] == "skipped"
            self.checker.count_seconds(
                "skipped calls" if skipped else "intercepting", max(own, 0.0)
            )

    def _intercept_call(self, call: _Call) -> Any:
        self.outermost_calls += 1
        number = self.outermost_calls
        self._nested = set()
        try:
            signature = self._select(call)
            replayed = call.original if call.module is None else self._copies.stand_in(call.module)
            inputs = clone_tree((call.args, dict(call.kwargs)))
            world = self._world(call)
            before = world.capture()
        except Skip as skip:
            self._count(call, "skipped", str(skip))
            return self._plain(call)
        except Exception as exc:  # the snapshot failed: the test's call runs as written
            self._count(call, "skipped", f"cannot snapshot the call: {_text(exc)}")
            return self._plain(call)
        try:
            output = self._plain(call)
        except BaseException as exc:
            self._count(call, "skipped", f"the call raised {type(exc).__name__}: not replayed")
            raise
        # The replays start from the world as it was before the call, and leave it as the
        # test's own call did: the test sees one call.
        try:
            after = world.capture()
        except Exception as exc:  # the plugin's own machinery: the test goes on as plain
            self._count(call, "skipped", f"the checker failed: {_text(exc)}")
            return output
        try:
            world.restore(before)
            with unseen():
                self._check(number, call, signature, replayed, inputs)
        except Exception as exc:
            self._count(call, "skipped", f"the checker failed: {_text(exc)}")
        finally:
            world.restore(after)
        if world.unrestored:
            self._partly(call, _UNRESTORED + ", ".join(world.unrestored))
        return output

    def _world(self, call: _Call) -> World:
        """The world around the test's call (found once per module or function and test)."""
        fn = call.module if call.module is not None else call.original
        kept = self._worlds.get(id(fn))
        if kept is None or kept[0] is not fn:
            kept = self._worlds[id(fn)] = (fn, World.of(fn))
        return kept[1].for_call(call.args, call.kwargs)

    # --- selecting and snapshotting -----------------------------------------------------------

    def _select(self, call: _Call) -> Hashable:
        """The call's signature, or Skip with the reason it is not checked."""
        module = call.module
        reason = self.selection.skips(call.name) or refusal(module)
        if reason is not None:
            raise Skip(reason)
        program = (self._copies.structure(module), module.training) if module is not None else None
        signature = call_signature(call.name, program, call.args, call.kwargs)
        structure = " with this structure" if module is not None else ""
        if not self.selection.every_call and signature in self._checked:
            raise Skip(f"{ALREADY_CHECKED}{structure} and input signature")
        if not self.selection.every_call and signature in self._diverged:
            raise Skip(f"already diverged in this test{structure} and input signature")
        cap = self.checker.settings.parity_signatures
        counted = self._per_class.setdefault(call.name, set())
        if cap is not None and signature not in counted and len(counted) >= cap:
            source = self.checker.settings.source("parity_signatures")
            raise Skip(f"{CAPPED}: {cap} input signatures of it checked ({source})")
        return signature

    # --- checking -------------------------------------------------------------------------------

    def _check(
        self,
        number: int,
        call: _Call,
        signature: Hashable,
        replayed: Callable[..., Any],
        inputs: Inputs,
    ) -> None:
        """Replay the call from its snapshot through the checker (`replayed`: the module's
        stand-in, or the function); tally the outcome."""
        args, kwargs = inputs
        recorder = self._recorder(replayed)  # kept for triage if it diverges
        self._busy = True
        try:
            structure = self._copies.structure(call.module) if call.module is not None else None
            self.checker.share(replayed, structure)
            outcome = self.checker.outcome(  # Dynamo traces the originals
                replayed, args, kwargs, recorder=recorder, within=self._originals
            )
        finally:
            self._busy = False
        happened, error = outcome.happened, outcome.error
        if happened is Happened.RECOMPILE_LIMIT and not self._budgeted():
            # the program would run eagerly there: no parity shown, no divergence either
            self._count(call, "skipped", f"the compiled side would run eagerly: {_text(error)}")
        elif happened in _DIVERGING:  # a recompile limit the user asked to be held to, too
            self._per_class[call.name].add(signature)
            self._diverged.add(signature)
            self._diverge(number, call, outcome, recorder, signature)
        elif happened is Happened.UNCHECKABLE:  # meta tensors, an iterator output: no values
            self._count(call, "skipped", f"cannot check the call: {_text(error)}")
        elif happened is Happened.RAISED:  # not a verdict: the replay itself could not run
            self._count(call, "skipped", f"the replay raised {_text(error)}")
        elif outcome.fallbacks:
            reason = outcome.fallbacks[0]["reason"]
            self._count(call, "skipped", f"the compiled side ran eagerly: {reason}")
        elif outcome.uncompared:
            self._count(call, "skipped", outcome.uncompared)
        else:
            self.checker.check_kind(outcome)
            self._per_class[call.name].add(signature)
            self._checked.add(signature)
            self._count(call, *outcome.how_checked)
            self.inside_checked_functions |= self._nested - {call.name}
            if isinstance(replayed, torch.nn.Module):
                self.inside_checked |= {
                    qualified_name(type(inner))
                    for inner in replayed.modules()
                    if inner is not replayed
                }

    def _recorder(self, replayed: Callable[..., Any]) -> Recorder:
        """The checks of one module (or function) in this test, in order: triage replays the
        whole sequence, whose earlier calls left the guards a divergence may depend on."""
        kept = self._recorders.get(id(replayed))
        if kept is None or kept[0] is not replayed:
            kept = self._recorders[id(replayed)] = (replayed, Recorder())
        return kept[1]

    def _originals(self) -> ExitStack:
        """The original `__call__`s and functions, and no constructions noted, while a replay
        runs."""
        stack = ExitStack()
        stack.enter_context(self._sites.suspended())
        if self._functions is not None:
            stack.enter_context(self._functions.suspended())
        stack.enter_context(_paused(self._constructions))
        return stack

    def _diverge(
        self,
        number: int,
        call: _Call,
        outcome: CheckOutcome,
        recorder: Recorder,
        signature: Hashable,
    ) -> None:
        """Keep the divergence for the test's failure; the first one's recorder for triage."""
        kind = self.checker.check_kind(outcome)
        where = ", ".join(outcome.failing_leaves) or type(outcome.error).__name__
        self._count(call, "diverged", where)
        self._diverged_kinds.add(call.kind)
        self.divergences.append(
            f"{call.kind} call {number} ({call.name}), differing at {where}:\n{outcome.error}\n"
            f"(the compiled side {_graphs_text(kind, call.kind)})"
        )
        if self.checker.keeps_for_triage(recorder):  # triage replays the first diverging call
            recorder.diverged()
            recorder.session_graphs = kind if kind in CHECK_KINDS[1:] else ""
            recorder.failure_key = (signature, where, kind)

    def _count(self, call: _Call, outcome: str, reason: str) -> None:
        key = (call.kind, call.name, outcome, reason)
        self._tally[key] = self._tally.get(key, 0) + 1
        self._last = key

    def _partly(self, call: _Call, why: str) -> None:
        """The call just counted as checked was checked partly: `why`."""
        *_, outcome, reason = self._last
        if outcome not in ("checked", "checked partly"):
            return
        self._tally[self._last] -= 1
        if not self._tally[self._last]:
            del self._tally[self._last]
        self._count(call, "checked partly", f"{reason}; {why}" if reason else why)

    # --- after the test body ------------------------------------------------------------------

    def module_calls(self) -> list[ModuleCallRecord]:
        """The tally by class or function name; a function's rows say `kind: function`."""
        records = []
        for (kind, name, outcome, reason), calls in sorted(
            self._tally.items(), key=lambda item: (item[0][1:], item[0][0])
        ):
            record = ModuleCallRecord(module=name, outcome=outcome, reason=reason, calls=calls)
            if kind == "function":
                record["kind"] = kind
            records.append(record)
        return records

    def finish(self) -> None:
        """Fail the test for its divergences; then budgets, when the user set one.

        Without a budget, a call whose compiled side ran eagerly was already reported as skipped:
        it showed no parity, but it is no divergence of the test's program.
        """
        __tracebackhide__ = True
        if self.divergences:
            count = len(self.divergences)
            kinds = " and ".join(sorted(self._diverged_kinds, reverse=True))
            raise ParityError(
                f"{count} intercepted {kinds} call(s) diverged under torch.compile "
                "(--compile-parity=all replays each call from a snapshot, eager vs compiled):\n\n"
                + "\n\n".join(self.divergences)
            )
        if self._budgeted():
            self.checker.finish()

    def _budgeted(self) -> bool:
        settings = self.checker.settings
        budgets = (settings.max_graph_breaks, settings.max_recompiles)
        return settings.fullgraph or any(budget is not None for budget in budgets)


class _ModuleCopies:
    """Per test: each module's structure (read once) and its stand-in (copied once, synced)."""

    def __init__(self) -> None:
        # (id of the test's module, inference mode) -> (that module, its pre-call stand-in)
        # (id of a module, inference mode) -> it, its stand-in, and the memo it was copied with
        self._stand_ins: dict[
            tuple[int, bool], tuple[torch.nn.Module, torch.nn.Module, dict[int, Any]]
        ] = {}
        self._structures: dict[int, tuple[torch.nn.Module, Hashable]] = {}  # id -> (module, ...)

    def structure(self, module: torch.nn.Module) -> Hashable:
        """A module's tree and tensors (selection.module_structure), computed once per module
        per test.

        Walking a large model on every call would cost milliseconds; a module restructured in
        the middle of a test keeps its first structure here (its stand-in is still copied anew).
        """
        kept = self._structures.get(id(module))
        if kept is None or kept[0] is not module:
            kept = (module, module_structure(module))
            self._structures[id(module)] = kept
        return kept[1]

    def stand_in(self, module: torch.nn.Module) -> torch.nn.Module:
        """A copy holding the module's state before the call: the replay's module.

        One per module (and inference mode) for the whole test, synced before each call, so the
        checker keeps one compiled copy for it and Dynamo sees the sequence of calls.
        """
        key = (id(module), torch.is_inference_mode_enabled())
        kept = self._stand_ins.get(key)
        with torch.inference_mode(False):  # parameters of a copy made here stay normal tensors
            if kept is not None:
                try:
                    sync_module(module, kept[1], kept[2])
                    return kept[1]
                except Exception:  # restructured, or state sync cannot copy: copy it afresh
                    pass
            memo: dict[int, Any] = {}
            copied = clone_tree(module, memo)
        self._stand_ins[key] = (module, copied, memo)
        return copied  # type: ignore[no-any-return]


_UNRESTORED = "the replays wrote in place what they could not put back (too large to keep): "
CAPPED = "the cap on input signatures per module class or function is reached"
_DIVERGING = (Happened.RECOMPILE_LIMIT, Happened.DIVERGED, Happened.REFUSED)
_GRAPHS = {
    **dict(
        zip(
            CHECK_KINDS,
            (
                "ran graphs compiled for this call, with static shapes",
                "ran graphs compiled for this call, with dynamic shapes",
                "reused graphs compiled for an earlier call of {owner} in the session "
                "(--compile-parity-shared kept it; without it each test compiles afresh)",
            ),
            strict=True,
        )
    ),
    NO_COMPILER: f"ran with no compiler (--compile-backend={CONTROL_BACKEND})",
}
_OWNERS = {"module": "this class and structure", "function": "this function"}


def _graphs_text(kind: str, call_kind: str) -> str:
    """Which graphs the compiled side ran (CHECK_KINDS, or NO_COMPILER), in the words of a
    module or function call."""
    return _GRAPHS[kind].format(owner=_OWNERS[call_kind])


def _paused(constructions: Constructions | None) -> AbstractContextManager[None]:
    return nullcontext() if constructions is None else constructions.paused()


def _text(exc: BaseException | None) -> str:
    """The exception's type and first line, cut to a skip reason's length."""
    lines = str(exc).strip().splitlines()
    text = f"{type(exc).__name__}: {lines[0] if lines else ''}"
    return text if len(text) <= _REASON_LIMIT else text[:_REASON_LIMIT] + " [...]"


__all__ = ["Interceptor"]
