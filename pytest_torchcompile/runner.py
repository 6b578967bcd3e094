"""The checker: one callable run eagerly and compiled from identical state, then compared.

It orchestrates the rooms that do the work: `snapshot` (copies and the state before the call),
`sides` (running a side, its backward, the RNG), `parity` (the verdict) and `accounting`. The eager side runs on the caller's own module and inputs, so after a check the caller sees what a
plain call would have left. The compiled side runs on copies: a module is copied once per test and
its state is synced from the caller's module before every call, so one compiled module (and one
Dynamo cache) sees the whole sequence of calls, guards and recompiles as a real program would.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass, field
from typing import Any, Protocol

import torch

from pytest_torchcompile import _compat
from pytest_torchcompile.counting.accounting import Accountant
from pytest_torchcompile.counting.costs import FRESH_CACHE, Costs
from pytest_torchcompile.counting.records import CompileCounts, LeafError
from pytest_torchcompile.errors import (
    CompileParityFailure,
    ExportFailure,
    ParityError,
    first_line,
)
from pytest_torchcompile.judging import parity
from pytest_torchcompile.messages import (
    both_rejected_note,
    compile_refusal,
    context_line,
    fresh_cache_note,
    inputs_note,
    rejection_note,
)
from pytest_torchcompile.outcome import NO_COMPILER, CheckOutcome, CheckSummary, Happened, Totals
from pytest_torchcompile.running import exported, misuse, randomness, sides
from pytest_torchcompile.running.calls import Call, CallRunner
from pytest_torchcompile.running.compiled import CompiledSide
from pytest_torchcompile.running.shared_compiles import SharedCompiles
from pytest_torchcompile.running.targets import Target, target_of
from pytest_torchcompile.settings import CONTROL_BACKEND, Settings, apply


@dataclass
class ParityResult:
    """What one check saw: both sides' outputs, the largest error per leaf, and the test's counts."""

    eager: Any
    compiled: Any
    errors: dict[str, LeafError]
    counts: CompileCounts
    report: parity.ParityReport = field(repr=False)

    @property
    def graphs(self) -> int:
        return len(self.counts["graphs"])

    @property
    def graph_breaks(self) -> int:
        return len(self.counts["graph_breaks"])

    @property
    def recompiles(self) -> int:
        return len(self.counts["recompiles"])

    @property
    def fallbacks(self) -> int:
        return len(self.counts["fallbacks"])


# --- the checker --------------------------------------------------------------------------------


class CallRecorder(Protocol):
    """Told about every check, so that a failure can be replayed later (recorder.py's Recorder)."""

    def record(
        self, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: Mapping[str, Any]
    ) -> None:
        """Called once at the start of each check, before anything runs."""

    def diverged(self, note: str = "") -> None:
        """Called when the check just recorded is about to raise ParityError; `note` is what
        the message says about a setting the checker chose (fallback_random), if anything."""


class Checker(Totals):
    """The per-test checker behind the `compile_parity` fixture and `assert_compile_parity`.

    Each call (`check`) runs the compiled side on copies (`compiled.CompiledSide`) and the eager
    side on the caller's own objects, both from one state (the RNG, the containers the callable
    reaches), keeps the state before the call for the re-runs the rules need
    (`snapshot.StateBefore`), compares (`parity.compare`) and raises on a divergence; budgets are
    judged over all calls when the test ends (`finish`). `outcome` is a check as one value.
    """

    def __init__(
        self,
        settings: Settings,
        accountant: Accountant | None = None,
        *,
        examples: bool = False,
        shared: SharedCompiles | None = None,
        replays: bool = False,  # of calls the program made, which returned (_Endings.unrebuilt)
    ) -> None:
        super().__init__(exported.path_notes(settings))  # notes: what the report should say
        self.settings = settings
        self.accountant = accountant or Accountant()
        self.examples = examples  # Hypothesis examples: the recompile limit starts a new cache
        self.costs = Costs()  # where the checking time goes, and the compiles it adds
        # Zero-change mode: compiles that serve later tests (shared_compiles.py)
        self.compiled = CompiledSide(settings, self.accountant, self.costs, shared)
        self._comparer = _Comparer(settings, self.costs, self._context)
        self._endings = _Endings(settings, self._context, examples=examples, replays=replays)
        self.sides = CallRunner(
            self.compiled,
            settings,
            examples=examples,
            on_recompile_limit=_FreshCaches(self, self._comparer),
            notes=self.notes,
            context=self._context,
            costs=self.costs,
        )
        self._report: parity.ParityReport | None = None  # the latest call's leaf verdicts
        self.recorder: CallRecorder | None = None  # set by the fixture, for triage after a failure

    def __call__(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> ParityResult:
        """Run ``fn(*args, **kwargs)`` eagerly and compiled and fail unless they agree.

        The eager side acts on the caller's own module and inputs (so afterwards they are what
        ``fn(*args, **kwargs)`` leaves, minus gradients); the compiled side runs on copies that
        start from identical state and RNG. Outputs, output metadata, input mutations, module
        state, gradients and exceptions are compared. Budgets (``max_graph_breaks``,
        ``max_recompiles``, ``fullgraph``) are judged once the test ends, over every call.

        :param fn: a function or an ``nn.Module``.
        :param args: positional arguments for `fn`; tensors keep their strides and offsets.
        :param kwargs: keyword arguments for `fn`.
        :returns: a :class:`ParityResult` with both sides' outputs, the largest error per leaf
            and the test's counts so far.
        :raises ParityError: the two sides disagree; the message says what, where, by how much
            and what was allowed.
        :raises RecompileLimitExceeded: Dynamo hit its recompile limit, so the call would have
            run eagerly (under ``@given`` a fresh cache is tried first).
        :raises GraphBreakBudgetExceeded: under ``fullgraph=True`` the program has a graph break.
        :raises ExportFailure: on backends ``export`` and ``aot_inductor``, torch.export or
            AOTInductor's packaging refused the program; the message is the exporter's.
        :raises UncopyableInputError: the module or an input cannot be copied for the compiled
            side.
        :raises UncheckableCallError: the module or an input holds meta tensors, or the call
            returns an iterator (a generator, ``map``...): nothing to compare.
        :raises TypeError: `fn` is not callable.
        :raises Exception: eager's own exception, with a note, when both sides raise alike;
            under ``@given`` (and ``reject_eager_errors``, the default) the example is
            ``hypothesis.reject()``-ed instead.

        Example::

            @pytest.mark.compile_parity(max_graph_breaks=0)
            def test_linear(compile_parity, device):
                model = torch.nn.Linear(4, 2).to(device)
                result = compile_parity(model, torch.randn(3, 4, device=device))
                assert result.graph_breaks == 0
        """
        __tracebackhide__ = True
        return self.check(fn, args, kwargs)

    def check(
        self, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: Mapping[str, Any]
    ) -> ParityResult:
        """One checked call, raising the exception its `outcome` ends in (a divergence...)."""
        __tracebackhide__ = True
        outcome = self.outcome(fn, args, kwargs)
        if outcome.error is not None:
            raise outcome.error
        assert outcome.report is not None  # a check that passed compared
        counts = self.accountant.counts()
        return ParityResult(outcome.eager, outcome.compiled, outcome.errors, counts, outcome.report)

    def outcome(
        self,
        fn: Callable[..., Any] | Target,
        args: tuple[Any, ...],
        kwargs: Mapping[str, Any],
        *,
        recorder: CallRecorder | None = None,
        within: Callable[[], AbstractContextManager[Any]] = nullcontext,
    ) -> CheckOutcome:
        """One checked call of a callable or target as one value, its exception kept. `recorder` is
        told of the call first, `within` entered around it; what torch.compile switches process-wide
        is put back, and Dynamo's trace records kept out of the test's log capture."""
        __tracebackhide__ = True
        fallbacks = len(self.accountant.counts()["fallbacks"])
        before = self.accountant.mark()
        try:
            target = target_of(fn)
            if recorder is not None:
                recorder.record(target.fn, args, kwargs)
            with within(), _compat.process_switches_kept(), _compat.structured_trace_contained():
                call, errors = self._check(target, args, kwargs)
        except Exception as error:
            graphs = tuple(self.accountant.graphs_since(before))
            return CheckOutcome(Happened.of(error), error, report=self._report, graphs=graphs)
        return CheckOutcome(
            Happened.PASSED,
            eager=call.eager.output,
            compiled=call.compiled.output,
            errors=errors,
            report=self._report,
            graphs=tuple(self.accountant.graphs_since(before)),
            fallbacks=tuple(self.accountant.counts()["fallbacks"][fallbacks:]),
        )

    def _check(
        self, target: Target, args: tuple[Any, ...], kwargs: Mapping[str, Any]
    ) -> tuple[Call, dict[str, LeafError]]:
        __tracebackhide__ = True
        misuse.check_call(target, args, kwargs)
        if self.recorder is not None:
            self.recorder.record(target.fn, args, kwargs)
        started = time.perf_counter()
        self.calls += 1
        self.note_devices(target.fn, args, kwargs)
        call: Call | None = None
        try:  # the sides do not wait for the device: the comparison reads what they queued
            call = self.sides.run(target, args, kwargs)
            self._endings.unrebuilt(call, self.accountant)
            misuse.check_output(call.eager.output)
            report = self._comparer.compare(call)
            sides.synchronize()
        except torch.AcceleratorError as exc:
            compiled = call.compiled if call is not None else None
            raise sides.device_failure(exc, compiled, self._context()) from exc
        self._report = report
        errors = self.add_report(report)
        self.wall_time_s += time.perf_counter() - started
        self._endings.refusal(call, self.compiled.refused_by(target, call.compiled.exception))
        message, note = self._comparer.divergence(call, report)
        if message:
            if self.recorder is not None:
                self.recorder.diverged(note)
            raise self._endings.divergence(call, message)
        if call.eager.exception is not None:
            self.accountant.excuse_last_call()
            self._endings.eager_error(call.eager.exception, args, kwargs, self)
        return call, errors

    def _context(self) -> str:
        return context_line(self.settings.describe(), self.devices_seen)

    def summary(self) -> CheckSummary:
        """What the test's checks came to, read-only, for its record."""
        return self.summarize(self.settings, self.accountant.counts(), self.costs)

    def isolated(self, *, reset: bool = True) -> AbstractContextManager[None]:
        """The clean compile world this checker's test runs in (see `isolated`)."""
        return isolated(self.accountant, reset=reset)

    def keeps_for_triage(self, recorder: CallRecorder) -> bool:
        """Keep `recorder` for triage, unless one is kept already; whether it was."""
        if self.recorder is not None:
            return False
        self.recorder = recorder
        return True

    def check_kind(self, outcome: CheckOutcome) -> str:
        """Count an intercepted check by the graphs compiled for it; its kind (CHECK_KINDS), or
        NO_COMPILER where the backend compiles nothing (`none`), uncounted."""
        if self.settings.backend == CONTROL_BACKEND:
            return NO_COMPILER
        return self.costs.check_compiled(list(outcome.graphs))

    def seconds_counted(self) -> float:
        """The seconds the cost parts hold so far: the checker's own work, by part."""
        return sum(self.costs.seconds.values())

    def count_seconds(self, part: str, seconds: float) -> None:
        """Add `seconds` to the cost part `part` (a caller's own time around the checks)."""
        self.costs.seconds[part] += seconds

    def finish(self) -> None:
        """After the test: budgets over every call (and every Hypothesis example)."""
        __tracebackhide__ = True
        self._endings.budgets(self.accountant)


class _Endings:
    """How a check ends where it does not pass: a compile refusal (a budget verdict or an
    exporter's), a divergence, eager's own exception (a rejected Hypothesis example), and the
    budgets' verdict after the test."""

    def __init__(
        self, settings: Settings, context: Callable[[], str], *, examples: bool, replays: bool
    ) -> None:
        self.settings = settings
        self.context = context
        self.examples = examples
        self.replays = replays

    def unrebuilt(self, call: Call, accountant: Accountant) -> None:
        """Where the calls checked are replays of calls that returned (the interceptor's) and
        eager's replay raised, the replay did not rebuild its call: it ran in a world the checker
        cannot put back (inside a Pyro trace that holds the sites the program's call added).
        Eager's exception is raised, no verdict, whatever the compiled side did."""
        __tracebackhide__ = True
        if self.replays and call.eager.exception is not None:
            accountant.excuse_last_call()
            raise call.eager.exception

    def refusal(self, call: Call, refused_by: str | None) -> None:
        """A compiler refusal under fullgraph or the recompile limit is a budget verdict, and an
        exporter's refusal (`refused_by` names the export path) a compile failure, not parity."""
        __tracebackhide__ = True
        compiled = call.compiled.exception
        context = self.context()
        refusal = compile_refusal(
            compiled, call.eager.exception, self.settings, context, refused_by
        )
        if isinstance(refusal, ExportFailure):
            raise refusal from None  # it carries the exporter's message; its traceback is torch's
        if refusal is not None:
            raise refusal from compiled

    @staticmethod
    def divergence(call: Call, message: str) -> ParityError:
        """The divergence `message`, with the inputs it was seen on (and, where both sides raised,
        that both did)."""
        _, args, kwargs = call.snapshot_of
        both_raised = call.eager.exception is not None and call.compiled.exception is not None
        rejected = both_rejected_note(args, kwargs) if both_raised else ""
        return ParityError(message + inputs_note(args, kwargs) + rejected)

    def budgets(self, accountant: Accountant) -> None:
        """The budgets' verdict over every call of the test (`Checker.finish`)."""
        __tracebackhide__ = True
        names = ("max_graph_breaks", "max_recompiles", "fullgraph")
        accountant.check_budgets(
            max_graph_breaks=self.settings.max_graph_breaks,
            max_recompiles=self.settings.max_recompiles,
            fullgraph=self.settings.fullgraph,
            source={name: self.settings.source(name) for name in names},
        )

    def eager_error(
        self,
        exc: BaseException,
        args: tuple[Any, ...],
        kwargs: Mapping[str, Any],
        totals: Totals,
    ) -> None:
        """Both sides raised alike: the input is outside what the program accepts.

        Re-raise eager's exception, as the plain call would, with a note that says so and how to
        keep such inputs out; under reject_eager_errors a Hypothesis example is rejected instead.
        """
        __tracebackhide__ = True
        if self.settings.reject_eager_errors and self.examples and _in_hypothesis_example():
            from hypothesis import reject

            totals.rejected += 1
            totals.first_rejection = totals.first_rejection or first_line(exc)
            reject()
        source = self.settings.source("reject_eager_errors")
        exc.add_note(rejection_note(args, kwargs, source, examples=self.examples))
        raise exc


class _FreshCaches:
    """Starts a fresh compile cache where Hypothesis examples reached the recompile limit."""

    def __init__(self, checker: Checker, comparer: _Comparer) -> None:
        self.checker = checker
        self.comparer = comparer
        self._recompiles_before_cache = 0  # recompiles counted before the current compile cache

    def __call__(self) -> None:
        """Hypothesis examples filled Dynamo's cache up to its recompile limit: start a new one.

        Examples draw far more shapes, dtypes and layouts than one program sees, so the limit
        says little about the code under test; running the example eagerly would hide it. The
        recompiles stay counted (a max_recompiles budget judges them after the last example),
        the refused compile is not an eager fallback, and the report says what happened.
        """
        checker = self.checker
        checker.accountant.excuse_last_call()
        checker.costs.compiled(FRESH_CACHE)
        recompiles = len(checker.accountant.counts()["recompiles"])
        since = recompiles - self._recompiles_before_cache
        checker.notes.append(fresh_cache_note(since, checker.calls, checker.settings))
        self._recompiles_before_cache = recompiles
        if not checker.compiled.start_afresh():  # a session compile gets a region of its own
            _compat.reset_dynamo()
            checker.compiled.forget()
        self.comparer.forget()  # the compiled side's copies are made anew


class _Comparer:
    """Compares one call's two sides: the parity walk (timed as comparing, less the re-runs it
    asks for), the kinds of call a plain re-run reproduced, and where the callable compiled as
    the user compiles it differs."""

    def __init__(self, settings: Settings, costs: Costs, context: Callable[[], str]) -> None:
        self.settings = settings
        self.costs = costs
        self.context = context
        self._rebuilt: set[Hashable] = set()  # kinds of call a plain re-run reproduced

    def compare(self, call: Call) -> parity.ParityReport:
        """The call's leaf verdicts; a plain re-run is not asked for again where one reproduced
        a call of its kind (`Call.kind`)."""
        kind = call.kind
        backward = self.settings.compares_backward
        with self._comparing():
            report = parity.compare(
                call.eager,
                call.compiled,
                self._options(rtol=self.settings.rtol, atol=self.settings.atol),
                **call.reruns(backward),
                rebuilt=kind in self._rebuilt,
                on_rows=call.on_rows(backward),
                eager_time=call.eager_time,
            )
        if report.rebuilt and kind is not None:
            self._rebuilt.add(kind)
        return report

    def forget(self) -> None:
        """The compiled side's copies are made anew: no kind of call is proved rebuilt."""
        self._rebuilt.clear()

    def _options(
        self, rtol: float | None = None, atol: float | None = None
    ) -> parity.CompareOptions:
        return parity.CompareOptions(
            rtol=rtol,
            atol=atol,
            check_strides=self.settings.check_strides,
            check_requires_grad=self.settings.has_autograd,
            context=self.context(),
        )

    @contextmanager
    def _comparing(self) -> Iterator[None]:
        """Time the block as comparing, less the re-runs it asked for (timed as re-runs)."""
        re_runs = self.costs.seconds["re-runs"]
        with self.costs.timing("comparing"):
            yield
        self.costs.seconds["comparing"] -= self.costs.seconds["re-runs"] - re_runs

    def divergence(self, call: Call, report: parity.ParityReport) -> tuple[str, str]:
        """Where the sides diverge, or where the callable compiled as the user compiles it does:
        the failure message ("" where none), saying which findings need the checker's own
        fallback_random, and what it says of that setting."""
        with self._comparing():
            message, note = report.failure_message(), ""
            if call.as_user is not None:
                options = self._options()
                users = parity.compare_metadata(
                    call.eager, call.as_user, options, control=call.control()
                )
                if not users.ok:
                    setting = _compat.fallback_random_setting()
                    message = randomness.as_user_failure(users.failure_message(), setting)
                elif message:
                    checked = parity.compare_metadata(call.eager, call.compiled, options)
                    message = randomness.fallback_random_failure(message, not checked.ok)
                    note = message.split("\n\n", 1)[0]
        return message, note


def _in_hypothesis_example() -> bool:
    """Whether Hypothesis is running an example now (outside one, `reject()` is an error)."""
    from hypothesis import currently_in_test_context

    return bool(currently_in_test_context())


@contextmanager
def isolated(accountant: Accountant, *, reset: bool = True) -> Iterator[None]:
    """A clean compile world for one test: Dynamo reset, configs, grad mode and dtype restored.

    Without `reset`, Dynamo's cache is kept: zero-change mode's compiles serve later tests in
    their own recompile regions (shared_compiles.py), which a test's own compiles never see.
    """
    snapshot = _compat.config_snapshot()
    grad_enabled = torch.is_grad_enabled()
    default_dtype = torch.get_default_dtype()
    with _compat.structured_trace_contained():  # Dynamo's reset logs trace records too
        if reset:
            _compat.reset_dynamo()
        try:
            with _compat.patched_configs(accountant.dynamo_settings(), {}):
                yield
        finally:
            if reset:
                _compat.reset_dynamo()
            _compat.config_restore(snapshot)
            torch.set_grad_enabled(grad_enabled)
            torch.set_default_dtype(default_dtype)


def assert_compile_parity(
    fn: Callable[..., Any], /, *args: Any, kwargs: Mapping[str, Any] | None = None, **options: Any
) -> ParityResult:
    """The compile_parity check outside pytest: one call, its own compile cache and budgets.

    Runs ``fn(*args, **kwargs)`` eagerly and compiled from identical state and compares them as
    the ``compile_parity`` fixture does, then judges the graph-break and recompile budgets.

    :param fn: a function or an ``nn.Module`` (its parameters, buffers and gradients are
        compared too).
    :param args: positional arguments for `fn`.
    :param kwargs: keyword arguments for `fn`, as a mapping so they never clash with `options`.
    :param options: the ``compile_parity`` marker's keys, each optional
        (:data:`pytest_torchcompile.settings.MARKER_KEYS` is the list): ``backend``, ``mode``,
        ``dynamic``, ``fullgraph``, ``devices`` (accepted; only the ``device`` fixture reads
        it), ``max_graph_breaks``, ``max_recompiles``, ``rtol`` and ``atol`` (both or neither),
        ``backward``, ``check_strides``, ``reject_eager_errors`` (no effect here: there is no
        Hypothesis example to reject), ``dynamic_dims``, ``compiled_autograd``,
        ``parity_signatures`` and ``parity_functions`` (accepted; only intercepted tests read
        them). A key left out takes its default; there is no command line or ini file here.
    :returns: a :class:`ParityResult`: both sides' outputs, the largest error per leaf, and the
        graph, graph-break, recompile and fallback counts.
    :raises ParityError: eager and compiled disagree; the message says what, where and by how
        much.
    :raises GraphBreakBudgetExceeded: more graph breaks than ``max_graph_breaks`` (any, under
        ``fullgraph``).
    :raises RecompileLimitExceeded: more recompiles than ``max_recompiles``, or Dynamo's
        recompile limit made the call run eagerly.
    :raises EagerFallbackError: a frame meant to be compiled ran eagerly: no parity was shown.
    :raises ExportFailure: on backends ``export`` and ``aot_inductor``, torch.export or
        AOTInductor's packaging refused the program; the message is the exporter's.
    :raises pytest_torchcompile.settings.SettingError: an unknown key or a bad value in
        `options`, e.g. ``Invalid rtol='x' from assert_compile_parity(...)``.
    :raises UncopyableInputError: the module or an input cannot be copied for the compiled side.
    :raises UncheckableCallError: the module or an input holds meta tensors, or the call returns
        an iterator: nothing to compare.
    :raises TypeError: `fn` is not callable.
    :raises Exception: eager's own exception, with a note, when both sides raise alike.

    Example::

        import torch
        from pytest_torchcompile import assert_compile_parity

        result = assert_compile_parity(torch.nn.Linear(4, 2), torch.randn(3, 4), max_graph_breaks=0)
        assert result.graph_breaks == 0
    """
    __tracebackhide__ = True
    settings = apply(Settings(), options, "assert_compile_parity(...)")
    checker = Checker(settings)
    with isolated(checker.accountant):
        result = checker.check(fn, args, kwargs or {})
        checker.finish()
        result.counts = checker.accountant.counts()
    return result


__all__ = ["Checker", "CompileParityFailure", "ParityResult", "assert_compile_parity", "isolated"]
