"""The only module that touches private torch names; each use is guarded for torch 2.11 and 2.13.
(One private Hypothesis name too, at the end: the literals it collects from the code under test.)

Everything else in the plugin goes through these small functions, so a torch upgrade that moves
an internal breaks one place, with a clear error, instead of many.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import re
import warnings
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import torch

TORCH_VERSION: tuple[int, int] = tuple(int(p) for p in torch.__version__.split(".")[:2])  # type: ignore[assignment]

# --- backends (lead) ---


def registered_backends() -> list[str]:
    """Every backend name torch.compile accepts, debug and experimental ones included."""
    from torch._dynamo.backends.registry import list_backends

    return sorted(list_backends(exclude_tags=()))


def inner_backend(
    backend: str | Callable[..., Any], mode: str | None, dynamic: bool | None
) -> Callable[..., Any]:
    """The backend object `torch.compile(backend=..., mode=...)` would build.

    The plugin wraps it in a counting backend, so `mode` must be applied here exactly as
    torch.compile applies it (inductor turns modes into config patches, other backends get
    `mode=` as a keyword).
    """
    if backend == "inductor":
        wrapper = torch._TorchCompileInductorWrapper
        params = inspect.signature(wrapper.__init__).parameters
        if "name" in params:
            return wrapper(mode, None, dynamic, None)  # type: ignore[no-untyped-call]
        return wrapper(mode, None, dynamic)  # type: ignore[no-untyped-call]
    return torch._TorchCompileWrapper(backend, mode, None, dynamic)  # type: ignore[no-untyped-call]


# --- dynamic dimensions and compiled autograd (helper "dyn-autograd") ---


def mark_dimension(tensor: torch.Tensor, dim: int, *, unbacked: bool) -> None:
    """Mark one dimension of `tensor` dynamic (a backed symbol, `torch._dynamo.mark_dynamic`:
    compiling code that specializes it raises) or unbacked (`mark_unbacked`: no hint, so no guard
    may depend on its value, 0 and 1 included)."""
    if unbacked:
        from torch._dynamo.decorators import mark_unbacked

        mark_unbacked(tensor, dim)
    else:
        torch._dynamo.mark_dynamic(tensor, dim)


def compiled_autograd(compiler: Callable[[torch.fx.GraphModule], Any], dynamic: bool | None) -> Any:
    """A context in which backward passes run through compiled autograd, each captured graph
    handed to `compiler` (a torch.compile of it).

    The switch `torch._dynamo.config.compiled_autograd` turns it on only inside a compiled call
    (eval_frame's enter hook), where the backward of a training step that is compiled whole
    runs; the checker calls backward outside the compiled callable, as an eager training loop
    does, so it enters the same context (`compiled_autograd._enable`, `enable` before torch
    2.6) with what that hook passes: `dynamic` as torch.compile's, None read as the hook reads it.
    """
    import torch._dynamo.config as dynamo_config
    from torch._dynamo import compiled_autograd as ca

    enable = getattr(ca, "_enable", None) or getattr(ca, "enable")  # noqa: B009
    if "dynamic" not in inspect.signature(enable).parameters:
        return enable(compiler)
    if dynamic is None:
        dynamic = not dynamo_config.assume_static_by_default
    return enable(compiler, dynamic=dynamic)


def is_constraint_violation(exc: BaseException) -> bool:
    """Dynamo refused a dimension marked dynamic that the program specializes (or one of the
    exceptions `exc` wraps is that refusal)."""
    from torch.fx.experimental.symbolic_shapes import ConstraintViolationError

    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, ConstraintViolationError):
            return True
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return False


def is_compiled_autograd_compile(compile_id: str) -> bool:
    """Whether a compile id ("!0/1/0") is of a graph compiled autograd captured: torch prefixes
    those with "!" and the capture's number (torch._guards.CompileId.__str__)."""
    return compile_id.startswith("!")


def autograd_capture_id(gm: torch.fx.GraphModule) -> str:
    """The capture a compiled-autograd graph came from, "!N" as its compile ids start: read from
    the graph's class name, "CompiledAutogradN" ("" on a torch that does not number them)."""
    number = type(gm).__name__.removeprefix("CompiledAutograd")
    return f"!{number}" if number.isdigit() else ""


def autograd_graph_ops(gm: torch.fx.GraphModule) -> tuple[str, ...]:
    """The operators a compiled-autograd graph runs, in order: ATen ops (an AOTAutograd backward
    traced into it) and autograd nodes; what tells a backward captured again for new sizes from
    another backward, without the size plumbing that differs between the two captures."""
    ops = []
    for node in gm.graph.nodes:
        target = node.target
        if node.op != "call_function":
            continue
        if isinstance(target, torch._ops.OpOverload) and not target.__name__.startswith("sym_"):
            ops.append(str(target))
        elif getattr(target, "__module__", "") == "torch._dynamo.compiled_autograd.ops":
            ops.append(str(getattr(target, "__name__", target)))
    return tuple(ops)


# --- randomness (helper "randomness") ---


@functools.cache
def nondeterministic_seeded_op_names() -> frozenset[str]:
    """Names of the ATen operators with an overload tagged `nondeterministic_seeded`: those
    that draw from the random generator, the tag Inductor itself reads to treat an op as random.
    """
    names: set[str] = set()
    for full in torch._C._dispatch_get_all_op_names():
        namespace, _, qualified = full.partition("::")
        if namespace != "aten":
            continue
        name, _, overload = qualified.partition(".")
        try:
            op = getattr(getattr(torch.ops.aten, name), overload or "default")
        except (AttributeError, RuntimeError):
            continue
        if torch.Tag.nondeterministic_seeded in op.tags:
            names.add(name)
    return frozenset(names)


def tagged_random(target: Any) -> bool | None:
    """Whether an ATen operator (an overload, or a packet: any of its overloads) is tagged
    `nondeterministic_seeded`; None when `target` is no ATen operator."""
    if isinstance(target, torch._ops.OpOverload):
        return torch.Tag.nondeterministic_seeded in target.tags
    if isinstance(target, torch._ops.OpOverloadPacket):
        names = target.overloads()  # type: ignore[no-untyped-call]
        return any(torch.Tag.nondeterministic_seeded in getattr(target, n).tags for n in names)
    return None


def fallback_random_backend(
    backend: str | Callable[..., Any], mode: str | None, dynamic: bool | None
) -> Callable[..., Any]:
    """inner_backend's backend with Inductor's `fallback_random` on, forward and backward.

    Inductor gets it as a config patch, which it also applies to the backward it compiles lazily
    on the first backward call; other backends are called with the config patched (those built
    on Inductor compile a lazy backward under `fallback_random_patched()`, which the caller puts
    around the backward).
    """
    if backend == "inductor":
        wrapper = torch._TorchCompileInductorWrapper
        options = {"fallback_random": True}
        params = inspect.signature(wrapper.__init__).parameters
        if "name" in params:
            return wrapper(mode, options, dynamic, None)  # type: ignore[no-untyped-call]
        return wrapper(mode, options, dynamic)  # type: ignore[no-untyped-call]
    inner = inner_backend(backend, mode, dynamic)

    def compile_with_fallback_random(gm: torch.fx.GraphModule, example_inputs: Any) -> Any:
        with fallback_random_patched():
            return inner(gm, example_inputs)

    return compile_with_fallback_random


@contextmanager
def fallback_random_patched() -> Iterator[None]:
    """Inductor's `fallback_random` on for a block: random ops run ATen's own kernels, which draw
    what eager draws."""
    import torch._inductor.config as inductor_config

    with inductor_config.patch(fallback_random=True):
        yield


def fallback_random_setting() -> bool:
    """The value of `torch._inductor.config.fallback_random` now (the user's, outside the patch)."""
    import torch._inductor.config as inductor_config

    return bool(inductor_config.fallback_random)


# --- isolation (lead) ---


@functools.cache
def own_recompile_region() -> dict[str, Any]:
    """torch.compile's keywords that give one compile its own Dynamo cache entries and recompile
    limit (`isolate_recompiles`, torch 2.13), so that the checker's own compiles of a code object
    (the as-you-compile-it run) neither use up the user's recompile limit nor show up as the
    guard that failed in the user's recompiles. Empty where torch has no such keyword: there
    Dynamo's entries of one code object are shared by every compile of it."""
    if "isolate_recompiles" in inspect.signature(torch.compile).parameters:
        return {"isolate_recompiles": True}
    return {}


def eager_stance() -> bool:
    """Whether Dynamo runs every frame eagerly now, cached code included
    (`torch.compiler.set_stance('force_eager')`, TORCH_COMPILE_DISABLE=1)."""
    import torch._dynamo.config as dynamo_config
    import torch._dynamo.eval_frame as eval_frame

    stance = getattr(getattr(eval_frame, "_stance", None), "stance", "default")
    return bool(dynamo_config.disable) or stance == "force_eager"


def reset_dynamo() -> None:
    """Forget every compiled frame, guard and counter, as a fresh process would have.

    Where CUDA is present the reset imports Inductor's cudagraph trees, whose imports issue
    torch's own DeprecationWarnings (`torch.utils.mkldnn`, torch 2.11): the checker's reset is
    not the test's, so under `filterwarnings = error` they must not fail it."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", module=_COMPILER_MODULES)
        torch._dynamo.reset()


@contextmanager
def patched_configs(dynamo: dict[str, Any], inductor: dict[str, Any]) -> Iterator[None]:
    """Set Dynamo and Inductor config values for a block, restoring every value afterwards."""
    import torch._dynamo.config as dynamo_config
    import torch._inductor.config as inductor_config

    with dynamo_config.patch(dynamo), inductor_config.patch(inductor):
        yield


@contextmanager
def structured_trace_contained() -> Iterator[None]:
    """Keep Dynamo's structured-trace records (logger "torch.__trace") out of pytest's log capture.

    They are meant for TORCH_TRACE's own handler: every compile event logs an empty DEBUG record,
    hundreds per failing test. They reach the capture two ways: by propagating to the root logger
    (torch 2.11 leaves the logger propagating until its logging is configured), and, since pytest
    9.1, through pytest's capture handlers, which each test phase attaches to every logger that
    does not propagate. So the logger stops propagating, and the catch-all handlers (those on the
    root logger: pytest's, or a user's) drop its records; pytest reuses those handler objects in
    every phase of a test. Handlers of the logger's own (TORCH_TRACE's, triage's artifacts) still
    get every record.
    """
    import logging

    trace = logging.getLogger("torch.__trace")

    def drop(record: logging.LogRecord) -> bool:
        return record.name != trace.name

    catch_all = list(logging.getLogger().handlers)
    propagate = trace.propagate
    trace.propagate = False
    for handler in catch_all:
        handler.addFilter(drop)
    try:
        yield
    finally:
        trace.propagate = propagate
        for handler in catch_all:
            handler.removeFilter(drop)


def config_snapshot() -> tuple[dict[str, Any], dict[str, Any]]:
    """Dynamo and Inductor configs as they are now, to restore after a test changed them."""
    import torch._dynamo.config as dynamo_config
    import torch._inductor.config as inductor_config

    return dynamo_config.get_config_copy(), inductor_config.get_config_copy()


def config_restore(snapshot: tuple[dict[str, Any], dict[str, Any]]) -> None:
    """Put back only the values that changed (setting deprecated keys again would warn)."""
    import torch._dynamo.config as dynamo_config
    import torch._inductor.config as inductor_config

    for module, saved in zip((dynamo_config, inductor_config), snapshot, strict=True):
        current = module.get_config_copy()
        for key, value in saved.items():
            if current.get(key) != value:
                setattr(module, key, value)


def map_module_tensors(
    module: torch.nn.Module, fn: Callable[[torch.Tensor], torch.Tensor]
) -> torch.nn.Module:
    """Replace every parameter, buffer and gradient of `module` by `fn` of it, in place, as
    `module.to()` does: parameters keep their identity and take on the new tensor's storage."""
    applied: torch.nn.Module = module._apply(fn)  # type: ignore[no-untyped-call]
    return applied


def foreach_norm(
    tensors: tuple[torch.Tensor, ...] | list[torch.Tensor], order: float
) -> list[torch.Tensor]:
    """The `order`-norm (1, 2 or inf) of each tensor, in multi-tensor kernels whose launches do
    not grow with the number of tensors (torch._foreach_norm, the optimizers' own)."""
    return list(torch._foreach_norm(tensors, order))


def version_counter(tensor: torch.Tensor) -> int | None:
    """How many in-place writes the tensor's storage has seen (views share it); None for an
    inference tensor, which keeps no count."""
    try:
        return int(tensor._version)
    except RuntimeError:
        return None


def dict_version(mapping: dict[Any, Any]) -> int | None:
    """A number that changes whenever `mapping` is changed (an item set, replaced or removed),
    read in constant time: Dynamo's own dict-version guard (CPython's version tag, a dict
    watcher on 3.12+). None where this torch has none."""
    read = getattr(torch._C._dynamo.guards, "dict_version", None)
    return None if read is None else int(read(mapping))


@dataclasses.dataclass(frozen=True)
class ProcessSwitches:
    """What a check may switch for the whole process, as it was: captured before a check, put
    back before eager runs (the compiled side runs first, and the first torch.compile in a
    process calls `torch.distributions.Distribution.set_default_validate_args(False)`, in
    torch/_dynamo/eval_frame.py, for good) and when the check ends, so eager and the test see
    what they would see without the plugin. Grad mode, the default dtype and the
    deterministic-algorithms flags are kept the same way."""

    validate_args: bool
    grad: bool
    dtype: torch.dtype
    deterministic: bool
    warn_only: bool

    @classmethod
    def capture(cls) -> ProcessSwitches:
        return cls(
            torch.distributions.Distribution._validate_args,
            torch.is_grad_enabled(),
            torch.get_default_dtype(),
            torch.are_deterministic_algorithms_enabled(),
            torch.is_deterministic_algorithms_warn_only_enabled(),
        )

    def restore(self) -> None:
        torch.distributions.Distribution.set_default_validate_args(self.validate_args)
        torch.set_grad_enabled(self.grad)
        torch.set_default_dtype(self.dtype)
        torch.use_deterministic_algorithms(self.deterministic, warn_only=self.warn_only)


def compiled_switches() -> None:
    """Switch what torch.compile's first call in a process switches for good (TorchPatcher in
    torch/_dynamo/eval_frame.py): distributions' argument validation off. Set before each
    compiled run, so every one runs as any compiled call after the first does, whichever check
    of the session compiled first; eager runs under the user's own `ProcessSwitches`."""
    torch.distributions.Distribution.set_default_validate_args(False)


@contextmanager
def process_switches_kept() -> Iterator[None]:
    """Put back, on the way out, what a check may switch for the whole process
    (`ProcessSwitches`), and the warnings filters. The RNG is left as the eager call leaves it."""
    switches = ProcessSwitches.capture()
    with warnings.catch_warnings():  # the filters, restored on exit
        try:
            yield
        finally:
            switches.restore()


# --- the compiler's own warnings (helper "adopt") ---

# The modules whose warnings during a compile are the compiler's: torch's and Triton's.
_COMPILER_MODULES = r"(torch|functorch|triton)(\..*)?$"
_compiler_warnings_depth = 0


@contextmanager
def compiler_warnings_dropped() -> Iterator[None]:
    """While the block runs, drop the warnings torch's and Triton's own modules issue during a
    compile: Dynamo converting a frame (the backend's compile inside it) or AOTAutograd
    compiling a backward lazily.

    The checker compiles where the test did not, so those warnings are not the test's: importing
    `torch.utils.mkldnn` inside Inductor's compile issues 14 DeprecationWarnings, which under a
    `filterwarnings = error` made every Inductor check fail and otherwise filled the test's
    warnings summary. A warning is the compiler's when the frame it is attributed to (after its
    stacklevel) is in one of those modules, and only during a compile: the compiled code's own
    warnings at run time, and code of the test's that a compile runs (a fake kernel, a
    `__torch_function__`), keep the test's filters, so both sides warn or raise alike.
    """
    global _compiler_warnings_depth
    try:
        from torch._dynamo.callback import CallbackTrigger, callback_handler
    except ImportError:  # older torch: no compile callbacks to scope it by
        yield
        return
    if _compiler_warnings_depth:
        yield
        return
    compiles = {CallbackTrigger.DYNAMO, CallbackTrigger.LAZY_BACKWARD}
    entered: list[warnings.catch_warnings[None]] = []

    def on_start(args: Any) -> None:
        if args.callback_trigger in compiles:
            kept = warnings.catch_warnings()
            kept.__enter__()
            entered.append(kept)
            warnings.filterwarnings("ignore", module=_COMPILER_MODULES)

    def on_end(args: Any) -> None:
        if args.callback_trigger in compiles and entered:
            entered.pop().__exit__(None, None, None)

    _compiler_warnings_depth += 1
    callback_handler.register_start_callback(on_start)
    callback_handler.register_end_callback(on_end)
    try:
        yield
    finally:
        _compiler_warnings_depth -= 1
        while entered:  # a compile whose end callback never ran (torch._dynamo.reset() inside)
            entered.pop().__exit__(None, None, None)
        if on_start in callback_handler.start_callbacks:
            callback_handler.remove_start_callback(on_start)
        if on_end in callback_handler.end_callbacks:
            callback_handler.remove_end_callback(on_end)


# --- compile failures (lead) ---


def is_recompile_limit_error(exc: BaseException) -> bool:
    """Dynamo refused to compile again because the recompile limit was hit (fail_on_... set)."""
    from torch._dynamo import exc as dynamo_exc

    return isinstance(exc, dynamo_exc.FailOnRecompileLimitHit)


def is_graph_break_error(exc: BaseException) -> bool:
    """Dynamo could not trace something (raised instead of breaking the graph under fullgraph)."""
    from torch._dynamo import exc as dynamo_exc

    return isinstance(exc, dynamo_exc.Unsupported)


def _compile_wrappers() -> tuple[type[BaseException], ...]:
    from torch._dynamo import exc as dynamo_exc
    from torch._inductor import exc as inductor_exc

    lowering = getattr(inductor_exc, "LoweringException", None)
    return (dynamo_exc.TorchDynamoException, *([lowering] if lowering else []))


def is_compile_wrapper(exc: BaseException) -> bool:
    """An exception torch.compile raised itself (Dynamo, AOTAutograd or Inductor), not user code."""
    return isinstance(exc, _compile_wrappers())


def user_exception(exc: BaseException) -> BaseException:
    """The exception the user's code raised, under Dynamo's and Inductor's wrappers.

    Dynamo re-raises a user's error while tracing as TorchRuntimeError, whose __context__ is an
    Unsupported whose __cause__ is the original; BackendCompilerFailed keeps it as
    `inner_exception`; InternalTorchDynamoError re-raises `from None`, keeping it as __context__.
    A wrapper with nothing inside (a genuine compiler failure) is returned as it is.
    """
    wrappers = _compile_wrappers()
    seen: set[int] = set()
    current = exc
    while isinstance(current, wrappers) and id(current) not in seen:
        seen.add(id(current))
        inner = getattr(current, "inner_exception", None)
        following = inner if isinstance(inner, BaseException) else None
        following = following or current.__cause__ or current.__context__
        if following is None:
            break
        current = following
    if isinstance(current, wrappers):  # nothing but wrappers: the compiler's own failure
        return exc
    return current


# --- accounting (helper "accounting") ---

# Compilation metrics live in a bounded deque (64 by default); while a call is observed it is
# widened so that a call compiling many frames (one per graph break) loses none of them.
_METRICS_WINDOW = 100_000


@dataclasses.dataclass(frozen=True)
class CompileEvent:
    """One frame compile Dynamo finished or refused, read from its compilation metrics."""

    compile_id: str  # "3/1": the second compile of frame 3
    code_name: str | None  # None when Dynamo refused before tracing (recompile limit)
    filename: str | None
    firstlineno: int | None
    backward: bool  # AOTAutograd compiling a backward graph lazily, not a frame
    recompile_reason: str | None  # the first guard that failed, when this is a recompile
    fail_type: str | None
    fail_reason: str | None
    fail_location: tuple[str, int] | None  # innermost user frame of the failure
    recompile_limit_hit: bool
    errors_suppressed: bool  # config.suppress_errors was on
    duration_s: float

    @property
    def frame_id(self) -> str:
        return frame_id(self.compile_id)


def frame_id(compile_id: str) -> str:
    """The frame part of a compile id ("3" of "3/1"): one code object's id, the same for each
    of its compiles, and different for each resume function that continues it after a break."""
    return compile_id.rsplit("/", 1)[0]


@dataclasses.dataclass(frozen=True)
class BreakEvent:
    """One graph break Dynamo resumed from: its reason, where, and which frame compile hit it."""

    reason: str
    stack: tuple[tuple[str, int], ...]  # (filename, lineno) of the user stack, outermost first
    column: int | None  # of the breaking instruction on its line (Python 3.11+), else None
    # The compile that recorded it, "3/1"; "" when unknown (a torch without compile callbacks).
    # Its frame part tells a frame from the resume functions that continue it: two breaks on
    # one line, or one break reached in two resume functions, are recorded by different frames.
    compile_id: str


@dataclasses.dataclass
class DynamoRecords:
    """What Dynamo recorded during an observed block; filled when the block exits."""

    compiles: list[CompileEvent] = dataclasses.field(default_factory=list)
    breaks: list[BreakEvent] = dataclasses.field(default_factory=list)


def _after(items: list[Any], mark: Any) -> list[Any]:
    """The items appended after `mark` (all of them when `mark` is gone: the list was cleared)."""
    for index in range(len(items) - 1, -1, -1):
        if items[index] is mark:
            return items[index + 1 :]
    return items


def _recompile_limit_hit(fail_type: str | None, fail_reason: str | None) -> bool:
    # 2.11 and 2.13 raise Unsupported("Dynamo recompile limit exceeded ...") or, with
    # fail_on_recompile_limit_hit, FailOnRecompileLimitHit; older releases said "cache_size_limit".
    if fail_type == "FailOnRecompileLimitHit":
        return True
    text = (fail_reason or "").lower()
    return fail_type == "Unsupported" and any(
        word in text for word in ("recompile limit", "recompile_limit", "cache_size_limit")
    )


def _compile_event(metrics: Any) -> CompileEvent:
    duration_us = getattr(metrics, "duration_us", None)
    if duration_us is not None:
        duration_s = duration_us / 1e6
    else:
        duration_s = getattr(metrics, "entire_frame_compile_time_s", None) or 0.0
    fail_file = getattr(metrics, "fail_user_frame_filename", None)
    fail_line = getattr(metrics, "fail_user_frame_lineno", None)
    fail_type = getattr(metrics, "fail_type", None)
    fail_reason = getattr(metrics, "fail_reason", None)
    return CompileEvent(
        compile_id=str(getattr(metrics, "compile_id", None) or ""),
        code_name=getattr(metrics, "co_name", None),
        filename=getattr(metrics, "co_filename", None),
        firstlineno=getattr(metrics, "co_firstlineno", None),
        backward=getattr(metrics, "is_forward", True) is False,
        recompile_reason=getattr(metrics, "recompile_reason", None),
        fail_type=fail_type,
        fail_reason=fail_reason,
        fail_location=(fail_file, fail_line) if fail_file and fail_line else None,
        recompile_limit_hit=_recompile_limit_hit(fail_type, fail_reason),
        errors_suppressed=bool(getattr(metrics, "config_suppress_errors", False)),
        duration_s=float(duration_s),
    )


@contextmanager
def dynamo_records() -> Iterator[DynamoRecords]:
    """Collect Dynamo's compilation metrics and graph-break reasons recorded inside the block.

    Graph-break reasons (`torch._dynamo.utils.graph_break_reasons`) hold every break Dynamo
    resumed from, data-dependent branches and breaks before an empty graph included, which
    `counters["graph_break"]` and the backend miss. Compilation metrics hold one entry per frame
    compile, failed or refused ones included, with the guard that failed for a recompile.
    """
    from torch._dynamo import utils

    records = DynamoRecords()
    limit = utils._compilation_metrics.maxlen
    if limit is not None and limit < _METRICS_WINDOW:
        utils.set_compilation_metrics_limit(_METRICS_WINDOW)
    metrics = utils.get_compilation_metrics()
    metrics_mark = metrics[-1] if metrics else None
    breaks_mark = utils.graph_break_reasons[-1] if utils.graph_break_reasons else None
    try:
        with _break_compile_ids() as compile_ids:
            yield records
    finally:
        for entry in _after(utils.get_compilation_metrics(), metrics_mark):
            if not getattr(entry, "is_runtime", False):
                records.compiles.append(_compile_event(entry))
        for reason in _after(list(utils.graph_break_reasons), breaks_mark):
            stack = tuple((frame.filename, frame.lineno or 0) for frame in reason.user_stack)
            column = getattr(reason.user_stack[-1], "colno", None) if reason.user_stack else None
            compile_id = compile_ids.get(id(reason), "")
            records.breaks.append(BreakEvent(reason.reason, stack, column, compile_id))
        if limit is not None and limit < _METRICS_WINDOW:
            utils.set_compilation_metrics_limit(limit)


@contextmanager
def _break_compile_ids() -> Iterator[dict[int, str]]:
    """Which frame compile recorded each graph-break reason during the block (by the reason's id).

    Graph-break reasons carry no compile id, but Dynamo runs its compile callbacks around
    each frame compile, one at a time: the reasons recorded in between belong to that compile.
    """
    from torch._dynamo import utils

    compile_ids: dict[int, str] = {}
    try:
        from torch._dynamo.callback import callback_handler
    except ImportError:  # older torch: breaks keep no frame, each counts once per place
        yield compile_ids
        return
    started: list[tuple[str, Any]] = []  # (compile id, the last reason before it began)

    def on_start(*_: Any) -> None:
        mark = utils.graph_break_reasons[-1] if utils.graph_break_reasons else None
        started.append((current_compile_id(), mark))

    def on_end(*_: Any) -> None:
        if not started:  # the block began inside a compile: not ours to attribute
            return
        compile_id, mark = started.pop()
        for reason in _after(utils.graph_break_reasons, mark):
            compile_ids.setdefault(id(reason), compile_id)

    callback_handler.register_start_callback(on_start)
    callback_handler.register_end_callback(on_end)
    try:
        yield compile_ids
    finally:
        # torch._dynamo.reset() inside the block clears every callback.
        if on_start in callback_handler.start_callbacks:
            callback_handler.remove_start_callback(on_start)
        if on_end in callback_handler.end_callbacks:
            callback_handler.remove_end_callback(on_end)


MODULE_INTERNALS = frozenset(vars(torch.nn.Module()))
"""What every nn.Module holds in its `__dict__`: its tensors, submodules, hooks and bookkeeping."""

COMPILE_MARKS = frozenset({"_is_torch_compile", "_torchdynamo_orig_callable"})
"""What torch.compile writes on what it compiles (a module's `_is_torch_compile`, through its
OptimizedModule): the compiler's marks, not the program's state."""

_CALL_HOOKS = (
    "_forward_pre_hooks",
    "_forward_hooks",
    "_backward_pre_hooks",
    "_backward_hooks",
)


def module_call_hooks(module: torch.nn.Module) -> list[Callable[..., Any]]:
    """The hooks that run around a call of `module` (its own forward and backward ones)."""
    held = vars(module)
    return [hook for name in _CALL_HOOKS for hook in list(held.get(name, {}).values())]


def global_module_hooks() -> list[Callable[..., Any]]:
    """The hooks registered for every module's calls (`register_module_forward_hook`...)."""
    from torch.nn.modules import module

    names = (
        "_global_forward_pre_hooks",
        "_global_forward_hooks",
        "_global_backward_pre_hooks",
        "_global_backward_hooks",
    )
    return [hook for name in names for hook in list(getattr(module, name, {}).values())]


def is_compiled_module(module: torch.nn.Module) -> bool:
    """Whether `module` is what torch.compile returned for a module (an OptimizedModule)."""
    from torch._dynamo.eval_frame import OptimizedModule

    return isinstance(module, OptimizedModule)


def current_compile_id() -> str:
    """The compile id ("frame/attempt") of the frame Dynamo is compiling now, or ""."""
    from torch._guards import CompileContext

    compile_id = CompileContext.current_compile_id()
    return "" if compile_id is None else str(compile_id)


def graph_end_reason(gm: torch.fx.GraphModule) -> str:
    """Dynamo's compile_subgraph_reason for a graph handed to the backend: why it ended."""
    reason = getattr(gm, "compile_subgraph_reason", None)
    return str(getattr(reason, "reason", "")) if reason is not None else ""


def exception_compile_ids(exc: BaseException) -> set[str]:
    """Compile ids of the frame compiles whose failure is `exc` (or one of its causes).

    Dynamo tags a failing compile's exception with its compile id; a failure that reached the
    caller was not swallowed into an eager fallback.
    """
    ids: set[str] = set()
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        compile_id = getattr(current, "compile_id", None)
        if compile_id is not None:
            ids.add(str(compile_id))
        current = current.__cause__ or current.__context__
    return ids


def recompile_limit_setting() -> str:
    """The recompile limit as a user would set it, for messages."""
    import torch._dynamo.config as dynamo_config

    name = "recompile_limit" if hasattr(dynamo_config, "recompile_limit") else "cache_size_limit"
    return f"torch._dynamo.config.{name}={getattr(dynamo_config, name)}"


def strict_recompile_limit() -> dict[str, Any]:
    """Config that makes hitting the recompile limit an error instead of a silent eager run.

    Dynamo rejects it together with suppress_errors; then nothing is set and accounting reports
    the limit from the compilation metrics instead.
    """
    import torch._dynamo.config as dynamo_config

    if getattr(dynamo_config, "suppress_errors", False):
        return {}
    for name in ("fail_on_recompile_limit_hit", "fail_on_cache_limit_hit"):
        if hasattr(dynamo_config, name):
            return {name: True}
    return {}


# --- CUDA graphs (lead) ---


@dataclasses.dataclass(frozen=True)
class CudagraphRecording:
    """One CUDA graph cudagraph trees recorded."""

    compile_id: str  # "0/1"; Inductor names every graph's partitions alike, this tells them apart
    function: str  # Inductor's name for the recorded function, e.g. "partition_0"
    mode: str  # "FORWARD", "BACKWARD" or "INFERENCE" (torch 2.11: from the autograd state)
    reason: str  # Inductor's reason when it re-records a function it had recorded, else ""
    # Its tensor inputs' sizes, "[8], [2, 8]": a dynamic-shape graph records one graph per size.
    sizes: str


@dataclasses.dataclass
class CudagraphEvents:
    """What cudagraph trees did during a block, read from Inductor's "cudagraphs" log."""

    recordings: list[CudagraphRecording] = dataclasses.field(default_factory=list)
    skips: list[str] = dataclasses.field(default_factory=list)  # "skipping cudagraphs due to ..."


_COMPILE_ID = r"\[(?P<compile_id>[^\]]+)\] "
# torch 2.11 logs "Recording function=F, cuda_graph_id=..."; 2.13 adds "mode=M, " after F.
_RECORDING = re.compile(
    _COMPILE_ID + r"Recording function=(?P<function>[^,]+),(?: mode=(?P<mode>\w+),)?"
)
_RERECORDING = re.compile(
    _COMPILE_ID
    + r"Re-recording function=(?P<function>[^,]+),(?: mode=(?P<mode>\w+),)? reason=(?P<why>.*)",
    re.S,
)
_INPUT_SIZE = re.compile(r"Tensor\(size=(\[[^\]]*\])")
_SKIP = re.compile(r"skipping cudagraphs due to (?P<why>.*)", re.S)


def _autograd_phase() -> str:
    """Which pass is running, BACKWARD or FORWARD: torch 2.11 logs no mode with a recording and
    names a graph's forward and backward functions alike."""
    return "BACKWARD" if torch._C._current_graph_task_id() != -1 else "FORWARD"


@contextmanager
def cudagraph_events() -> Iterator[CudagraphEvents]:
    """The CUDA graphs cudagraph trees records, re-records or skips during the block.

    Inductor only logs recordings at debug level, so the block lowers its CUDA-graph loggers to
    debug and reads every record; only those the user's logging settings would have shown
    (TORCH_LOGS=cudagraphs, or warnings) go on to the user's handlers.
    """
    import logging

    from torch._inductor import cudagraph_trees, cudagraph_utils

    events = CudagraphEvents()
    pending: dict[tuple[str, str, str], str] = {}  # (compile id, function, mode) -> why

    def keep(record: logging.LogRecord) -> None:
        text = record.getMessage()
        if match := _RERECORDING.search(text):
            key = match["compile_id"], match["function"], match["mode"] or _autograd_phase()
            pending[key] = " ".join(match["why"].split())
        elif match := _RECORDING.search(text):
            key = match["compile_id"], match["function"], match["mode"] or _autograd_phase()
            sizes = ", ".join(_INPUT_SIZE.findall(text))
            events.recordings.append(CudagraphRecording(*key, pending.pop(key, ""), sizes))
        elif match := _SKIP.search(text):
            events.skips.append(" ".join(match["why"].split()))

    saved: list[tuple[logging.Logger, int, Callable[[logging.LogRecord], bool]]] = []
    for logger in (cudagraph_trees.log, getattr(cudagraph_utils, "cudagraphs_log", None)):
        if logger is None:
            continue
        gate = functools.partial(_gate, keep, logger.getEffectiveLevel())
        saved.append((logger, logger.level, gate))
        logger.addFilter(gate)
        logger.setLevel(logging.DEBUG)
    try:
        yield events
    finally:
        for logger, level, installed in saved:
            logger.removeFilter(installed)
            logger.setLevel(level)


def _gate(keep: Callable[[Any], None], shown: int, record: Any) -> bool:
    """A log filter: every record goes to keep(); only those the user's settings showed go on."""
    keep(record)
    return bool(record.levelno >= shown)


# --- triage (helper "triage") ---


@contextmanager
def structured_trace(log_file: str, on_artifact: Callable[[str, str], None]) -> Iterator[None]:
    """What TORCH_TRACE records, for a block: torch's structured trace written to `log_file`
    (the format `tlparse` reads), and each named artifact with a payload (Dynamo graphs, AOT
    graphs, Inductor's output code, ...) handed to `on_artifact(name, payload)` as it is logged.

    TORCH_TRACE itself is read once at import; this attaches the same kind of handler to torch's
    trace logger for the block only, so tests that pass pay nothing.
    """
    import logging

    from torch._logging._internal import TorchLogsFormatter, trace_log

    class _Split(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            metadata = getattr(record, "metadata", None)
            payload = getattr(record, "payload", None)
            if isinstance(metadata, dict) and metadata and isinstance(payload, str):
                on_artifact(str(next(iter(metadata))), payload)

    writer = logging.FileHandler(log_file, encoding="utf-8")
    writer.setFormatter(TorchLogsFormatter(trace=True))
    split = _Split()
    level = trace_log.level
    trace_log.setLevel(logging.DEBUG)
    trace_log.addHandler(writer)
    trace_log.addHandler(split)
    try:
        with structured_trace_contained():  # triage runs after the check's own containment
            yield
    finally:
        trace_log.removeHandler(split)
        trace_log.removeHandler(writer)
        writer.close()
        trace_log.setLevel(level)


def compiler_bisect(passes: Callable[[str], bool]) -> str | None:
    """Inductor's own bisector (torch._inductor.compiler_bisector, where torch has it): which
    backend, subsystem and application of it first makes `passes(backend)` False, in words.

    `passes` compiles with the backend it is given and says whether eager and compiled agree.
    None when this torch has no bisector or it found nothing.
    """
    try:
        from torch._inductor.compiler_bisector import CompilerBisector
    except ImportError:
        return None

    def check() -> bool:
        return passes(CompilerBisector.get_backend() or "inductor")

    result = CompilerBisector.do_bisect(check)
    if result is None:
        return None
    found = f"backend {result.backend}"
    if result.subsystem is not None:
        found += f", subsystem {result.subsystem}"
    if result.bisect_number is not None:
        found += f", its application number {result.bisect_number}"
    if result.debug_info:
        found += f" ({' '.join(str(result.debug_info).split())[:300]})"
    return found


def dispatch_mode_base() -> type[Any]:
    """torch's TorchDispatchMode (in a private module), for modes that see every ATen call."""
    from torch.utils._python_dispatch import TorchDispatchMode

    return TorchDispatchMode


def computes(func: Any) -> bool:
    """Whether ATen overload `func` computes new values: not a view, not an in-place or out= op.

    Views alias their input and compute nothing; ops that write into an argument return it, so
    their result cannot be replaced by another tensor.
    """
    schema = getattr(func, "_schema", None)  # higher-order operators have none: left alone
    return schema is not None and all(ret.alias_info is None for ret in schema.returns)


def compiler_decompositions() -> Mapping[Any, Callable[..., Any]]:
    """Inductor's decomposition table: how a compiler breaks fused ATen ops into primitives."""
    from torch._inductor.decomposition import select_decomp_table

    return select_decomp_table()


def argument(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any], name: str) -> Any:
    """The value ATen overload `func` was called with for its argument `name`, positional or
    keyword, its schema's default where the call left it out (None where it has none)."""
    schema = getattr(func, "_schema", None)
    for index, parameter in enumerate(schema.arguments if schema is not None else ()):
        if parameter.name == name:
            if name in kwargs:
                return kwargs[name]
            return args[index] if index < len(args) else parameter.default_value
    return None


def op_name(func: Any) -> str:
    """The ATen name of overload `func`, without namespace or overload: "embedding"."""
    schema = getattr(func, "_schema", None)
    return str(schema.name).split("::")[-1] if schema is not None else str(func)


# --- environment faults (helper "repro") ---


def inductor_cache_dirs() -> list[str]:
    """The directories Inductor and Triton keep compiled artifacts in, as this process sees them.

    Read without creating them (Inductor's own cache_dir() makes the directory and pins it in
    the environment).
    """
    import os

    from torch._inductor.runtime.cache_dir_utils import default_cache_dir

    inductor = os.environ.get("TORCHINDUCTOR_CACHE_DIR") or default_cache_dir()
    triton = os.environ.get("TRITON_CACHE_DIR") or os.path.join(
        os.path.expanduser("~"), ".triton", "cache"
    )
    return [os.path.abspath(inductor), os.path.abspath(triton)]


@contextmanager
def fresh_inductor_cache() -> Iterator[None]:
    """A new, empty temporary Inductor (and Triton) cache directory for a block, removed after;
    Inductor's in-memory caches are cleared on the way in and out, and so are its CPU ISA
    probes, which torch's fresh cache keeps (see `_forget_vec_isa_probes`)."""
    from torch._inductor import utils

    fresh = getattr(utils, "fresh_cache", None) or utils.fresh_inductor_cache
    _forget_vec_isa_probes()
    with fresh():
        yield


def _forget_vec_isa_probes() -> None:
    """Clear what Inductor remembers, once per process, of which vector ISAs this CPU compiles.

    Each probe builds a small `.so` into the cache directory, reused by later processes; an
    empty one (a run killed while writing it) fails the probe, Inductor then compiles kernels
    that use `at::vec` without its headers, and g++ says "'at::vec' has not been declared". The
    answer is cached per process, so a retry in a fresh cache must probe again. The result found
    there is kept: it is this machine's."""
    from torch._inductor import cpu_vec_isa

    for value in vars(cpu_vec_isa).values():
        owned = [value, *vars(value).values()] if isinstance(value, type) else [value]
        for item in owned:
            if getattr(item, "__module__", None) == cpu_vec_isa.__name__:
                clear = getattr(item, "cache_clear", None)
                if callable(clear):
                    clear()


def is_cpp_compile_error(exc: BaseException) -> bool:
    """Inductor's C++ compiler invocation failed (the compiler's output is in the message)."""
    from torch._inductor import exc as inductor_exc

    return isinstance(exc, inductor_exc.CppCompileError)


def is_backend_compile_failure(exc: BaseException) -> bool:
    """A failure inside the backend compiler: Dynamo's BackendCompilerFailed around whatever the
    backend raised (Inductor's InductorError is one), or one of Inductor's own compile errors
    raised as it is (a C++ compile error, a lowering error)."""
    from torch._dynamo.exc import BackendCompilerFailed
    from torch._inductor import exc as inductor_exc

    return isinstance(exc, BackendCompilerFailed) or type(exc).__module__ == inductor_exc.__name__


def pytree_children(value: Any) -> list[tuple[str, Any]] | None:
    """One level of a value whose type is registered with torch's pytree, or None.

    Each child comes with the suffix torch's key path gives it (`[0]`, `['k']`, `.name`); a
    registration without keys numbers its children.
    """
    from torch.utils import _pytree

    node = _pytree.SUPPORTED_NODES.get(type(value))
    if node is None:
        return None
    if node.flatten_with_keys_fn is not None:
        keyed, _ = node.flatten_with_keys_fn(value)
        return [(str(key), child) for key, child in keyed]
    children, _ = node.flatten_fn(value)
    return [(f"[{index}]", child) for index, child in enumerate(children)]


# --- the export paths (helper "export-paths") ---


def aoti_package(
    program: torch.export.ExportedProgram, package_path: str, configs: dict[str, Any]
) -> str:
    """An exported program compiled by AOTInductor into a .pt2 package at `package_path`."""
    from torch._inductor import aoti_compile_and_package

    return aoti_compile_and_package(program, package_path=package_path, inductor_configs=configs)


def aoti_load(package_path: str, device_index: int) -> Callable[..., Any]:
    """A loaded AOTInductor package, callable as the exported program's module is."""
    from torch._inductor import aoti_load_package

    return aoti_load_package(package_path, device_index=device_index)


def aoti_bind_constants(loaded: Any, tensors: Mapping[str, torch.Tensor]) -> None:
    """Make the package read and write `tensors` (by fully qualified name) in place of the
    weights it was packaged with: a mutated buffer lands in the caller's tensor, and a weight
    changed between calls is seen by the next. Every constant the package has must be given."""
    wanted = loaded.get_constant_fqns()
    missing = sorted(set(wanted) - set(tensors))
    if missing:
        raise RuntimeError(f"the package has constants the program has no tensor for: {missing}")
    chosen = {name: tensors[name] for name in wanted}
    loaded.load_constants(chosen, check_full_update=True, user_managed=True)


class LoaderCrash(RuntimeError):
    """AOTInductor's package loader crashed the separate process that tried it first."""

    def __init__(self, crash: str, package: str) -> None:
        super().__init__(
            f"AOTInductor's package loader crashed ({crash}) in a separate process, on torch "
            f'{torch.__version__}; the same without the plugin: python -c "import torch; '
            f"torch._inductor.aoti_load_package('{package}')\""
        )
        self.package = package


def aoti_load_crash(package_path: str, timeout_s: float = 180.0) -> str | None:
    """How AOTInductor's loader dies loading `package_path` in a separate process ("signal
    SIGSEGV", or "no answer within 180 s"), or None where it loads (or fails with an exception,
    which an in-process load reports as such). A crash in this process would take the whole test
    session with it."""
    import signal
    import subprocess
    import sys

    code = "import sys, torch; torch._inductor.aoti_load_package(sys.argv[1])"
    try:
        done = subprocess.run(
            [sys.executable, "-c", code, package_path],
            capture_output=True,
            timeout=timeout_s,
            preexec_fn=_no_core_dump,
        )
    except subprocess.TimeoutExpired:
        return f"no answer within {timeout_s:.0f} s"
    if done.returncode >= 0:
        return None
    try:
        return f"signal {signal.Signals(-done.returncode).name}"
    except ValueError:
        return f"signal {-done.returncode}"


def _no_core_dump() -> None:
    """In the loader's child: a crashing CUDA process can spend minutes writing a core file of
    its whole address space, and the signal alone names the crash."""
    import resource

    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


# --- compile caches (helper "cache") ---


def local_pgo_off() -> Callable[[], None]:
    """Turn Dynamo's local automatic-dynamic profiles off in a Dynamo config already loaded
    (one loaded later reads TORCH_DYNAMO_AUTOMATIC_DYNAMIC_LOCAL_PGO); returns the undo."""
    import sys

    if "torch._dynamo.config" not in sys.modules:
        return lambda: None
    import torch._dynamo.config as dynamo_config

    before = dynamo_config.automatic_dynamic_local_pgo
    dynamo_config.automatic_dynamic_local_pgo = False

    def restore() -> None:
        dynamo_config.automatic_dynamic_local_pgo = before

    return restore


def compile_cache_counts() -> dict[str, int]:
    """How often this process's compiles hit, missed or bypassed AOTAutograd's and Inductor's
    on-disk caches, by torch's counter names ("autograd_cache_hit", "fxgraph_cache_miss").
    Empty where Dynamo was never loaded: nothing was compiled, and nothing is imported."""
    import sys

    if "torch._dynamo.utils" not in sys.modules:
        return {}
    from torch._dynamo.utils import counters

    return {
        name: int(count)
        for group in ("aot_autograd", "inductor")
        for name, count in counters[group].items()
        if name.startswith(("autograd_cache_", "fxgraph_cache_"))
    }


# --- Hypothesis (strategies) ---


def hypothesis_local_floats() -> tuple[float, ...] | None:
    """The float literals Hypothesis has collected from the local modules loaded so far (not
    test files, not installed packages: its own rule), which it returns now and then where a
    strategy draws a float; None where this Hypothesis keeps no such collection."""
    try:
        from hypothesis.internal.conjecture.providers import _get_local_constants

        return tuple(_get_local_constants().floats)
    except Exception:  # another Hypothesis: the caller draws floats for them instead
        return None


def hypothesis_test_function() -> Callable[..., Any] | None:
    """The test function that `@given` wraps, while Hypothesis runs one of its examples (the
    build context a strategy is drawn in); None outside one or where this Hypothesis keeps
    none. Read at the draw, it is the test of this very process: right under xdist too."""
    try:
        from hypothesis.control import current_build_context, currently_in_test_context

        if not currently_in_test_context():
            return None
        wrapped: Any = current_build_context().wrapped_test
        test: Callable[..., Any] = wrapped.hypothesis.inner_test
        return test
    except Exception:  # another Hypothesis: the test's own literals are not offered
        return None
