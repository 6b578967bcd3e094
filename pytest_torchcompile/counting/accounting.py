"""Graph breaks, recompiles and eager fallbacks of one test, counted so that a budget can trust them.

Dynamo's own counters are not enough: `counters["graph_break"]` misses data-dependent branches
and frames skipped for a break inside a loop, and the backend never sees a break in front of an
empty graph. The Accountant reads three sources, each for what it sees best:

- its backend wrapper: every graph actually compiled, with the reason Dynamo ended it;
- Dynamo's graph-break reasons: every break Dynamo resumed from, with the user stack;
- Dynamo's compilation metrics, one per frame compile: recompiles with the guard that failed,
  frames skipped or refused (recompile limit), suppressed errors, and compile time.

Breaks are events, counted as Dynamo meets them, once per frame and place: two breaks on one
line are two (Dynamo breaks the frame at the first, then its continuation at the second), and so
is one break reached in two continuations (both branches of a data-dependent `if`), but a
recompile of a frame that breaks at the same place again is the same break. A frame is Dynamo's
frame id (the "3" of compile id "3/1"), which tells each `torch_dynamo_resume_in_*` continuation
apart though several share a name. Recompiles are counted once per user-level call (recompiling
the continuations of a broken frame is part of the same recompile).

Under compiled autograd, each backward graph it captures is compiled by Dynamo with the test's
backend: its graphs, breaks and Dynamo recompiles count as any frame's, under the frame
"compiled autograd backward !N" (N: the capture). A capture of a backward already captured
(the same operators) is a recompile of it, its cache having missed on sizes, unless the forward
had just recompiled (the new backward only follows that recompile, counted once).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from typing import Any

import torch

from pytest_torchcompile import _compat, _paths
from pytest_torchcompile.counting.records import (
    BreakRecord,
    CompileCounts,
    FallbackRecord,
    GraphRecord,
    RecompileRecord,
)
from pytest_torchcompile.errors import (
    EagerFallbackError,
    GraphBreakBudgetExceeded,
    RecompileLimitExceeded,
)

_RESUME = re.compile(r"^torch_dynamo_resume_in_(?P<name>.+)_at_\d+$")
_GRAPH_OPS = frozenset({"call_function", "call_method", "call_module"})
# Dynamo's "soft" failures: it gives up on the frame and runs it eagerly, unless told to raise.
_SOFT_FAILURES = frozenset({"Unsupported", "UserError"})
_NESTED_BREAK = re.compile(r"\*{3}[^*\n]*another graph break occurred[^*\n]*\*{3}")
_COMPILE_ID_PREFIX = re.compile(r"^\s*\[?!?[\d/]+\]?:\s*")
_DEVICE_KEYS = frozenset(
    {"CPU", "CUDA", "HIP", "XLA", "MPS", "IPU", "XPU", "HPU", "VE", "Lazy", "Meta", "MTIA"}
    | {"PrivateUse1", "PrivateUse2", "PrivateUse3"}
)

# A break's identity: (frame id, user stack as (file, line) outermost first, column of the
# breaking instruction or None).
_BreakKey = tuple[str, tuple[tuple[str, int], ...], int | None]


@dataclass(frozen=True)
class Mark:
    """The Accountant's counts at one moment (`Accountant.mark`)."""

    graphs: int
    exports: int
    breaks: int
    recompiles: int
    fallbacks: dict[tuple[str, str], FallbackRecord]
    compile_time_s: float
    frame_compiles: int
    captured: set[tuple[str, ...]]
    rerecords: int


@dataclass
class _Graph:
    compile_id: str
    ops: int
    reason: str
    dynamic: bool = False  # compiled with symbolic sizes (automatic dynamic shapes or marks)


class _CountingBackend:
    """The backend torch.compile gets: notes each graph, then hands it to the real backend.

    Attributes it does not have (reset, get_compiler_config, compiler_name) come from the real
    backend, so Dynamo treats the pair exactly as it would treat the real backend alone.
    """

    def __init__(self, inner: Callable[..., Any], graphs: list[_Graph]) -> None:
        self._inner = inner
        self._graphs = graphs
        # torch.compile names a backend after its __name__; keep the real backend's name.
        self.__name__ = str(getattr(inner, "compiler_name", getattr(inner, "__name__", inner)))

    def __call__(self, gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Any:
        ops = sum(1 for node in gm.graph.nodes if node.op in _GRAPH_OPS)
        reason = _title(_compat.graph_end_reason(gm))
        dynamic = any(_symbolic(value) for value in example_inputs)
        self._graphs.append(_Graph(_compat.current_compile_id(), ops, reason, dynamic))
        return self._inner(gm, example_inputs)

    def count_into(self, graphs: list[_Graph]) -> None:
        """Count later graphs into `graphs` (another test's accountant, when the backend and
        Dynamo's cache entries made with it serve later tests)."""
        self._graphs = graphs

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name in ("_inner", "_graphs"):
            raise AttributeError(name)
        return getattr(self._inner, name)

    def __repr__(self) -> str:
        return f"<counting backend around {self._inner!r}>"


def _symbolic(value: Any) -> bool:
    """Whether a graph input is a symbolic size, or a tensor with one."""
    if isinstance(value, torch.SymInt):
        return True
    return isinstance(value, torch.Tensor) and any(isinstance(n, torch.SymInt) for n in value.shape)


class _FrameLabels:
    """Dynamo's frame ids named as the user knows the code: `Block.forward (models.py:12)`.

    Every continuation of a broken frame is named after the user function it continues, and the
    wrapper frame inside torch that calls a module is named after the module's forward.
    """

    def __init__(self) -> None:
        self._by_frame: dict[str, str] = {}  # frame id -> label of its user frame
        self._by_root: dict[tuple[str, str], str] = {}  # (file, name) -> label

    def note(
        self, event: _compat.CompileEvent, module_class: type[torch.nn.Module] | None
    ) -> tuple[str, str] | None:
        """Label the frame a compile event is about; its root (file, name), if Dynamo named it."""
        if event.code_name is None or event.filename is None:
            return None
        root = _root_of(event.code_name, event.filename)
        if not _RESUME.match(event.code_name):
            self._by_root[root] = _frame_label(root[1], event.filename, event.firstlineno)
            if module_class and not _is_user_file(event.filename):
                self._by_root[root] = _module_label(module_class)
        self._by_frame[event.frame_id] = self._by_root.get(
            root, _frame_label(root[1], event.filename, None)
        )
        return root

    def of(self, compile_id: str) -> str:
        if _compat.is_compiled_autograd_compile(compile_id):
            return autograd_frame(compile_id)
        frame_id = _compat.frame_id(compile_id)
        return self._by_frame.get(frame_id, f"frame {frame_id}" if frame_id else "unknown frame")


def autograd_frame(compile_id: str) -> str:
    """The frame a compiled-autograd capture's graphs are counted under: its capture, "!N"."""
    return f"compiled autograd backward {compile_id.split('/', 1)[0]}".rstrip()


class _CompileLedger:
    """What Dynamo's records say of its frame compiles: breaks, recompiles, fallbacks, time."""

    def __init__(self, labels: _FrameLabels) -> None:
        self.labels = labels
        self.breaks: dict[_BreakKey, BreakRecord] = {}
        self.recompiles: list[RecompileRecord] = []
        self.fallbacks: dict[tuple[str, str], FallbackRecord] = {}
        self.compile_time_s = 0.0
        self.frame_compiles = 0
        # The user-level call a resume function's compile belongs to: (user frame, observe id),
        # and whether that call already counted a recompile.
        self._chain: tuple[tuple[str, str], int] | None = None
        self._chain_recompiled = False
        self._fallbacks_before_call: set[tuple[str, str]] = set()
        # The callable an observed call enters (its module's class, or the function), and the
        # frame Dynamo compiled first in the call: the one every call of the callable enters.
        self._callable: object = None
        self._entry: str | None = None
        # Entry frames Dynamo gave up on in a call that was excused: Dynamo marked their code
        # to be skipped, so a later call of the callable runs them eagerly, with no compile to say so.
        self._now_skipped: dict[int, FallbackRecord] = {}  # by id: a function may be unhashable

    def start_call(self, callable_key: object) -> None:
        """An observed call begins: its fallbacks are those added from now on."""
        self._fallbacks_before_call = set(self.fallbacks)
        self._callable = callable_key
        self._entry = None

    def excuse_last_call(self) -> None:
        for key in set(self.fallbacks) - self._fallbacks_before_call:
            fallback = self.fallbacks.pop(key)
            if fallback["kind"] == "skipped" and fallback["frame"] == self._entry:
                self._now_skipped[id(self._callable)] = FallbackRecord(
                    frame=fallback["frame"],
                    kind="skipped",
                    reason="Dynamo skips this frame since it gave up compiling it in an earlier "
                    f"call that raised ({fallback['reason']}), so later calls run it eagerly",
                )

    def take(
        self,
        seen: _compat.DynamoRecords,
        raised: set[str],
        *,
        call: int,
        module_class: type[torch.nn.Module] | None,
    ) -> None:
        """Count what Dynamo recorded during observed call number `call`."""
        for event in seen.compiles:
            self.compile_time_s += event.duration_s
            if not event.backward:
                self._take_compile(event, raised, call, module_class)
        for brk in seen.breaks:
            key = (_compat.frame_id(brk.compile_id), brk.stack, brk.column)
            self._add_break(key, _summary(brk.reason))
        skipped = self._now_skipped.get(id(self._callable))
        if skipped is not None and not seen.compiles:  # entered the skipped frame, compiled none
            self.fallbacks.setdefault((skipped["frame"], skipped["kind"]), skipped)

    def _take_compile(
        self,
        event: _compat.CompileEvent,
        raised: set[str],
        call: int,
        module_class: type[torch.nn.Module] | None,
    ) -> None:
        self.frame_compiles += 1
        root = self.labels.note(event, module_class)
        resumed = bool(_RESUME.match(event.code_name or ""))
        if root is not None:
            self._follow_chain(root, call, resumed=resumed)
        frame = self.labels.of(event.compile_id)
        if self._entry is None:  # Dynamo compiles the outermost frame of a call first
            self._entry = "" if resumed else frame  # a continuation: the call entered compiled
        if event.recompile_limit_hit:
            reason = f"{_compat.recompile_limit_setting()} reached"
            if event.recompile_reason:
                guard = guard_text(event.recompile_reason, hint=True)
                reason += f"; the guard that failed last: {guard}"
            self._add_fallback(frame, "recompile_limit", reason)
            return
        if event.recompile_reason is not None and not self._chain_recompiled:
            self._chain_recompiled = True
            text = guard_text(event.recompile_reason)
            self.recompiles.append(
                RecompileRecord(frame=frame, reason=text, category=recompile_category(text))
            )
        if event.fail_type is None:
            return
        soft = event.fail_type in _SOFT_FAILURES
        if soft:  # Dynamo gave up on the frame over something it cannot trace: a graph break
            location = (event.fail_location,) if event.fail_location else ()
            key = (event.frame_id, location, None)
            self._add_break(key, _summary(event.fail_reason or event.fail_type))
        if event.compile_id in raised:
            return  # the failure reached the caller: an error it sees, not a silent eager run
        kind = "suppressed_error" if event.errors_suppressed and not soft else "skipped"
        self._add_fallback(frame, kind, f"{event.fail_type}: {_summary(event.fail_reason or '')}")

    def _follow_chain(self, root: tuple[str, str], call: int, *, resumed: bool) -> None:
        """Group a compile with the user-level call it belongs to.

        A broken frame's continuations compile right after it, within the same observed call;
        a user frame compiling again always starts a new call.
        """
        chain = (root, call)
        if not resumed or self._chain != chain:
            self._chain = chain
            self._chain_recompiled = False

    def _add_fallback(self, frame: str, kind: str, reason: str) -> None:
        self.fallbacks.setdefault(
            (frame, kind), FallbackRecord(frame=frame, kind=kind, reason=reason)
        )

    def _add_break(self, key: _BreakKey, reason: str) -> None:
        if key not in self.breaks:
            *callers, location = _user_frames(key[1]) or [""]
            if callers:  # the same line can break each frame on the way to it
                reason += f" (reached from {', '.join(callers)})"
            self.breaks[key] = BreakRecord(reason=reason, location=location)


class _CudagraphLedger:
    """CUDA graphs recorded again, and why Inductor ran a graph without CUDA graphs."""

    def __init__(self, labels: _FrameLabels) -> None:
        self.labels = labels
        self.rerecords: list[str] = []  # CUDA graphs recorded again, with the reason
        self.skips: list[str] = []  # why Inductor ran a graph without CUDA graphs
        self._recorded: set[tuple[str, str, str]] = set()  # (compile id, function, mode)

    def take(self, events: _compat.CudagraphEvents) -> None:
        """A graph's second and later CUDA-graph recordings are re-records: count them."""
        for recording in events.recordings:
            key = recording.compile_id, recording.function, recording.mode
            if key in self._recorded or recording.reason:
                why = recording.reason or f"recorded again for inputs of sizes {recording.sizes}"
                backward = " (backward)" if recording.mode == "BACKWARD" else ""
                graph = f"{recording.function}{backward} of {self.labels.of(recording.compile_id)}"
                self.rerecords.append(f"{graph} [{recording.compile_id}]: {why}")
            self._recorded.add(key)
        for skip in events.skips:
            if skip not in self.skips:
                self.skips.append(skip)


class _Captures:
    """Compiled autograd's backward captures, by operators: capturing a backward seen before is a
    recompile of it (its cache missed on sizes), unless the forward had just recompiled."""

    def __init__(self, compiles: _CompileLedger) -> None:
        self._compiles = compiles
        self.seen: set[tuple[str, ...]] = set()  # compiled autograd's backwards, by operators
        self.block_recompiled = False  # whether the last observed block counted a recompile

    def compiler(
        self, compile_graph: Callable[[torch.fx.GraphModule], Any]
    ) -> Callable[[torch.fx.GraphModule], Any]:
        """`compile_graph` of each captured backward graph, a capture seen before counted."""

        def compile_capture(gm: torch.fx.GraphModule) -> Any:
            ops = _compat.autograd_graph_ops(gm)
            if ops in self.seen and not self.block_recompiled:
                frame = autograd_frame(_compat.autograd_capture_id(gm))
                self._compiles.recompiles.append(
                    RecompileRecord(
                        frame=frame,
                        reason="compiled autograd captured this backward again: its cache "
                        "missed on sizes it had compiled as constants",
                        category="size",
                    )
                )
            self.seen.add(ops)
            return compile_graph(gm)

        # A backward inside a compiled frame captures under Dynamo's frame hook: keep Dynamo
        # from tracing the counting itself (it would count as a frame run eagerly).
        untraced: Callable[[torch.fx.GraphModule], Any]
        untraced = torch.compiler.disable(compile_capture)  # type: ignore[no-untyped-call]
        return untraced


class Accountant:
    """Everything torch.compile did in one test: graphs, breaks, recompiles, fallbacks, time.

    One per test, shared by every compiled callable and every Hypothesis example of the test.
    Wrap every compiled call, and the compiled side's backward, in `observe()`.
    """

    def __init__(self) -> None:
        self._graphs: list[_Graph] = []
        self._labels = _FrameLabels()
        self._compiles = _CompileLedger(self._labels)
        self._cudagraphs = _CudagraphLedger(self._labels)
        self._exports: list[GraphRecord] = []  # programs made by torch.export (exported.py)
        self._observed = 0
        self._depth = 0
        self._captures = _Captures(self._compiles)
        # The class of the module observe() is calling, if any; labelled only when it compiles.
        self._module_class: type[torch.nn.Module] | None = None
        # Dynamo's cache entries made in an earlier test serve this one: running without a
        # compile is no sign that every call ran eagerly.
        self.reusing = False

    # --- what the runner calls -------------------------------------------------------------------

    def backend(self, inner: Callable[..., Any]) -> Callable[..., Any]:
        """A backend for torch.compile that counts each graph and compiles it with `inner`."""
        return _CountingBackend(inner, self._graphs)

    def adopt(self, backend: Callable[..., Any]) -> None:
        """Count the graphs a backend made by `backend()` (another test's) compiles from now."""
        assert isinstance(backend, _CountingBackend)
        backend.count_into(self._graphs)

    def graphs_since(self, mark: Mark) -> list[bool]:
        """The graphs compiled since `mark`, each as whether it has dynamic shapes."""
        return [graph.dynamic for graph in self._graphs[mark.graphs :]]

    def exported(
        self, graph: GraphRecord, recompile: RecompileRecord | None, seconds: float
    ) -> None:
        """A whole program exported (torch.export: one graph, never a break) in `seconds`, and
        the recompile it is where the callable was exported for another input signature before."""
        self._exports.append(graph)
        self._compiles.compile_time_s += seconds
        if recompile is not None:
            self._compiles.recompiles.append(recompile)

    @contextmanager
    def observe(
        self, module: torch.nn.Module | None = None, cudagraphs: bool = False, fn: object = None
    ) -> Iterator[None]:
        """Around a compiled call (or its backward): attribute what Dynamo does to this test.

        `module` is the nn.Module being called, if any: Dynamo compiles it through a wrapper
        frame inside torch, which the report names after the module's forward instead.
        `cudagraphs`: the call may use CUDA graphs, so their recordings are read too (which costs
        milliseconds per call, so other calls skip it).
        `fn`: the function called where there is no module, so a frame Dynamo now skips is
        told apart from another function's cached call.
        Exceptions pass through unchanged; a compile failure that reaches the caller is an error
        the caller sees, so it is not counted as an eager fallback.
        """
        if self._depth:
            yield
            return
        self._module_class = type(module) if module is not None else None
        self._depth += 1
        self._observed += 1
        # The callable whose frame Dynamo may skip: the module's class (its copies share the
        # code), or the function `fn`.
        self._compiles.start_call(self._module_class if module is not None else fn)
        recompiles = len(self._compiles.recompiles)
        try:
            with (
                _compat.dynamo_records() as seen,
                _compat.cudagraph_events()
                if cudagraphs
                else nullcontext(_compat.CudagraphEvents()) as graphs,
            ):
                yield
        except BaseException as exc:
            self._take(seen, raised=_compat.exception_compile_ids(exc))
            raise
        else:
            self._take(seen, raised=set())
        finally:
            self._depth -= 1
            self._cudagraphs.take(graphs)
            self._captures.block_recompiled = len(self._compiles.recompiles) > recompiles

    def _take(self, seen: _compat.DynamoRecords, raised: set[str]) -> None:
        self._compiles.take(seen, raised, call=self._observed, module_class=self._module_class)

    def autograd_compiler(
        self, compile_graph: Callable[[torch.fx.GraphModule], Any]
    ) -> Callable[[torch.fx.GraphModule], Any]:
        """Compiled autograd's compiler: `compile_graph` (torch.compile with the counting backend)
        of each backward graph it captures, the capture of a backward seen before counted as a
        recompile of it."""
        return self._captures.compiler(compile_graph)

    def forget_captures(self) -> None:
        """Compiled autograd's cache was reset: a backward captured again is no recompile."""
        self._captures.seen.clear()

    def mark(self) -> Mark:
        """Where the counts stand now, for `rollback`."""
        compiles = self._compiles
        return Mark(
            graphs=len(self._graphs),
            exports=len(self._exports),
            breaks=len(compiles.breaks),
            recompiles=len(compiles.recompiles),
            fallbacks=dict(compiles.fallbacks),
            compile_time_s=compiles.compile_time_s,
            frame_compiles=compiles.frame_compiles,
            captured=set(self._captures.seen),
            rerecords=len(self._cudagraphs.rerecords),
        )

    def rollback(self, mark: Mark) -> float:
        """Forget everything counted since `mark`: a compiled run the checker retries (in a
        fresh cache, after a fault of the environment) is counted once, as its retry. Returns
        the compile seconds forgotten."""
        compiles = self._compiles
        forgotten = compiles.compile_time_s - mark.compile_time_s
        del self._graphs[mark.graphs :]
        del self._exports[mark.exports :]
        compiles.breaks = dict(list(compiles.breaks.items())[: mark.breaks])
        del compiles.recompiles[mark.recompiles :]
        compiles.fallbacks = dict(mark.fallbacks)
        compiles.compile_time_s = mark.compile_time_s
        compiles.frame_compiles = mark.frame_compiles
        self._captures.seen = set(mark.captured)
        del self._cudagraphs.rerecords[mark.rerecords :]
        return forgotten

    def excuse_last_call(self) -> None:
        """Forget the eager fallbacks of the last observed call: it raised just as eager did.

        Dynamo cannot compile a frame that raises out of it, so it runs it eagerly; when eager
        raised the same exception that is the program's meaning, not a lost compile. Later
        calls that run eagerly because Dynamo now skips the frame are still counted.
        """
        self._compiles.excuse_last_call()

    def dynamo_settings(self) -> dict[str, Any]:
        """Dynamo config the test runs under: hitting the recompile limit fails, never goes eager."""
        return _compat.strict_recompile_limit()

    def counts(self) -> CompileCounts:
        """Cumulative counts over every observed call of the test."""
        compiles = self._compiles
        fallbacks = list(compiles.fallbacks.values())
        compiled_here = compiles.frame_compiles or self._graphs or self._exports
        ran_eagerly = _compat.eager_stance() if self.reusing else not compiled_here
        if self._observed and ran_eagerly:
            fallbacks.append(
                FallbackRecord(
                    frame="the compiled callable",
                    kind="skipped",
                    reason="Dynamo compiled no frame at all, so every call ran eagerly "
                    "(torch.compiler.set_stance('force_eager'), TORCH_COMPILE_DISABLE=1, or a "
                    "callable Dynamo skips)",
                )
            )
        return CompileCounts(
            graphs=[
                GraphRecord(
                    frame=self._labels.of(graph.compile_id), ops=graph.ops, reason=graph.reason
                )
                for graph in self._graphs
            ]
            + self._exports,
            graph_breaks=list(compiles.breaks.values()),
            recompiles=list(compiles.recompiles),
            fallbacks=fallbacks,
            cudagraph_rerecords=list(self._cudagraphs.rerecords),
            cudagraph_skips=list(self._cudagraphs.skips),
            compile_time_s=compiles.compile_time_s,
        )

    def check_budgets(
        self,
        max_graph_breaks: int | None,
        max_recompiles: int | None,
        fullgraph: bool,
        source: Mapping[str, str],
    ) -> None:
        """Fail the test when a call ran eagerly or a budget is exceeded, listing every cause.

        The error's type is the most serious verdict (recompile limit hit, then other eager
        fallbacks, then graph breaks, then recompiles); its message covers every verdict.
        """
        __tracebackhide__ = True
        verdicts = _verdicts(self.counts(), max_graph_breaks, max_recompiles, fullgraph, source)
        if verdicts:
            raise verdicts[0][0]("\n\n".join(message for _, message in verdicts))


# --- the budget verdicts and their messages ----------------------------------------------------


def _verdicts(
    counts: CompileCounts,
    max_graph_breaks: int | None,
    max_recompiles: int | None,
    fullgraph: bool,
    source: Mapping[str, str],
) -> list[tuple[type[AssertionError], str]]:
    """Each broken promise as (error type, message), the most serious first."""
    verdicts: list[tuple[type[AssertionError], str]] = []
    limit_hits = [f for f in counts["fallbacks"] if f["kind"] == "recompile_limit"]
    others = [f for f in counts["fallbacks"] if f["kind"] != "recompile_limit"]
    recompiles = counts["recompiles"]
    over = max_recompiles is not None and len(recompiles) > max_recompiles
    if limit_hits:
        listed = [] if over else recompiles  # the budget verdict below lists them
        verdicts.append((RecompileLimitExceeded, _limit_message(limit_hits, listed)))
    if others:
        verdicts.append((EagerFallbackError, _fallback_message(others)))
    breaks = counts["graph_breaks"]
    if fullgraph and breaks:
        budget = f"fullgraph=True{_from(source, 'fullgraph')} allows none"
        verdicts.append((GraphBreakBudgetExceeded, _breaks_message(breaks, budget)))
    elif max_graph_breaks is not None and len(breaks) > max_graph_breaks:
        budget = f"max_graph_breaks={max_graph_breaks}{_from(source, 'max_graph_breaks')}"
        verdicts.append((GraphBreakBudgetExceeded, _breaks_message(breaks, budget)))
    if over:
        budget = f"max_recompiles={max_recompiles}{_from(source, 'max_recompiles')}"
        verdicts.append((RecompileLimitExceeded, _recompiles_message(recompiles, budget)))
    return verdicts


# --- turning Dynamo's text into a user's text --------------------------------------------------


def _root_of(code_name: str, filename: str) -> tuple[str, str]:
    """(file, name) of the user function a code object is, or continues after a graph break."""
    name = code_name
    while match := _RESUME.match(name):
        name = match["name"]
    return filename, name


def _path(filename: str) -> str:
    """A path as the user would type it: relative to the working directory when inside it."""
    here = os.path.join(os.getcwd(), "")
    return os.path.relpath(filename) if filename.startswith(here) else filename


def _is_user_file(filename: str) -> bool:
    return _paths.is_user_file(filename)


def _module_label(cls: type[torch.nn.Module]) -> str:
    """The label of a module's forward, e.g. Block.forward (models.py:12), for its wrapper frame.
    Made only when a frame compiles (paths relative to the working directory cost a warm call
    more than the rest of observe())."""
    code = getattr(cls.forward, "__code__", None)
    if code is None:
        return f"{cls.__name__}.forward"
    return _frame_label(f"{cls.__name__}.forward", code.co_filename, code.co_firstlineno)


def _frame_label(name: str, filename: str, firstlineno: int | None) -> str:
    where = _path(filename) if firstlineno is None else f"{_path(filename)}:{firstlineno}"
    return f"{name} ({where})"


def _user_frames(stack: tuple[tuple[str, int], ...]) -> list[str]:
    """file:line of the stack's frames in user code (not torch, not the standard library)."""
    user = [f for f in stack if _is_user_file(f[0])]
    return [f"{_path(filename)}:{lineno}" for filename, lineno in user or stack[-1:]]


def _title(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[0] if lines else ""


def _summary(text: str) -> str:
    """One line from Dynamo's multi-line break message: what, why, and the root cause if chained."""

    def one(part: str) -> str:
        title = _title(part)
        if title.startswith("generic_jump"):
            return f"data-dependent control flow: Python branches on a tensor's value ({title})"
        for line in part.splitlines():
            if line.strip().startswith("Explanation:"):
                return f"{title}: {line.strip().removeprefix('Explanation:').strip()}"
        return title

    parts = [p for p in _NESTED_BREAK.split(text) if p.strip()]
    if len(parts) > 1:
        return f"{_title(parts[-1])}, caused by: {one(parts[0])}"
    return one(text)


def guard_text(reason: str, *, hint: bool = False) -> str:
    """The failed guard on one line: `s.k == 7 (from `s.k += 1`)`, without Dynamo's compile-id
    prefix, truncated path and stack trace; its HINT only when asked for."""
    first = _title(_COMPILE_ID_PREFIX.sub("", reason.strip(), count=1))
    guard, *comments = re.split(r"\s+#\s+", first)
    text = re.sub(r"\s{2,}", " ", guard.strip())
    if len(comments) >= 2 and comments[0]:  # "<guard>  # <user source>  # <path>:<line> in <fn>"
        text += f" (from `{comments[0].strip()}`)"
    found = re.search(r"\(HINT: (.*)\)\s*$", first)
    if hint and found:
        text += f"; hint: {found[1]}"
    return text


def recompile_category(guard: str) -> str:
    """size, stride, dtype, device, requires_grad, grad_mode, python_value or other."""
    text = guard.lower()
    if "size mismatch" in text or ".size()" in text or "numel" in text:
        return "size"
    if "stride mismatch" in text or ".stride()" in text or "storage_offset" in text:
        return "stride"
    if "dtype mismatch" in text:
        return "dtype"
    if "device mismatch" in text or _device_keys_differ(guard):
        return "device"
    if "requires_grad mismatch" in text:
        return "requires_grad"
    if "grad_mode" in text:
        return "grad_mode"
    if re.search(r"\s(==|!=|is|is not)\s|___check_obj_id|___check_type_id|\blen\(|type\(", guard):
        return "python_value"
    return "other"


def _device_keys_differ(guard: str) -> bool:
    match = re.search(r"expected DispatchKeySet\((.*?)\), actual DispatchKeySet\((.*?)\)", guard)
    if match is None:
        return False
    expected, actual = (
        {k.strip() for k in group.split(",")} & _DEVICE_KEYS for group in match.groups()
    )
    return expected != actual


def _from(source: Mapping[str, str], key: str) -> str:
    where = source.get(key)
    return f" (from {where})" if where else ""


def _numbered(lines: list[str]) -> str:
    return "\n".join(f"  {i}. {line}" for i, line in enumerate(lines, 1))


def _breaks_message(breaks: list[BreakRecord], budget: str) -> str:
    lines = [f"{b['location'] or 'unknown location'}: {b['reason']}" for b in breaks]
    noun = "graph break" if len(breaks) == 1 else "graph breaks"
    return f"{len(breaks)} {noun}, over the budget {budget}:\n{_numbered(lines)}"


def _recompiles_message(recompiles: list[RecompileRecord], budget: str) -> str:
    noun = "recompile" if len(recompiles) == 1 else "recompiles"
    return f"{len(recompiles)} {noun}, over the budget {budget}:\n{_numbered(_recompile_lines(recompiles))}"


def _recompile_lines(recompiles: list[RecompileRecord]) -> list[str]:
    return [f"{r['frame']} [{r['category']}]: {r['reason']}" for r in recompiles]


def _limit_message(hits: list[FallbackRecord], recompiles: list[RecompileRecord]) -> str:
    frames = ", ".join(h["frame"] for h in hits)
    lines = "\n".join(f"  {h['reason']}" for h in hits)
    text = (
        f"Dynamo's recompile limit was hit for {frames}, so torch.compile would have run it "
        f"eagerly and shown no parity:\n{lines}"
    )
    if recompiles:
        text += f"\nRecompiles before the limit:\n{_numbered(_recompile_lines(recompiles))}"
    return text + (
        "\nStop the recompiles (mark the changing dimension dynamic, pass changing Python values "
        "as tensors) or raise the limit."
    )


def _fallback_message(fallbacks: list[FallbackRecord]) -> str:
    noun = "frame" if len(fallbacks) == 1 else "frames"
    lines = [f"{f['frame']} ({f['kind'].replace('_', ' ')}): {f['reason']}" for f in fallbacks]
    return (
        f"torch.compile ran {len(fallbacks)} {noun} eagerly, so this was not a compiled run and "
        f"shows no parity:\n{_numbered(lines)}"
    )


__all__ = ["Accountant", "Mark"]
