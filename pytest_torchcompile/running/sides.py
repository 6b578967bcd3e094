"""Running one side of a check: the call, its backward with shared cotangents, the RNG state.

Each side (eager, compiled, or a re-run) is a callable with its own module and inputs; running it
returns a `SideResult` holding its outputs, the state it left and its gradients, with any
exception it raised kept as part of the result, for parity to judge.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch

from pytest_torchcompile.errors import CompileParityFailure
from pytest_torchcompile.running import trees
from pytest_torchcompile.running.copier import is_atomic
from pytest_torchcompile.running.snapshot import rebuild_tuple
from pytest_torchcompile.running.state import named_inputs, referenced_parameters, state_after
from pytest_torchcompile.running.world import World

COTANGENT_SEED = 20240613  # fixed, so eager and compiled backward get the same cotangents


@dataclass
class SideResult:
    """What one side (eager, compiled, a re-run or the control) produced in one checker call."""

    output: Any  # returned pytree; None when the call raised
    exception: BaseException | None  # what the call raised, if anything
    after: dict[str, Any]  # named state after the call, ordered; keys are display names
    grads: dict[str, Any]  # "grad of input 0" -> Tensor or None
    raised_in_backward: bool = False  # the exception came from the backward, not the call


GradTarget = torch.Tensor | torch.autograd.graph.GradientEdge


def _grad_targets(
    module: torch.nn.Module | None, args: tuple[Any, ...], kwargs: Mapping[str, Any]
) -> dict[str, GradTarget]:
    """What the check compares the gradients of, taken before the call: input tensors, then
    parameters. A non-leaf input (computed earlier, or a view) is taken as the gradient edge it
    was passed in on: the gradient autograd passes on to the leaf behind it, whatever the call
    then does to it in place (a compiled call's in-place update rebinds the input's history
    after the output's)."""
    targets: dict[str, GradTarget] = {}
    for name, value in named_inputs(args, kwargs):
        for label, tensor in _held_tensors(value, name, _HELD_DEPTH):
            if tensor.requires_grad:
                edge = tensor if tensor.is_leaf else torch.autograd.graph.get_gradient_edge(tensor)
                targets.setdefault(f"grad of {label}", edge)
    if module is not None:
        for pname, param in (*module.named_parameters(), *referenced_parameters(module)):
            if param.requires_grad:
                targets[f"grad of parameter {pname!r}"] = param
    return targets


_HELD_DEPTH = 4  # containers and objects followed into an input for its tensors


def _held_tensors(value: Any, name: str, depth: int) -> Iterator[tuple[str, torch.Tensor]]:
    """The tensors an input holds, named by their path: itself, the items of its containers,
    the attributes of its objects (a cache's `keys`, a dataclass's fields); not the state of
    modules and optimizers among the inputs, which is compared as such."""
    if isinstance(value, torch.Tensor):
        yield name, value
        return
    if depth == 0 or isinstance(value, (torch.nn.Module, torch.optim.Optimizer)):
        return
    parts = trees.containers(value)
    if parts is None and not is_atomic(value):
        parts = trees.held(value)
    for suffix, child in parts or []:
        yield from _held_tensors(child, f"{name}{suffix}", depth - 1)


def differentiable_outputs(output: Any) -> list[torch.Tensor]:
    """The output's floating tensors that require grad, found as parity walks the output."""
    found: list[torch.Tensor] = []
    pending = [output]  # a stack: outputs in order, depth first
    while pending:
        value = pending.pop()
        if isinstance(value, torch.Tensor):
            if value.requires_grad and (value.is_floating_point() or value.is_complex()):
                found.append(value)
        else:
            pending += reversed([child for _, child in trees.children(value) or []])
    return found


def _cotangent(output: torch.Tensor, index: int, like: torch.dtype | None) -> torch.Tensor:
    """The same random cotangent for the index-th differentiable output on every side.

    Drawn from its own generator (the global RNG is untouched) in float32, rounded to the eager
    output's dtype (`like`, for the float64 reference) and then to this output's dtype.
    """
    if output.is_nested and output.layout == torch.jagged:
        # Drawn over its values, in a copy of it: the offsets and cached lengths autograd
        # expects of a jagged output's cotangent are its own.
        cotangent = output.detach().clone()
        cotangent.values().copy_(_cotangent(output.values(), index, like))
        return cotangent
    if output.is_nested:
        parts = [_cotangent(part, index, like) for part in output.unbind()]
        return torch.nested.as_nested_tensor(parts)
    dtype = like or output.dtype
    generator = torch.Generator(device=output.device).manual_seed(COTANGENT_SEED + index)
    base = torch.complex64 if dtype.is_complex else torch.float32
    drawn = torch.randn(output.shape, dtype=base, device=output.device, generator=generator)
    return drawn.to(dtype).to(output.dtype)


# --- one side ---------------------------------------------------------------------------------


@dataclass
class Side:
    """How to run one side: the callable, its own module (if any) and inputs."""

    call: Callable[..., Any]
    module: torch.nn.Module | None
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    cotangent_dtypes: list[torch.dtype] | None = None  # eager's output dtypes, for the reference
    cudagraphs: bool = (
        False  # outputs and gradients live in a CUDA graph's memory until the next replay
    )


def run_side(
    side: Side, backward: bool, around: Callable[[], Any], *, wait: bool = True
) -> SideResult:
    """Call, then backward with the shared cotangents; exceptions become part of the result.

    With `wait`, the side waits for the device at its end (after the backward where one runs),
    so an error a device raises asynchronously is this side's, and its results are final. The
    checker's two sides do not wait: their results are read in the order the device computes
    them, by the comparison, whose host work meanwhile overlaps the device's (a wait after each
    side, and between a call and its backward, was a third of a 1024-wide transformer check's
    overhead on an H100); the checker waits once at its end (`device_failure` says what a
    device that failed on the way means). A side never waits between its call and its
    backward."""
    __tracebackhide__ = True  # an exception re-raised from here is the user's
    targets = _grad_targets(side.module, side.args, side.kwargs) if backward else {}
    try:
        with around():
            if side.cudagraphs:
                torch.compiler.cudagraph_mark_step_begin()  # type: ignore[no-untyped-call]
            output = side.call(*side.args, **side.kwargs)
            outputs = differentiable_outputs(output) if targets else []
            if wait and not outputs:  # no backward follows
                synchronize()
    except Exception as exc:  # the other side must raise the same type; parity decides
        return SideResult(output=None, exception=exc, after={}, grads={})
    grads: dict[str, Any] = {}
    if outputs:
        likes = side.cotangent_dtypes or []
        cotangents = [
            _cotangent(o, i, likes[i] if i < len(likes) else None) for i, o in enumerate(outputs)
        ]
        try:
            with around():
                computed = torch.autograd.grad(
                    outputs,
                    list(targets.values()),  # type: ignore[arg-type]  # tensors and edges mixed
                    cotangents,
                    allow_unused=True,
                )
                if wait:
                    synchronize()
        except Exception as exc:
            return SideResult(
                output=output, exception=exc, after={}, grads={}, raised_in_backward=True
            )
        grads = {
            name: None if g is None else g.detach()
            for name, g in zip(targets, computed, strict=True)
        }
        if side.cudagraphs:  # a backward graph's outputs too, before another compile replays
            grads = _owned(grads)
    return SideResult(
        output=_owned(output) if side.cudagraphs else output,
        exception=None,
        after=state_after(side.module, side.args, side.kwargs),
        grads=grads,
    )


def state_left(result: SideResult, side: Side) -> dict[str, Any]:
    """`state_after` of a side that has run (walked again only where it raised)."""
    if result.exception is None:
        return result.after
    return state_after(side.module, side.args, side.kwargs)


def with_world(result: SideResult, world: World) -> None:
    """Add what parity compares of the world around the call, as the side left it, to what it
    changed (`World.state`: the containers and globals its code reaches)."""
    if result.exception is None:
        result.after.update(world.state())


def without_unjudged(world: World, *results: SideResult | None) -> None:
    """Take out of the sides' results what a later side left not plain (`World.unjudged`),
    which is then compared on none of them."""
    for result in results:
        if result is not None:
            for name in world.unjudged:
                result.after.pop(name, None)


def _owned(output: Any) -> Any:
    """Copies of a CUDA-graph replay's outputs, which the next replay would overwrite."""
    if isinstance(output, torch.Tensor):
        return output.clone()
    if isinstance(output, (tuple, list)):
        items = [_owned(item) for item in output]
        return items if isinstance(output, list) else rebuild_tuple(output, items)
    if isinstance(output, dict):
        return type(output)((key, _owned(value)) for key, value in output.items())
    return output


def _cuda_in_use() -> bool:
    return torch.cuda.is_available() and torch.cuda.is_initialized()  # type: ignore[no-untyped-call]


def synchronize() -> None:
    """Wait for queued CUDA work, so results and timings are final before they are read."""
    if _cuda_in_use():
        torch.cuda.synchronize()


class Stopwatch:
    """How long a block took: its host time and, where CUDA is in use, the device's time from
    the block's start to its end on the current stream, read when asked. The sides do not wait
    for the device, so their host time alone is only the time it took to queue their work."""

    def __init__(self) -> None:
        self._host = 0.0
        self._events: tuple[torch.cuda.Event, torch.cuda.Event] | None = None

    @contextmanager
    def timing(self) -> Iterator[None]:
        events = None
        if _cuda_in_use():
            events = (_timing_event(), _timing_event())
            events[0].record()
        started = time.perf_counter()
        try:
            yield
        finally:
            self._host = time.perf_counter() - started
            if events is not None:
                events[1].record()
                self._events = events

    @property
    def seconds(self) -> float:
        """The longer of the host's and the device's time (this waits for the device to reach
        the block's end)."""
        if self._events is None:
            return self._host
        start, end = self._events
        end.synchronize()
        return max(self._host, float(start.elapsed_time(end)) / 1000.0)


def _timing_event() -> torch.cuda.Event:
    return torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]


def device_failure(
    exc: BaseException, compiled: SideResult | None, context: str
) -> CompileParityFailure:
    """The failure to raise where the device failed during a check (an illegal memory access,
    a failed device-side assert): it can run nothing more in this process, and its error
    surfaced at whatever call came next, since the sides do not wait for it. It says which side
    the error came from where that is known (everything before the compiled side had finished,
    so an error its own calls met is its own), and how to find out where not."""
    if compiled is not None and isinstance(compiled.exception, torch.AcceleratorError):
        who = (
            "The compiled side raised it first (everything the checker ran before it had "
            f"finished): {compiled.exception}"
        )
    else:
        who = (
            "A device reports a kernel's error at a later call, so it may have come from either "
            "side: run the test alone with CUDA_LAUNCH_BLOCKING=1, where each kernel reports "
            "its own error as it is launched, to see which"
        )
    return CompileParityFailure(
        f"The device failed while the eager and compiled sides ran or were compared ({exc}), "
        f"and can run nothing more in this process, so no parity was shown. {who}.\n\n{context}"
    )


@contextmanager
def nothing() -> Iterator[None]:
    yield
