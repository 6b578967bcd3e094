"""The checker: one callable run eagerly and compiled from identical state, then compared.

It orchestrates the rooms that do the work: `snapshot` (copies and the state before the call),
`sides` (running a side, its backward, the RNG), `parity` (the verdict) and `accounting`. The eager side runs on the caller's own module and inputs, so after a check the caller sees what a
plain call would have left. The compiled side runs on copies: a module is copied once per test and
its state is synced from the caller's module before every call, so one compiled module (and one
Dynamo cache) sees the whole sequence of calls, guards and recompiles as a real program would.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from typing import Any, Protocol

import torch

from pytest_torchcompile import _compat, faults, parity, pystate, randomness
from pytest_torchcompile.accounting import Accountant
from pytest_torchcompile.errors import (
    NOTE_PREFIX,
    CompileParityFailure,
    GraphBreakBudgetExceeded,
    ParityError,
    RecompileLimitExceeded,
)
from pytest_torchcompile.records import CompileCounts, LeafError
from pytest_torchcompile.rounding import RoundingNoise
from pytest_torchcompile.settings import Settings, apply, load_backend_callable
from pytest_torchcompile.sides import (
    COTANGENT_SEED,
    RngState,
    Side,
    differentiable_outputs,
    nothing,
    run_side,
    state_left,
    with_containers,
)
from pytest_torchcompile.snapshot import (
    Copies,
    Restructured,
    StateBefore,
    Unfaithful,
    Watch,
    clone_tree,
    leaves,
    named_inputs,
    nudged_tree,
    state_after,
    sync_module,
    tensor_pairs,
    upcast_tree,
)


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
    """Told about every check, so that a failure can be replayed later (triage.py's Recorder)."""

    def record(
        self, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: Mapping[str, Any]
    ) -> None:
        """Called once at the start of each check, before anything runs."""

    def diverged(self, note: str = "") -> None:
        """Called when the check just recorded is about to raise ParityError; `note` is what
        the message says about a setting the checker chose (fallback_random), if anything."""


@dataclass
class _AsUser:
    """The callable compiled as the user compiles it (fallback_random as the user set it)."""

    module_copy: torch.nn.Module | None
    compiled: Callable[..., Any]


@dataclass
class _Compiled:
    original: Callable[..., Any]  # kept alive so its id is never reused for another callable
    module_copy: torch.nn.Module | None
    compiled: Callable[..., Any]
    draws_random: bool = False  # a graph of it draws random numbers: fallback_random is on there
    as_user: _AsUser | None = None  # made once it draws random numbers


class Checker:
    """The per-test checker behind the `compile_parity` fixture and `assert_compile_parity`."""

    def __init__(
        self, settings: Settings, accountant: Accountant | None = None, *, examples: bool = False
    ) -> None:
        self.settings = settings
        self.accountant = accountant or Accountant()
        # Hypothesis examples share this checker: the recompile limit starts a fresh cache.
        self.examples = examples
        self.notes: list[str] = []  # what the checker did that the report should say
        self.calls = 0
        self.rejected = 0  # Hypothesis examples rejected because eager raised on them
        self.first_rejection = ""  # the first such error, "Type: message"
        self.devices_seen: list[str] = []
        self.largest_errors: dict[str, LeafError] = {}
        self.wall_time_s = 0.0
        self.last_report: parity.ParityReport | None = None  # the latest call's leaf verdicts
        self._compiled: dict[int, _Compiled] = {}
        # id -> (caller's module, its compiled-side copy); the module is kept so ids stay unique
        self._module_copies: dict[int, tuple[torch.nn.Module, torch.nn.Module]] = {}
        self._backend: Any = None
        self._random_aware: randomness.RandomAwareBackend | None = None
        self._containers: dict[int, pystate.SharedContainers] = {}  # by id of a kept callable
        self._recompiles_before_cache = 0  # recompiles counted before the current compile cache
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
        :raises UncopyableInputError: the module or an input cannot be copied for the compiled
            side.
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

    # compile ------------------------------------------------------------------------------------

    def _backend_object(self) -> Any:
        if self._backend is None:
            name = self.settings.backend
            target: Any = load_backend_callable(name) if ":" in name else name
            mode = None if self.settings.mode == "default" else self.settings.mode
            inner = _compat.inner_backend(target, mode, self.settings.torch_dynamic)
            drawing = _compat.fallback_random_backend(target, mode, self.settings.torch_dynamic)
            self._random_aware = randomness.RandomAwareBackend(inner, drawing)
            self._backend = self.accountant.backend(self._random_aware)
        return self._backend

    def _user_backend(self) -> Any:
        """The backend as the user's torch.compile builds it, uncounted, for `_run_as_user`."""
        self._backend_object()
        assert self._random_aware is not None
        return self._random_aware.user

    def _module_copy(self, module: torch.nn.Module) -> tuple[torch.nn.Module, bool]:
        """The compiled side's long-lived copy of a caller's module, synced; and whether it is new.

        A module keeps one copy for the whole test, so its parameters keep their addresses as
        they would in the caller's program (CUDA graphs re-record when static addresses move).
        """
        kept = self._module_copies.get(id(module))
        if kept is not None:
            try:
                sync_module(module, kept[1])
                return kept[1], False
            except Restructured:
                pass
        copied = clone_tree(module)
        self._module_copies[id(module)] = (module, copied)
        return copied, True

    def _copies_of_modules(self, tree: Any) -> dict[int, Any]:
        """A deepcopy memo mapping each module among the inputs, and its state, to its copy."""
        memo: dict[int, Any] = {}
        for leaf in leaves(tree):
            if isinstance(leaf, torch.nn.Module):
                copied, _ = self._module_copy(leaf)
                memo[id(leaf)] = copied
                memo.update(tensor_pairs(leaf, copied))
        return memo

    def _shared_containers(self, fn: Callable[..., Any]) -> pystate.SharedContainers:
        """The containers `fn` can reach, found once per callable (the walk reads code objects)."""
        found = self._containers.get(id(fn))
        if found is None:
            found = self._containers[id(fn)] = pystate.SharedContainers(fn)
        return found

    def _compiled_for(self, fn: Callable[..., Any]) -> _Compiled:
        entry = self._compiled.get(id(fn))
        module_copy = None
        if isinstance(fn, torch.nn.Module):
            module_copy, fresh = self._module_copy(fn)
            if fresh:
                entry = None
        if entry is None:
            target = module_copy if module_copy is not None else fn
            compiled = torch.compile(
                target,
                backend=self._backend_object(),
                fullgraph=self.settings.fullgraph,
                dynamic=self.settings.torch_dynamic,
            )
            entry = _Compiled(fn, module_copy, compiled)
            self._compiled[id(fn)] = entry
        return entry

    # check --------------------------------------------------------------------------------------

    def check(
        self, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: Mapping[str, Any]
    ) -> ParityResult:
        __tracebackhide__ = True
        if not callable(fn):
            raise TypeError(
                f"compile_parity expects a callable (a function or nn.Module) first, got "
                f"{type(fn).__name__}; call it as compile_parity(model, *inputs)"
            )
        if self.recorder is not None:
            self.recorder.record(fn, args, kwargs)
        started = time.perf_counter()
        self.calls += 1
        self._note_devices(fn, args, kwargs)
        module = fn if isinstance(fn, torch.nn.Module) else None
        snapshot_of = (module, args, dict(kwargs))  # the call as made
        # One walk of the state before the call serves both sides: the compiled side's copies
        # hold the same plain attributes under the same names.
        watch = Watch.of(state_after(*snapshot_of))
        backward = self.settings.backward
        rng = RngState.capture()
        shared = self._shared_containers(fn)
        before = shared.snapshot()
        compiled_result, attributes_moved, copies = self._run_compiled(fn, args, kwargs, watch)
        limit_hit = compiled_result.exception is not None and _compat.is_recompile_limit_error(
            compiled_result.exception
        )
        if self.examples and limit_hit:
            self._start_fresh_cache()
            rng.restore()
            shared.restore(before)
            compiled_result, moved_again, copies = self._run_compiled(fn, args, kwargs, watch)
            attributes_moved = attributes_moved or moved_again
        fault = faults.classify(compiled_result.exception)
        if fault is not None:  # not the compiler's doing: retried with a fresh cache, or raised
            rng.restore()
            shared.restore(before)
            retry = functools.partial(self._run_compiled, fn, args, kwargs, watch)
            outcome = faults.recover(
                fault, retry, lambda r: r[0].exception, self.notes, self._context()
            )
            compiled_result, moved_again, copies = outcome
            attributes_moved = attributes_moved or moved_again
        # Re-runs need the call as it was, and the caller's objects hold that until eager runs:
        # keep what the compiled run shows the call changes. Anything else eager changes, the
        # watch sees, and re-runs refuse.
        pristine = StateBefore.take(snapshot_of, copies, attributes_moved)
        with_containers(compiled_result, shared)
        shared.restore(before)  # the eager run starts from the state the compiled one did
        entry = self._compiled[id(fn)]
        as_user = None
        if entry.draws_random:
            rng.restore()
            as_user = self._run_as_user(entry, fn, args, kwargs)
            shared.restore(before)
            self._note_fallback_random()
        rng.restore()
        eager_side = Side(fn, module, args, dict(kwargs))
        eager_result = run_side(eager_side, backward, nothing)
        moved = pristine.lacks(watch, state_left(eager_result, eager_side))
        with_containers(eager_result, shared)
        after_eager = RngState.capture()
        left_by_eager = shared.snapshot()

        def rerun(
            copier: Callable[[Any, dict[int, Any]], Any], around: Callable[[], Any] = nothing
        ) -> Callable[[], parity.SideResult]:
            def run() -> parity.SideResult:
                if moved:
                    raise Unfaithful(
                        f"eager changed {', '.join(moved)} in place where the compiled run did "
                        "not, so there is no copy of the state before the call"
                    )
                ref_module, ref_args, ref_kwargs = pristine.copy(snapshot_of, copier)
                call = ref_module if ref_module is not None else fn
                rng.restore()
                shared.restore(before)
                try:
                    likes = [o.dtype for o in differentiable_outputs(eager_result.output)]
                    side = Side(call, ref_module, ref_args, ref_kwargs, likes)
                    return run_side(side, backward, around)
                finally:
                    after_eager.restore()
                    shared.restore(left_by_eager)

            return run

        table = functools.cache(_compat.compiler_decompositions)  # imported only if a leaf needs it
        report = parity.compare(
            eager_result,
            compiled_result,
            parity.CompareOptions(
                rtol=self.settings.rtol,
                atol=self.settings.atol,
                check_strides=self.settings.check_strides,
                context=self._context(),
            ),
            reference=rerun(upcast_tree),
            eager_again=rerun(clone_tree),
            perturbed=rerun(
                nudged_tree, lambda: RoundingNoise(COTANGENT_SEED, decompositions=table())
            ),
            noise_base=rerun(
                clone_tree,
                lambda: RoundingNoise(COTANGENT_SEED, noise=False, decompositions=table()),
            ),
        )
        self.last_report = report
        errors = self._record_errors(report)
        self.notes += [note for note in report.notes if note not in self.notes]
        self.wall_time_s += time.perf_counter() - started
        self._raise_compile_failure(compiled_result.exception, eager_result.exception)
        message, note = report.failure_message(), ""
        if as_user is not None:
            options = parity.CompareOptions(
                check_strides=self.settings.check_strides, context=self._context()
            )
            users = parity.compare_metadata(eager_result, as_user, options)
            if not users.ok:
                setting = _compat.fallback_random_setting()
                message = randomness.as_user_failure(users.failure_message(), setting)
            elif message:
                checked = parity.compare_metadata(eager_result, compiled_result, options)
                message = randomness.fallback_random_failure(message, not checked.ok)
                note = message.split("\n\n", 1)[0]
        if message:
            if self.recorder is not None:
                self.recorder.diverged(note)
            raise ParityError(message + self._inputs_note(args, kwargs))
        if eager_result.exception is not None:
            self.accountant.excuse_last_call()
            self._eager_rejected(eager_result.exception, args, kwargs)
        return ParityResult(
            eager=eager_result.output,
            compiled=compiled_result.output,
            errors=errors,
            counts=self.accountant.counts(),
            report=report,
        )

    def _run_compiled(
        self,
        fn: Callable[..., Any],
        args: tuple[Any, ...],
        kwargs: Mapping[str, Any],
        watch: Watch,
    ) -> tuple[parity.SideResult, bool, Copies]:
        """The compiled side, on copies of the caller's inputs and modules (left untouched);
        whether it changed (or created) a plain attribute of theirs; and the copies, which show
        the tensors it changed. `watch` is the caller's state before the call, which the
        copies start from."""
        entry = self._compiled_for(fn)
        memo = self._copies_of_modules((args, dict(kwargs)))
        # Shaped as (module, args, kwargs), so an uncopyable input is named as the input it is.
        _, compiled_args, compiled_kwargs = clone_tree((None, args, dict(kwargs)), memo)
        if isinstance(fn, torch.nn.Module) and entry.module_copy is not None:
            memo.update(tensor_pairs(fn, entry.module_copy))
        copies = Copies(memo)
        side = Side(
            entry.compiled,
            entry.module_copy,
            compiled_args,
            compiled_kwargs,
            cudagraphs=self.settings.uses_cudagraphs,
        )
        assert self._random_aware is not None  # made by _compiled_for
        self._random_aware.drew = False
        around = functools.partial(self._observe_compiled, entry)
        result = run_side(side, self.settings.backward, around)
        entry.draws_random = entry.draws_random or self._random_aware.drew
        # The copies' tensors are watched by their marks; their plain attributes and the names
        # of their state by the caller's, which they were synced from.
        now = state_left(result, side)
        return result, bool(watch.attributes_changed(now) or copies.rebound(now)), copies

    @contextmanager
    def _observe_compiled(self, entry: _Compiled) -> Iterator[None]:
        """Around the compiled call and its backward: the accountant, and fallback_random where
        the callable draws random numbers, so a backward compiled lazily gets its forward's
        setting (graphs that draw none are unaffected by it)."""
        assert self._random_aware is not None
        drawing = entry.draws_random or self._random_aware.drew
        with (
            self.accountant.observe(
                module=entry.module_copy, cudagraphs=self.settings.uses_cudagraphs
            ),
            _compat.fallback_random_patched() if drawing else nullcontext(),
        ):
            yield

    def _run_as_user(
        self,
        entry: _Compiled,
        fn: Callable[..., Any],
        args: tuple[Any, ...],
        kwargs: Mapping[str, Any],
    ) -> parity.SideResult | None:
        """The call compiled as the user compiles it (no fallback_random), on its own copies and
        compile cache, uncounted: judged on what random draws cannot change. None when Dynamo
        refused it for its recompile limit (that compile cache is the checker's, not the
        user's)."""
        as_user = entry.as_user
        module = fn if isinstance(fn, torch.nn.Module) else None
        if as_user is not None and as_user.module_copy is not None and module is not None:
            try:
                sync_module(module, as_user.module_copy)
            except Restructured:
                as_user = None
        if as_user is None:
            module_copy = clone_tree(module) if module is not None else None
            target = module_copy if module_copy is not None else randomness.own_code(fn)
            compiled = torch.compile(
                target,
                backend=self._user_backend(),
                fullgraph=self.settings.fullgraph,
                dynamic=self.settings.torch_dynamic,
            )
            as_user = entry.as_user = _AsUser(module_copy, compiled)
        _, user_args, user_kwargs = clone_tree((None, args, dict(kwargs)))
        side = Side(
            as_user.compiled,
            as_user.module_copy,
            user_args,
            user_kwargs,
            cudagraphs=self.settings.uses_cudagraphs,
        )
        result = run_side(side, self.settings.backward, nothing)
        if result.exception is not None and _compat.is_recompile_limit_error(result.exception):
            return None
        return result

    def _start_fresh_cache(self) -> None:
        """Hypothesis examples filled Dynamo's cache up to its recompile limit: start a new one.

        Examples draw far more shapes, dtypes and layouts than one program sees, so the limit
        says little about the code under test; running the example eagerly would hide it. The
        recompiles stay counted (a max_recompiles budget judges them after the last example),
        the refused compile is not an eager fallback, and the report says what happened.
        """
        self.accountant.excuse_last_call()
        recompiles = len(self.accountant.counts()["recompiles"])
        budget = self.settings.max_recompiles
        verdict = (
            f"max_recompiles={budget} (from {self.settings.source('max_recompiles')}) judges the "
            "recompiles of all examples"
            if budget is not None
            else "no max_recompiles budget is set, so recompiles do not fail the test"
        )
        self.notes.append(
            f"recompile limit ({_compat.recompile_limit_setting()}) hit after "
            f"{recompiles - self._recompiles_before_cache} recompiles at checker call "
            f"{self.calls}: started a fresh compile cache; {verdict}"
        )
        self._recompiles_before_cache = recompiles
        _compat.reset_dynamo()
        self._compiled.clear()
        self._module_copies.clear()

    def _raise_compile_failure(
        self, compiled: BaseException | None, eager: BaseException | None
    ) -> None:
        """A compiler refusal under fullgraph or the recompile limit is a budget verdict, not parity."""
        __tracebackhide__ = True
        if compiled is None or (
            eager is not None
            and isinstance(_compat.user_exception(compiled), type(_compat.user_exception(eager)))
        ):
            return
        if _compat.is_recompile_limit_error(compiled):
            raise RecompileLimitExceeded(
                "Dynamo hit its recompile limit, so this call would have run eagerly and "
                f"shown no parity: {compiled}\n{self._context()}"
            ) from compiled
        if self.settings.fullgraph and _compat.is_graph_break_error(compiled):
            raise GraphBreakBudgetExceeded(
                f"fullgraph=True (from {self.settings.source('fullgraph')}) but the program has a "
                f"graph break: {_first_line(compiled)}\n{self._context()}"
            ) from compiled

    def _note_fallback_random(self) -> None:
        note = (
            f"random draws compared with {randomness.FALLBACK_RANDOM} on the graphs that draw "
            "them; raising and metadata also checked compiled as you compile"
        )
        if note not in self.notes:
            self.notes.append(note)

    def _eager_rejected(
        self, exc: BaseException, args: tuple[Any, ...], kwargs: Mapping[str, Any]
    ) -> None:
        """Both sides raised alike: the input is outside what the program accepts.

        Re-raise eager's exception, as the plain call would, with a note that says so and how to
        keep such inputs out; under reject_eager_errors a Hypothesis example is rejected instead.
        """
        __tracebackhide__ = True
        if self.settings.reject_eager_errors and self.examples:
            from hypothesis import reject

            self.rejected += 1
            self.first_rejection = self.first_rejection or _first_line(exc)
            reject()
        source = self.settings.source("reject_eager_errors")
        lines = [
            f"{NOTE_PREFIX}eager itself raised this on the call's inputs, and the compiled "
            "run raised alike, so this is the program rejecting its input, not a miscompile.",
            *self._inputs_note(args, kwargs).splitlines()[1:],
            *(f"  {hint}" for hint in _exclusion_hints(args, kwargs)),
        ]
        if self.examples:
            lines.append(
                f"  reject_eager_errors=False ({source}): with its default, True, an example "
                "eager rejects is no example at all (hypothesis.reject()) and the test goes on."
            )
        exc.add_note("\n".join(lines))
        raise exc

    def _note_devices(self, fn: Any, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> None:
        tensors = [leaf for leaf in leaves((args, dict(kwargs))) if isinstance(leaf, torch.Tensor)]
        if isinstance(fn, torch.nn.Module):
            first = next(fn.parameters(), None)  # not list(...): that walks every parameter
            tensors += [first] if first is not None else []
        for tensor in tensors[:1]:
            if str(tensor.device) not in self.devices_seen:
                self.devices_seen.append(str(tensor.device))

    def _context(self) -> str:
        device = ",".join(self.devices_seen) or "cpu"
        context = f"{self.settings.describe()} device={device}"
        if any(seen.startswith("cuda") for seen in self.devices_seen):
            # Both sides run under the caller's TF32 settings; the float64 reference never uses TF32.
            matmul = torch.backends.cuda.matmul.allow_tf32
            cudnn = torch.backends.cudnn.allow_tf32
            context += (
                f" tf32(matmul={'on' if matmul else 'off'}, cudnn={'on' if cudnn else 'off'})"
            )
        return context

    def _record_errors(self, report: parity.ParityReport) -> dict[str, LeafError]:
        errors: dict[str, LeafError] = {}
        for leaf in report.leaves:
            error = LeafError(leaf=leaf.leaf, max_abs=leaf.max_abs, max_rel=leaf.max_rel)
            errors[leaf.leaf] = error
            seen = self.largest_errors.get(leaf.leaf)
            if seen is None or (error["max_abs"], error["max_rel"]) > (
                seen["max_abs"],
                seen["max_rel"],
            ):
                self.largest_errors[leaf.leaf] = error
        return errors

    @staticmethod
    def _inputs_note(args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> str:
        from pytest_torchcompile.strategies import describe

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

    def finish(self) -> None:
        """After the test: budgets over every call (and every Hypothesis example)."""
        __tracebackhide__ = True
        names = ("max_graph_breaks", "max_recompiles", "fullgraph")
        self.accountant.check_budgets(
            max_graph_breaks=self.settings.max_graph_breaks,
            max_recompiles=self.settings.max_recompiles,
            fullgraph=self.settings.fullgraph,
            source={name: self.settings.source(name) for name in names},
        )


def _exclusion_hints(args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> list[str]:
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


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"


@contextmanager
def isolated(accountant: Accountant) -> Iterator[None]:
    """A clean compile world for one test: Dynamo reset, configs, grad mode and dtype restored."""
    snapshot = _compat.config_snapshot()
    grad_enabled = torch.is_grad_enabled()
    default_dtype = torch.get_default_dtype()
    with _compat.structured_trace_contained():  # Dynamo's reset logs trace records too
        _compat.reset_dynamo()
        try:
            with _compat.patched_configs(accountant.dynamo_settings(), {}):
                yield
        finally:
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
        Hypothesis example to reject). A key left out takes its default; there is no command
        line or ini file here.
    :returns: a :class:`ParityResult`: both sides' outputs, the largest error per leaf, and the
        graph, graph-break, recompile and fallback counts.
    :raises ParityError: eager and compiled disagree; the message says what, where and by how
        much.
    :raises GraphBreakBudgetExceeded: more graph breaks than ``max_graph_breaks`` (any, under
        ``fullgraph``).
    :raises RecompileLimitExceeded: more recompiles than ``max_recompiles``, or Dynamo's
        recompile limit made the call run eagerly.
    :raises EagerFallbackError: a frame meant to be compiled ran eagerly: no parity was shown.
    :raises pytest_torchcompile.settings.SettingError: an unknown key or a bad value in
        `options`, e.g. ``Invalid rtol='x' from assert_compile_parity(...)``.
    :raises UncopyableInputError: the module or an input cannot be copied for the compiled side.
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
