"""Running one callable eagerly and compiled from identical state: copies, RNG, backward, exceptions.

The eager side runs on the caller's own module and inputs, so after a check the caller sees what a
plain call would have left. The compiled side runs on copies: a module is copied once per test and
its state is synced from the caller's module before every call, so one compiled module (and one
Dynamo cache) sees the whole sequence of calls, guards and recompiles as a real program would.
"""

from __future__ import annotations

import copy
import functools
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import torch

from pytest_torchcompile import _compat, parity
from pytest_torchcompile.accounting import Accountant
from pytest_torchcompile.errors import (
    CompileParityFailure,
    GraphBreakBudgetExceeded,
    ParityError,
    RecompileLimitExceeded,
)
from pytest_torchcompile.records import CompileCounts, LeafError
from pytest_torchcompile.settings import Settings, apply, load_backend_callable

COTANGENT_SEED = 20240613  # fixed, so eager and compiled backward get the same cotangents
_UPCAST = {
    torch.float16: torch.float64,
    torch.bfloat16: torch.float64,
    torch.float32: torch.float64,
    torch.complex32: torch.complex128,
    torch.complex64: torch.complex128,
}


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


# --- copies -----------------------------------------------------------------------------------


def _leaves(tree: Any) -> Iterator[Any]:
    """Tensors and modules directly inside tuples, lists and dicts (where inputs usually sit)."""
    if isinstance(tree, (tuple, list)):
        for item in tree:
            yield from _leaves(item)
    elif isinstance(tree, dict):
        for item in tree.values():
            yield from _leaves(item)
    else:
        yield tree


def clone_tree(tree: Any, memo: dict[int, Any] | None = None) -> Any:
    """A deep copy whose tensors keep their strides, storage offsets and aliasing.

    torch's own deepcopy of a tensor copies its storage once per deepcopy call and rebuilds the
    view, so `x` and `x[1:]` stay views of one copied storage. Non-leaf tensors (which deepcopy
    refuses) are copied detached, keeping requires_grad, as a fresh leaf. Objects already in
    `memo` are replaced by what it maps them to.
    """
    memo = {} if memo is None else memo
    for leaf in _leaves(tree):
        if isinstance(leaf, torch.Tensor) and leaf.grad_fn is not None:
            memo[id(leaf)] = copy.deepcopy(leaf.detach(), memo).requires_grad_(leaf.requires_grad)
    return copy.deepcopy(tree, memo)


def upcast_tree(tree: Any) -> Any:
    """A copy with floating tensors and modules in float64 (complex in complex128), for the reference."""
    copied = clone_tree(tree)

    def convert(obj: Any) -> Any:
        if isinstance(obj, torch.Tensor):
            target = _UPCAST.get(obj.dtype)
            if target is None:
                return obj
            return obj.detach().to(target).requires_grad_(obj.requires_grad)
        if isinstance(obj, torch.nn.Module):
            return obj.to(torch.float64)
        if isinstance(obj, (tuple, list)):
            converted = [convert(item) for item in obj]
            return type(obj)(converted) if isinstance(obj, list) else _rebuild_tuple(obj, converted)
        if isinstance(obj, dict):
            return type(obj)((key, convert(value)) for key, value in obj.items())
        return obj

    return convert(copied)


def nudged_tree(tree: Any) -> Any:
    """A copy with every floating value moved by -1, 0 or +1 unit in the last place, at random.

    Eager on this copy shows how far rounding-level changes move the result: the noise floor a
    correct compiler cannot be held below. Storages are nudged once each, so views and aliases
    of one storage stay consistent.
    """
    copied = clone_tree(tree)
    generator = torch.Generator().manual_seed(COTANGENT_SEED)
    seen: set[int] = set()
    with torch.no_grad():
        for tensor in _tensors_within(copied):
            storage = tensor.untyped_storage()
            if (
                not tensor.is_floating_point()
                or storage.data_ptr() in seen
                or storage.nbytes() == 0
            ):
                continue
            seen.add(storage.data_ptr())
            flat = torch.empty(0, dtype=tensor.dtype, device=tensor.device).set_(storage)
            steps = torch.randint(-1, 2, flat.shape, generator=generator).to(flat.device)
            ulp = torch.finfo(flat.dtype).eps * flat.abs().to(torch.float64)
            flat.copy_(flat.to(torch.float64) + steps * ulp)
    return copied


def _tensors_within(tree: Any) -> Iterator[torch.Tensor]:
    for leaf in _leaves(tree):
        if isinstance(leaf, torch.Tensor):
            yield leaf
        elif isinstance(leaf, torch.nn.Module):
            yield from leaf.parameters()
            yield from leaf.buffers()


def _rebuild_tuple(original: tuple[Any, ...], items: list[Any]) -> tuple[Any, ...]:
    if hasattr(original, "_fields"):  # namedtuple
        return type(original)(*items)
    return type(original)(items)


def sync_module(source: torch.nn.Module, target: torch.nn.Module) -> None:
    """Make `target` (the compiled side's copy) hold `source`'s state, keeping its identity.

    Parameters and buffers are copied in place, and plain Python attributes (training flags,
    scales, counters) are copied over, so the compiled module's guards see what the caller's
    module holds, as they would if the caller had compiled it directly.
    """
    source_modules = dict(source.named_modules(remove_duplicate=False))
    target_modules = dict(target.named_modules(remove_duplicate=False))
    if source_modules.keys() != target_modules.keys():
        raise _Restructured
    with torch.no_grad():
        for name, src in source_modules.items():
            dst = target_modules[name]
            for attr, value in vars(src).items():
                if attr.startswith("_") or isinstance(value, (torch.Tensor, torch.nn.Module)):
                    continue
                if isinstance(value, (bool, int, float, str, type(None), tuple)):
                    setattr(dst, attr, value)
            for kind in ("_parameters", "_buffers"):
                src_tensors, dst_tensors = getattr(src, kind), getattr(dst, kind)
                if src_tensors.keys() != dst_tensors.keys():
                    raise _Restructured
                for key, tensor in src_tensors.items():
                    other = dst_tensors[key]
                    if tensor is None or other is None:
                        if (tensor is None) != (other is None):
                            raise _Restructured
                        continue
                    if tensor.shape != other.shape or tensor.dtype != other.dtype:
                        raise _Restructured
                    other.copy_(tensor)
                    other.requires_grad_(tensor.requires_grad)
                    if isinstance(tensor, torch.nn.Parameter):
                        other.grad = None if tensor.grad is None else tensor.grad.clone()


class _Restructured(Exception):
    """The caller changed the module's structure; the compiled side starts from a new copy."""


# --- state the check compares ------------------------------------------------------------------


def _input_name(key: int | str) -> str:
    return f"input {key}" if isinstance(key, int) else f"input {key!r}"


def _named_inputs(args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> list[tuple[str, Any]]:
    return [(_input_name(i), a) for i, a in enumerate(args)] + [
        (_input_name(k), v) for k, v in kwargs.items()
    ]


def _module_state(module: torch.nn.Module, owner: str) -> dict[str, Any]:
    prefix = f"{owner}: " if owner else ""
    state: dict[str, Any] = {}
    for name, param in module.named_parameters():
        state[f"{prefix}parameter {name!r}"] = param.detach()
        if param.grad is not None:
            state[f"{prefix}.grad of parameter {name!r}"] = param.grad.detach()
    for name, buffer in module.named_buffers():
        state[f"{prefix}buffer {name!r}"] = buffer.detach()
    return state


def _optimizer_state(optimizer: torch.optim.Optimizer, owner: str) -> dict[str, Any]:
    state: dict[str, Any] = {}
    for g, group in enumerate(optimizer.param_groups):
        for p, param in enumerate(group["params"]):
            for key, value in optimizer.state.get(param, {}).items():
                if isinstance(value, torch.Tensor):
                    state[f"{owner}: optimizer state[{key!r}] of param_groups[{g}][{p}]"] = (
                        value.detach()
                    )
    return state


def _state_after(
    module: torch.nn.Module | None, args: tuple[Any, ...], kwargs: Mapping[str, Any]
) -> dict[str, Any]:
    """Everything a call may have changed, by display name: inputs, module and optimizer state."""
    state: dict[str, Any] = {}
    if module is not None:
        state.update(_module_state(module, ""))
    for name, value in _named_inputs(args, kwargs):
        for position, leaf in enumerate(_leaves(value)):
            label = name if leaf is value else f"{name}[{position}]"
            if isinstance(leaf, torch.Tensor):
                state[f"{label} after the call"] = leaf.detach()
            elif isinstance(leaf, torch.nn.Module):
                state.update(_module_state(leaf, label))
            elif isinstance(leaf, torch.optim.Optimizer):
                state.update(_optimizer_state(leaf, label))
    return state


def _grad_targets(
    module: torch.nn.Module | None, args: tuple[Any, ...], kwargs: Mapping[str, Any]
) -> dict[str, torch.Tensor]:
    """Leaf tensors whose gradients the check compares: inputs, then parameters."""
    targets: dict[str, torch.Tensor] = {}
    for name, value in _named_inputs(args, kwargs):
        if isinstance(value, torch.Tensor) and value.requires_grad and value.is_leaf:
            targets[f"grad of {name}"] = value
    if module is not None:
        for pname, param in module.named_parameters():
            if param.requires_grad:
                targets[f"grad of parameter {pname!r}"] = param
    return targets


def _differentiable_outputs(output: Any) -> list[torch.Tensor]:
    found: list[torch.Tensor] = []

    def visit(obj: Any) -> None:
        if isinstance(obj, torch.Tensor):
            if obj.requires_grad and (obj.is_floating_point() or obj.is_complex()):
                found.append(obj)
        elif isinstance(obj, (tuple, list)):
            for item in obj:
                visit(item)
        elif isinstance(obj, dict):
            for item in obj.values():
                visit(item)
        elif hasattr(obj, "__dataclass_fields__"):
            for name in obj.__dataclass_fields__:
                visit(getattr(obj, name))

    visit(output)
    return found


def _cotangent(output: torch.Tensor, index: int, like: torch.dtype | None) -> torch.Tensor:
    """The same random cotangent for the index-th differentiable output on every side.

    Drawn from its own generator (the global RNG is untouched) in float32, rounded to the eager
    output's dtype (`like`, for the float64 reference) and then to this output's dtype.
    """
    dtype = like or output.dtype
    generator = torch.Generator(device=output.device).manual_seed(COTANGENT_SEED + index)
    base = torch.complex64 if dtype.is_complex else torch.float32
    drawn = torch.randn(output.shape, dtype=base, device=output.device, generator=generator)
    return drawn.to(dtype).to(output.dtype)


# --- one side ---------------------------------------------------------------------------------


@dataclass
class _Side:
    """How to run one side: the callable, its own module (if any) and inputs."""

    call: Callable[..., Any]
    module: torch.nn.Module | None
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    cotangent_dtypes: list[torch.dtype] | None = None  # eager's output dtypes, for the reference
    cudagraphs: bool = False  # outputs live in a CUDA graph's memory until the next replay


def _run_side(side: _Side, backward: bool, around: Callable[[], Any]) -> parity.SideResult:
    """Call, then backward with the shared cotangents; exceptions become part of the result."""
    targets = _grad_targets(side.module, side.args, side.kwargs) if backward else {}
    try:
        with around():
            if side.cudagraphs:
                torch.compiler.cudagraph_mark_step_begin()  # type: ignore[no-untyped-call]
            output = side.call(*side.args, **side.kwargs)
            _synchronize()
    except Exception as exc:  # the other side must raise the same type; parity decides
        return parity.SideResult(output=None, exception=exc, after={}, grads={})
    grads: dict[str, Any] = {}
    outputs = _differentiable_outputs(output) if backward else []
    if outputs and targets:
        likes = side.cotangent_dtypes or []
        cotangents = [
            _cotangent(o, i, likes[i] if i < len(likes) else None) for i, o in enumerate(outputs)
        ]
        try:
            with around():
                computed = torch.autograd.grad(
                    outputs, list(targets.values()), cotangents, allow_unused=True
                )
                _synchronize()
        except Exception as exc:
            return parity.SideResult(
                output=output, exception=exc, after={}, grads={}, raised_in_backward=True
            )
        grads = {
            name: None if g is None else g.detach()
            for name, g in zip(targets, computed, strict=True)
        }
    return parity.SideResult(
        output=_owned(output) if side.cudagraphs else output,
        exception=None,
        after=_state_after(side.module, side.args, side.kwargs),
        grads=grads,
    )


def _owned(output: Any) -> Any:
    """Copies of a CUDA-graph replay's outputs, which the next replay would overwrite."""
    if isinstance(output, torch.Tensor):
        return output.clone()
    if isinstance(output, (tuple, list)):
        items = [_owned(item) for item in output]
        return items if isinstance(output, list) else _rebuild_tuple(output, items)
    if isinstance(output, dict):
        return type(output)((key, _owned(value)) for key, value in output.items())
    return output


def _synchronize() -> None:
    """Wait for queued CUDA work, so results and timings are final before they are read."""
    if torch.cuda.is_available() and torch.cuda.is_initialized():  # type: ignore[no-untyped-call]
        torch.cuda.synchronize()


@contextmanager
def _nothing() -> Iterator[None]:
    yield


# --- RNG ----------------------------------------------------------------------------------------


@dataclass
class _RngState:
    cpu: torch.Tensor
    cuda: list[torch.Tensor] | None

    @classmethod
    def capture(cls) -> _RngState:
        cuda = torch.cuda.get_rng_state_all() if torch.cuda.is_initialized() else None  # type: ignore[no-untyped-call]
        return cls(torch.random.get_rng_state(), cuda)

    def restore(self) -> None:
        torch.random.set_rng_state(self.cpu)
        if self.cuda is not None:
            torch.cuda.set_rng_state_all(self.cuda)


# --- the checker --------------------------------------------------------------------------------


@dataclass
class _Compiled:
    original: Callable[..., Any]  # kept alive so its id is never reused for another callable
    module_copy: torch.nn.Module | None
    compiled: Callable[..., Any]


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
        self.devices_seen: list[str] = []
        self.largest_errors: dict[str, LeafError] = {}
        self.wall_time_s = 0.0
        self.last_report: parity.ParityReport | None = None  # the latest call's leaf verdicts
        self._compiled: dict[int, _Compiled] = {}
        # id -> (caller's module, its compiled-side copy); the module is kept so ids stay unique
        self._module_copies: dict[int, tuple[torch.nn.Module, torch.nn.Module]] = {}
        self._backend: Any = None
        self._recompiles_before_cache = 0  # recompiles counted before the current compile cache

    def __call__(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> ParityResult:
        """Run `fn(*args, **kwargs)` eagerly and compiled and fail unless they agree."""
        __tracebackhide__ = True
        return self.check(fn, args, kwargs)

    # compile ------------------------------------------------------------------------------------

    def _backend_object(self) -> Any:
        if self._backend is None:
            name = self.settings.backend
            target: Any = load_backend_callable(name) if ":" in name else name
            mode = None if self.settings.mode == "default" else self.settings.mode
            inner = _compat.inner_backend(target, mode, self.settings.torch_dynamic)
            self._backend = self.accountant.backend(inner)
        return self._backend

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
            except _Restructured:
                pass
        copied = clone_tree(module)
        self._module_copies[id(module)] = (module, copied)
        return copied, True

    def _copies_of_modules(self, tree: Any) -> dict[int, Any]:
        """A deepcopy memo mapping each module among the inputs, and its state, to its copy."""
        memo: dict[int, Any] = {}
        for leaf in _leaves(tree):
            if isinstance(leaf, torch.nn.Module):
                copied, _ = self._module_copy(leaf)
                memo[id(leaf)] = copied
                originals = dict(leaf.named_parameters()) | dict(leaf.named_buffers())
                copies = dict(copied.named_parameters()) | dict(copied.named_buffers())
                memo.update((id(originals[name]), copies[name]) for name in originals)
        return memo

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
        started = time.perf_counter()
        self.calls += 1
        self._note_devices(fn, args, kwargs)
        module = fn if isinstance(fn, torch.nn.Module) else None
        pristine = clone_tree((module, args, dict(kwargs)))
        backward = self.settings.backward
        rng = _RngState.capture()
        compiled_result = self._run_compiled(fn, args, kwargs)
        limit_hit = compiled_result.exception is not None and _compat.is_recompile_limit_error(
            compiled_result.exception
        )
        if self.examples and limit_hit:
            self._start_fresh_cache()
            rng.restore()
            compiled_result = self._run_compiled(fn, args, kwargs)
        rng.restore()
        eager_result = _run_side(_Side(fn, module, args, dict(kwargs)), backward, _nothing)
        after_eager = _RngState.capture()

        def rerun(copier: Callable[[Any], Any]) -> Callable[[], parity.SideResult]:
            def run() -> parity.SideResult:
                ref_module, ref_args, ref_kwargs = copier(pristine)
                call = ref_module if ref_module is not None else fn
                rng.restore()
                try:
                    likes = [o.dtype for o in _differentiable_outputs(eager_result.output)]
                    side = _Side(call, ref_module, ref_args, ref_kwargs, likes)
                    return _run_side(side, backward, _nothing)
                finally:
                    after_eager.restore()

            return run

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
            perturbed=rerun(nudged_tree),
        )
        self.last_report = report
        errors = self._record_errors(report)
        self.wall_time_s += time.perf_counter() - started
        self._raise_compile_failure(compiled_result.exception, eager_result.exception)
        if not report.ok:
            raise ParityError(report.failure_message() + self._inputs_note(args, kwargs))
        if eager_result.exception is not None:
            self.accountant.excuse_last_call()
            raise eager_result.exception  # both sides raised alike: behave like the plain call
        return ParityResult(
            eager=eager_result.output,
            compiled=compiled_result.output,
            errors=errors,
            counts=self.accountant.counts(),
            report=report,
        )

    def _run_compiled(
        self, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: Mapping[str, Any]
    ) -> parity.SideResult:
        """The compiled side, on copies of the caller's inputs and modules (left untouched)."""
        entry = self._compiled_for(fn)
        compiled_args, compiled_kwargs = clone_tree(
            (args, dict(kwargs)), self._copies_of_modules((args, dict(kwargs)))
        )
        side = _Side(
            entry.compiled,
            entry.module_copy,
            compiled_args,
            compiled_kwargs,
            cudagraphs=self.settings.uses_cudagraphs,
        )
        around = functools.partial(
            self.accountant.observe,
            module=entry.module_copy,
            cudagraphs=self.settings.uses_cudagraphs,
        )
        return _run_side(side, self.settings.backward, around)

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
        if compiled is None or (eager is not None and isinstance(compiled, type(eager))):
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

    def _note_devices(self, fn: Any, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> None:
        tensors = [leaf for leaf in _leaves((args, dict(kwargs))) if isinstance(leaf, torch.Tensor)]
        if isinstance(fn, torch.nn.Module):
            tensors += list(fn.parameters())[:1]
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

        lines = [
            f"  {name}: {describe(value)}"
            for name, value in _named_inputs(args, kwargs)
            if isinstance(value, torch.Tensor)
        ]
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


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"


@contextmanager
def isolated(accountant: Accountant) -> Iterator[None]:
    """A clean compile world for one test: Dynamo reset, configs, grad mode and dtype restored."""
    snapshot = _compat.config_snapshot()
    grad_enabled = torch.is_grad_enabled()
    default_dtype = torch.get_default_dtype()
    _compat.reset_dynamo()
    try:
        with _compat.patched_configs(accountant.dynamo_settings(), {"fallback_random": True}):
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

    `options` are the marker's keys (backend, mode, dynamic, fullgraph, max_graph_breaks,
    max_recompiles, rtol, atol, backward, check_strides); `kwargs` go to `fn`.
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
