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

With --compile-parity-functions, the public functions of the named packages are intercepted too
(functions.py), and a function call takes the same path: no other module or function call in
progress makes it outermost; the calls it makes are "inside checked" once it is checked.
"""

from __future__ import annotations

import time
from collections.abc import Hashable
from types import TracebackType
from typing import Any

from pytest_torchcompile.adoption.callsites import Constructions, qualified_name
from pytest_torchcompile.adoption.functions import Found
from pytest_torchcompile.adoption.kinds import InterceptedCall
from pytest_torchcompile.adoption.policy import SignaturePolicy
from pytest_torchcompile.adoption.selection import Selection
from pytest_torchcompile.adoption.stand_ins import ModuleCopies
from pytest_torchcompile.adoption.tally import CallTally, Divergences
from pytest_torchcompile.adoption.wrappers import Wrappers
from pytest_torchcompile.counting.costs import CHECK_KINDS
from pytest_torchcompile.counting.records import ModuleCallRecord
from pytest_torchcompile.outcome import CheckOutcome, Happened
from pytest_torchcompile.runner import Checker
from pytest_torchcompile.running.copier import clone_tree
from pytest_torchcompile.running.kept import KeptFor
from pytest_torchcompile.running.recorder import Recorder
from pytest_torchcompile.running.shared_compiles import SharedCompiles
from pytest_torchcompile.running.signatures import Skip
from pytest_torchcompile.running.targets import Target
from pytest_torchcompile.running.world import Worlds, unseen
from pytest_torchcompile.settings import Settings

_REASON_LIMIT = 200  # characters of an exception kept in a skip reason

Inputs = tuple[tuple[Any, ...], dict[str, Any]]


class Interceptor:
    """One test's interception: the wrappers around module (and function) calls (wrappers.py),
    its checker, the signature policy (policy.py) and the tally (tally.py).

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
        self.checker = Checker(settings, examples=True, shared=shared, replays=True)
        self._shared = shared  # the session's compiles, or None: this test compiles afresh
        self._policy = SignaturePolicy(settings, selection, checked, checked_per_class)
        self.outermost_calls = 0
        self.inside_checked: set[str] = set()  # classes of submodules of checked calls
        self.inside_checked_functions: set[str] = set()  # functions the checked calls made
        self._tally = CallTally()
        self._divergences = Divergences()
        self._copies = ModuleCopies()
        self.functions = functions  # --compile-parity-functions: what is wrapped, and not
        self._wrappers = Wrappers(self._intercept, functions, constructions)
        self._plain_s = 0.0  # the test's own call, of the call being intercepted
        self._worlds = Worlds()  # by the module or function called
        self._recorders: KeptFor[Recorder] = KeptFor(lambda _: Recorder())  # checks, for triage
        self._isolation: Any = None

    def __enter__(self) -> Interceptor:
        self._isolation = self.checker.isolated(reset=self._shared is None)
        self._isolation.__enter__()
        self._wrappers.install()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._wrappers.remove()
        self._isolation.__exit__(kind, value, traceback)

    def _plain(self, call: InterceptedCall) -> Any:
        """The test's own call, with every call inside it passed straight through."""
        started = time.perf_counter()
        try:
            with self._wrappers.passing_through():
                return call.run()
        finally:
            self._plain_s += time.perf_counter() - started

    def _intercept(self, call: InterceptedCall) -> Any:
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
            skipped = self._tally.last_skipped
            self.checker.count_seconds(
                "skipped calls" if skipped else "intercepting", max(own, 0.0)
            )

    def _intercept_call(self, call: InterceptedCall) -> Any:
        self.outermost_calls += 1
        number = self.outermost_calls
        self._wrappers.nested = set()
        try:
            signature = self._policy.select(call, self._copies)
            replayed = call.replayed(self._copies)
            inputs = clone_tree((call.args, dict(call.kwargs)))
            with self._wrappers.originals():  # the walk reads the functions' own code
                world = self._worlds.of(call.target.fn).for_call(call.args, call.kwargs)
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
            self._tally.partly(_UNRESTORED + ", ".join(world.unrestored))
        return output

    def _check(
        self,
        number: int,
        call: InterceptedCall,
        signature: Hashable,
        replayed: Target,
        inputs: Inputs,
    ) -> None:
        """Replay the call from its snapshot through the checker (`replayed`: the module's
        stand-in, or the function); tally the outcome."""
        args, kwargs = inputs
        recorder = self._recorders.of(replayed.fn)  # kept for triage if it diverges
        with self._wrappers.passing_through():
            self.checker.compiled.share(replayed, call.structure(self._copies))
            outcome = self.checker.outcome(  # Dynamo traces the originals
                replayed, args, kwargs, recorder=recorder, within=self._wrappers.originals
            )
        happened, error = outcome.happened, outcome.error
        if happened is Happened.RECOMPILE_LIMIT and not self._budgeted():
            # the program would run eagerly there: no parity shown, no divergence either
            self._count(call, "skipped", f"the compiled side would run eagerly: {_text(error)}")
        elif happened in _DIVERGING:  # a recompile limit the user asked to be held to, too
            self._policy.diverged(call.name, signature)
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
            self._policy.checked(call.name, signature)
            self._count(call, *_checked(outcome, self.checker.compiled.unshared(replayed)))
            self.inside_checked_functions |= self._wrappers.nested - {call.name}
            self.inside_checked |= {qualified_name(type(inner)) for inner in replayed.submodules()}

    def _diverge(
        self,
        number: int,
        call: InterceptedCall,
        outcome: CheckOutcome,
        recorder: Recorder,
        signature: Hashable,
    ) -> None:
        """Keep the divergence for the test's failure; the first one's recorder for triage."""
        kind = self.checker.check_kind(outcome)
        where = ", ".join(outcome.failing_leaves) or type(outcome.error).__name__
        self._count(call, "diverged", where)
        self._divergences.add(call, number, where, outcome.error, kind)
        if self.checker.keeps_for_triage(recorder):  # triage replays the first diverging call
            recorder.diverged()
            recorder.session_graphs = kind if kind in CHECK_KINDS[1:] else ""
            recorder.failure_key = (signature, where, kind)

    def _count(self, call: InterceptedCall, outcome: str, reason: str) -> None:
        self._tally.count(call.kind, call.name, outcome, reason)

    # --- after the test body ------------------------------------------------------------------

    def module_calls(self) -> list[ModuleCallRecord]:
        """The tally by class or function name; a function's rows say `kind: function`."""
        return self._tally.records()

    def finish(self) -> None:
        """Fail the test for its divergences; then budgets, when the user set one.

        Without a budget, a call whose compiled side ran eagerly was already reported as skipped:
        it showed no parity, but it is no divergence of the test's program.
        """
        __tracebackhide__ = True
        failure = self._divergences.failure()
        if failure is not None:
            raise failure
        if self._budgeted():
            self.checker.finish()

    def _budgeted(self) -> bool:
        settings = self.checker.settings
        budgets = (settings.max_graph_breaks, settings.max_recompiles)
        return settings.fullgraph or any(budget is not None for budget in budgets)


def _checked(outcome: CheckOutcome, unshared: str | None) -> tuple[str, str]:
    """How a call was checked, and why; where the session shares compiles but this call's
    module got its own (`unshared`: why), that too."""
    how, reason = outcome.how_checked
    if unshared is None:
        return how, reason
    unshared = f"compiled for this test alone, not shared: {unshared}"
    return how, f"{reason}; {unshared}" if reason else unshared


_UNRESTORED = "the replays wrote in place what they could not put back (too large to keep): "
_DIVERGING = (Happened.RECOMPILE_LIMIT, Happened.DIVERGED, Happened.REFUSED)


def _text(exc: BaseException | None) -> str:
    """The exception's type and first line, cut to a skip reason's length."""
    lines = str(exc).strip().splitlines()
    text = f"{type(exc).__name__}: {lines[0] if lines else ''}"
    return text if len(text) <= _REASON_LIMIT else text[:_REASON_LIMIT] + " [...]"


__all__ = ["Interceptor"]
