"""Planted wrong backends: each miscompiles in one known way, so the checker must fail on it.

They use only torch.compile's public backend contract: a backend gets Dynamo's FX graph and
its example inputs and returns a callable. The graph itself runs eagerly; each planted bug
changes what goes in or comes out.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import torch

Compiled = Callable[..., Any]


def _as_list(out: Any) -> list[Any]:
    return list(out) if isinstance(out, (tuple, list)) else [out]


def _placeholders(gm: torch.fx.GraphModule) -> list[str]:
    return [node.name for node in gm.graph.nodes if node.op == "placeholder"]


def corrupt_output(gm: torch.fx.GraphModule, example_inputs: Sequence[Any]) -> Compiled:
    """The first floating output gets one element off by 1e-3 (relative)."""

    def run(*args: Any) -> Any:
        outs = _as_list(gm(*args))
        for i, out in enumerate(outs):
            if isinstance(out, torch.Tensor) and out.is_floating_point() and out.numel():
                flat = out.detach().reshape(-1)
                bumped = out + torch.zeros_like(out).reshape(-1).index_fill(
                    0, torch.tensor([0], device=out.device), float(flat[0].abs() + 1) * 1e-3
                ).reshape(out.shape)
                outs[i] = bumped
                break
        return outs

    return run


class _ScaleGrad(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
        return x.view_as(x)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> torch.Tensor:
        return grad * 1.01


def _through_first_differentiable(
    gm: torch.fx.GraphModule, function: type[torch.autograd.Function]
) -> Compiled:
    """Runs the graph with its first input that requires grad passed through `function` first."""

    def run(*args: Any) -> Any:
        args = list(args)
        for i, arg in enumerate(args):
            if isinstance(arg, torch.Tensor) and arg.requires_grad:
                args[i] = function.apply(arg)
                break
        return gm(*args)

    return run


def corrupt_gradient(gm: torch.fx.GraphModule, example_inputs: Sequence[Any]) -> Compiled:
    """Forward is right; the gradient flowing into the graph's first differentiable input is 1% off."""
    return _through_first_differentiable(gm, _ScaleGrad)


class _RaiseInBackward(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
        return x.view_as(x)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> torch.Tensor:
        raise RuntimeError("planted: the compiled backward failed")


def raise_in_backward(gm: torch.fx.GraphModule, example_inputs: Sequence[Any]) -> Compiled:
    """Forward is right; the backward raises, as a wrong stride assertion in it would."""
    return _through_first_differentiable(gm, _RaiseInBackward)


def drop_input_mutation(gm: torch.fx.GraphModule, example_inputs: Sequence[Any]) -> Compiled:
    """Runs the graph on copies of the user's inputs, so their in-place updates are lost."""
    user = [not name.startswith("l_self") for name in _placeholders(gm)]

    def run(*args: Any) -> Any:
        return gm(
            *[
                a.clone() if keep and isinstance(a, torch.Tensor) else a
                for a, keep in zip(args, user, strict=True)
            ]
        )

    return run


def skip_buffer_update(gm: torch.fx.GraphModule, example_inputs: Sequence[Any]) -> Compiled:
    """Runs the graph on copies of module buffers, so running statistics never change."""
    buffers = ["buffers" in name for name in _placeholders(gm)]

    def run(*args: Any) -> Any:
        return gm(
            *[a.clone() if is_buffer else a for a, is_buffer in zip(args, buffers, strict=True)]
        )

    return run


def change_output_dtype(gm: torch.fx.GraphModule, example_inputs: Sequence[Any]) -> Compiled:
    """The first floating output comes back in float64 (values unchanged)."""

    def run(*args: Any) -> Any:
        outs = _as_list(gm(*args))
        for i, out in enumerate(outs):
            if isinstance(out, torch.Tensor) and out.is_floating_point():
                outs[i] = out.to(torch.float64)
                break
        return outs

    return run


def raise_when_compiled(gm: torch.fx.GraphModule, example_inputs: Sequence[Any]) -> Compiled:
    """Compiles fine, then every compiled call raises."""

    def run(*args: Any) -> Any:
        raise RuntimeError("planted: the compiled kernel failed")

    return run


def corrupt_output_on_cuda(gm: torch.fx.GraphModule, example_inputs: Sequence[Any]) -> Compiled:
    """Right on the CPU; on CUDA the first floating output has one element off by 1e-3."""
    wrong = corrupt_output(gm, example_inputs)

    def run(*args: Any) -> Any:
        on_cuda = any(isinstance(a, torch.Tensor) and a.is_cuda for a in args)
        return wrong(*args) if on_cuda else gm(*args)

    return run


# --- wrong only for some inputs: the corners Hypothesis must reach (issue 4) ---


def _tensor_args(args: Sequence[Any]) -> list[torch.Tensor]:
    return [a for a in args if isinstance(a, torch.Tensor)]


def _skewed(out: Any) -> Any:
    """Every element visibly wrong in any dtype: finite values scaled and shifted, the rest 0."""
    if not isinstance(out, torch.Tensor):
        return out
    if out.dtype == torch.bool:
        return ~out
    if not (out.is_floating_point() or out.is_complex()):
        return out + 1
    return torch.where(out.isfinite(), out * 1.25 + 0.5, torch.zeros_like(out))


def _wrong_when(gm: torch.fx.GraphModule, bad: Callable[[torch.Tensor], bool]) -> Compiled:
    """The graph, with every output skewed in calls where some tensor input is `bad`."""

    def run(*args: Any) -> Any:
        outs = _as_list(gm(*args))
        if any(bad(t) for t in _tensor_args(args)):
            return [_skewed(out) for out in outs]
        return outs

    return run


def wrong_for_non_contiguous(gm: torch.fx.GraphModule, example_inputs: Sequence[Any]) -> Compiled:
    """Wrong when an input is not contiguous: a kernel that assumes dense row-major inputs."""
    return _wrong_when(gm, lambda t: not t.is_contiguous())


def wrong_for_storage_offset(gm: torch.fx.GraphModule, example_inputs: Sequence[Any]) -> Compiled:
    """Wrong when an input starts past the beginning of its storage: a kernel that ignores it."""
    return _wrong_when(gm, lambda t: t.storage_offset() != 0)


def wrong_for_zero_strides(gm: torch.fx.GraphModule, example_inputs: Sequence[Any]) -> Compiled:
    """Wrong when an input is expanded (stride 0 over a dimension longer than 1)."""
    return _wrong_when(
        gm, lambda t: any(s == 0 and n > 1 for s, n in zip(t.stride(), t.shape, strict=True))
    )


def wrong_for_channels_last(gm: torch.fx.GraphModule, example_inputs: Sequence[Any]) -> Compiled:
    """Wrong when a 4-D input is channels_last (and so not contiguous)."""
    return _wrong_when(
        gm,
        lambda t: (
            t.dim() == 4
            and not t.is_contiguous()
            and t.is_contiguous(memory_format=torch.channels_last)
        ),
    )


def wrong_for_size_one(gm: torch.fx.GraphModule, example_inputs: Sequence[Any]) -> Compiled:
    """Wrong when an input has a dimension of size 1: a broadcast special case gone wrong."""
    return _wrong_when(gm, lambda t: 1 in t.shape)


def wrong_for_half_precision(gm: torch.fx.GraphModule, example_inputs: Sequence[Any]) -> Compiled:
    """Wrong when an input is float16 or bfloat16: a reduced-precision kernel gone wrong."""
    return _wrong_when(gm, lambda t: t.dtype in (torch.float16, torch.bfloat16))


def wrong_for_half_outputs(gm: torch.fx.GraphModule, example_inputs: Sequence[Any]) -> Compiled:
    """Wrong where an output is float16 or bfloat16: under autocast, a float32 call's matmuls
    come out in half precision, and this kernel gets them wrong."""
    half = (torch.float16, torch.bfloat16)

    def run(*args: Any) -> Any:
        outs = _as_list(gm(*args))
        return [_skewed(o) if isinstance(o, torch.Tensor) and o.dtype in half else o for o in outs]

    return run


def wrong_for_non_finite(gm: torch.fx.GraphModule, example_inputs: Sequence[Any]) -> Compiled:
    """Wrong when an input holds NaN or an infinity: fast-math that assumes finite values."""
    return _wrong_when(
        gm, lambda t: (t.is_floating_point() or t.is_complex()) and not bool(t.isfinite().all())
    )


def _floats(t: torch.Tensor) -> bool:
    return t.is_floating_point() and t.numel() >= 2 and bool(t.isfinite().all())


def wrong_for_exact_differences(
    gm: torch.fx.GraphModule, example_inputs: Sequence[Any]
) -> Compiled:
    """Wrong when two inputs differ somewhere by exactly 0.1 as their dtype rounds it: a kernel
    that holds a margin or threshold wider than eager rounds it, wrong on the boundary only."""
    step = {dtype: torch.tensor(0.1, dtype=dtype) for dtype in (torch.float16, torch.bfloat16)}

    def differ(a: torch.Tensor, b: torch.Tensor) -> bool:
        if (a.shape, a.dtype) != (b.shape, b.dtype) or not a.is_floating_point():
            return False
        return bool(((a - b) == step.get(a.dtype, torch.tensor(0.1, dtype=a.dtype))).any())

    def run(*args: Any) -> Any:
        outs = _as_list(gm(*args))
        tensors = _tensor_args(args)
        if len(tensors) >= 2 and differ(tensors[0], tensors[1]):
            return [_skewed(out) for out in outs]
        return outs

    return run


def wrong_for_large_offsets(gm: torch.fx.GraphModule, example_inputs: Sequence[Any]) -> Compiled:
    """Wrong when an input's values share a large offset (all beyond 1000 in magnitude, spread
    below a hundredth of it): a variance or normalisation that cancels."""
    return _wrong_when(
        gm,
        lambda t: (
            _floats(t)
            and float(t.abs().min()) > 1000
            and float(t.max() - t.min()) < float(t.abs().min()) / 100
        ),
    )


def wrong_for_near_limits(gm: torch.fx.GraphModule, example_inputs: Sequence[Any]) -> Compiled:
    """Wrong when most of an input's values lie near the square root of its dtype's largest
    value and their sum of squares overflows though the values fit: a norm or variance computed
    from squares. (One planted extreme value is not enough: the corner is a whole tensor there.)"""

    def near_limits(t: torch.Tensor) -> bool:
        if not _floats(t):
            return False
        big = torch.finfo(t.dtype).max
        near = float((t.double().abs() >= big**0.5 / 8).double().mean()) > 0.5
        return near and float((t.double() ** 2).sum()) > big

    return _wrong_when(gm, near_limits)


def wrong_for_whole_row_sums(gm: torch.fx.GraphModule, example_inputs: Sequence[Any]) -> Compiled:
    """Wrong when every row of an input (its last dimension, 2 or more wide) sums to within 1e-3
    of a whole number without all its values being whole: a floor or threshold of a sum."""

    def whole_rows(t: torch.Tensor) -> bool:
        if not _floats(t) or t.dim() == 0 or t.shape[-1] < 2:
            return False
        sums = t.double().sum(-1)
        return bool(((sums - sums.round()).abs() < 1e-3).all()) and not bool((t == t.round()).all())

    return _wrong_when(gm, whole_rows)


def crash_for_empty(gm: torch.fx.GraphModule, example_inputs: Sequence[Any]) -> Compiled:
    """Raises when an input has no elements, as a kernel launched on an empty grid might."""

    def run(*args: Any) -> Any:
        if any(t.numel() == 0 for t in _tensor_args(args)):
            raise RuntimeError("planted: kernel launched with an empty grid")
        return gm(*args)

    return run


def wrong_tail_unless_multiple_of_16(
    gm: torch.fx.GraphModule, example_inputs: Sequence[Any]
) -> Compiled:
    """Vectorized by 16 with a wrong remainder loop: an output's last numel % 16 elements (in
    row-major order) are off, so only outputs whose numel is a multiple of 16 are right."""

    def run(*args: Any) -> Any:
        outs = _as_list(gm(*args))
        for i, out in enumerate(outs):
            tail = out.numel() % 16 if isinstance(out, torch.Tensor) else 0
            if tail and out.is_floating_point():
                flat_tail = torch.zeros(out.numel(), dtype=out.dtype, device=out.device)
                flat_tail[-tail:] = 1
                outs[i] = out + flat_tail.reshape(out.shape)
        return outs

    return run


def wrong_for_dynamic_shapes(gm: torch.fx.GraphModule, example_inputs: Sequence[Any]) -> Compiled:
    """Graphs traced with symbolic sizes (dynamic shapes) are wrong; static graphs are right."""
    if any(isinstance(e, torch.SymInt) for e in example_inputs):
        return _wrong_when(gm, lambda t: True)
    return gm


def wrong_under_compiled_autograd(
    gm: torch.fx.GraphModule, example_inputs: Sequence[Any]
) -> Compiled:
    """Graphs of a backward that compiled autograd captured are wrong; forward graphs, and the
    backward AOTAutograd compiles itself, are right. Told apart by their origin: compiled
    autograd compiles its graphs under a compile id of its own ("!0/1/0")."""
    from torch._guards import CompileContext

    compile_id = CompileContext.current_compile_id()
    if compile_id is None or compile_id.compiled_autograd_id is None:
        return gm

    def run(*args: Any) -> Any:  # its inputs come in lists: every call is skewed
        return [_skewed(out) for out in _as_list(gm(*args))]

    return run


def wrong_for_size_one_when_symbolic(
    gm: torch.fx.GraphModule, example_inputs: Sequence[Any]
) -> Compiled:
    """Graphs traced with symbolic sizes are wrong when run on an input with a dimension of size
    1: a kernel for a general size that mishandles the broadcast case. Dynamo's 0/1
    specialization keeps a backed symbolic graph from ever running there (sizes 0 and 1 get
    graphs of their own); an unbacked size runs it."""
    if any(isinstance(e, torch.SymInt) for e in example_inputs):
        return _wrong_when(gm, lambda t: 1 in t.shape)
    return gm


class _WrongAfterRecompile:
    """A backend whose first graph is right and every later one wrong: with one compiled
    function per test, exactly the graphs that recompiles produce.

    torch._dynamo.reset() calls a backend's reset(); the plugin resets Dynamo at each test's
    start and end and when it starts a fresh compile cache.
    """

    def __init__(self) -> None:
        self._graphs = 0

    def __call__(self, gm: torch.fx.GraphModule, example_inputs: Sequence[Any]) -> Compiled:
        self._graphs += 1
        return gm if self._graphs == 1 else _wrong_when(gm, lambda t: True)

    def reset(self) -> None:
        self._graphs = 0


wrong_after_recompile = _WrongAfterRecompile()


def stale_cache(gm: torch.fx.GraphModule, example_inputs: Sequence[Any]) -> Compiled:
    """Each graph remembers its first result for given input shapes and dtypes, and returns it
    again for a later call with the same shapes but new values."""
    seen: dict[tuple[Any, ...], Any] = {}

    def run(*args: Any) -> Any:
        key = tuple((tuple(a.shape), a.dtype) if isinstance(a, torch.Tensor) else a for a in args)
        if key not in seen:
            seen[key] = gm(*args)
        return seen[key]

    return run


def slow_compile(gm: torch.fx.GraphModule, example_inputs: Sequence[Any]) -> Compiled:
    """Right, but each compile takes 0.3 s: longer than Hypothesis's default 200 ms deadline."""
    time.sleep(0.3)
    return gm


# --- metadata and mode bugs of the model zoo benchmark (benchmarks/zoo) ---


def wrong_output_strides(gm: torch.fx.GraphModule, example_inputs: Sequence[Any]) -> Compiled:
    """Right values, wrong memory layout: outputs of two or more dimensions come back with their
    last two dimensions swapped in memory, as a layout pass choosing its own output strides might
    leave them (a later .view() then fails, or a custom kernel reads the wrong elements)."""

    def run(*args: Any) -> Any:
        return [
            out.transpose(-2, -1).contiguous().transpose(-2, -1)
            if isinstance(out, torch.Tensor) and out.dim() >= 2
            else out
            for out in _as_list(gm(*args))
        ]

    return run


def wrong_under_no_grad(gm: torch.fx.GraphModule, example_inputs: Sequence[Any]) -> Compiled:
    """Graphs compiled with gradients off (inference: weights frozen into constants, BatchNorm
    folded) are wrong; training graphs are right. Dynamo guards on grad mode, so a call under
    torch.no_grad() gets its own graph."""
    if torch.is_grad_enabled():
        return gm
    return _wrong_when(gm, lambda t: True)


# --- outputs that are one object on one side only (issue 50) ---


def _repeats(outs: list[Any]) -> Iterator[tuple[int, int]]:
    """(i, j) for each output j equal to an earlier output i: same metadata, same values."""
    for j, out in enumerate(outs):
        for i in range(j):
            first = outs[i]
            if (
                isinstance(out, torch.Tensor)
                and isinstance(first, torch.Tensor)
                and (out.shape, out.stride(), out.dtype)
                == (first.shape, first.stride(), first.dtype)
                and torch.equal(out, first)
            ):
                yield i, j
                break


def one_object_for_equal_outputs(
    gm: torch.fx.GraphModule, example_inputs: Sequence[Any]
) -> Compiled:
    """Right, but two equal outputs come back as one object (as Inductor may return them)."""

    def run(*args: Any) -> Any:
        outs = _as_list(gm(*args))
        for i, j in list(_repeats(outs)):
            outs[j] = outs[i]
        return outs

    return run


def corrupt_repeated_output(gm: torch.fx.GraphModule, example_inputs: Sequence[Any]) -> Compiled:
    """An output equal to an earlier one comes back skewed, the earlier one right."""

    def run(*args: Any) -> Any:
        outs = _as_list(gm(*args))
        for _, j in list(_repeats(outs)):
            outs[j] = _skewed(outs[j])
        return outs

    return run


# --- correct backends that differ from eager the way a real compiler may (issue 10) ---


def compute_half_in_float32(gm: torch.fx.GraphModule, example_inputs: Sequence[Any]) -> Compiled:
    """Correct, not planted: float16/bfloat16 graphs run in float32 and their outputs are rounded
    back, as Inductor computes them. Where eager overflows in an intermediate (x * 1000 in
    float16), this stays finite and close to the exact answer."""
    half = (torch.float16, torch.bfloat16)

    def run(*args: Any) -> Any:
        low = next((a.dtype for a in _tensor_args(args) if a.dtype in half), None)
        if low is None:
            return gm(*args)
        wide = [a.float() if isinstance(a, torch.Tensor) and a.dtype in half else a for a in args]
        return [
            out.to(low) if isinstance(out, torch.Tensor) and out.dtype == torch.float32 else out
            for out in _as_list(gm(*wide))
        ]

    return run


def half_in_float32_one_whole_number_off(
    gm: torch.fx.GraphModule, example_inputs: Sequence[Any]
) -> Compiled:
    """Planted: compute_half_in_float32, with the first element of every integer output one
    more than it should be (a wrong code among codes that Inductor's wider arithmetic moves
    rightly)."""
    correct = compute_half_in_float32(gm, example_inputs)

    def run(*args: Any) -> Any:
        outs = _as_list(correct(*args))
        for out in outs:
            if isinstance(out, torch.Tensor) and out.dtype in (torch.int32, torch.int64):
                out.view(-1)[0] += 1
        return outs

    return run


class _SumsInOneLane(torch.overrides.TorchFunctionMode):
    """mean and sum over one dimension, summed in order along it in the input's dtype."""

    def __torch_function__(
        self, func: Any, types: Any, args: Sequence[Any] = (), kwargs: Any = None
    ) -> Any:
        kwargs = dict(kwargs or {})
        averages = func in (torch.mean, torch.Tensor.mean)
        if averages or func in (torch.sum, torch.Tensor.sum):
            x, *rest = args
            dim = rest[0] if rest else kwargs.pop("dim", None)
            keepdim = rest[1] if len(rest) > 1 else kwargs.pop("keepdim", False)
            dim = dim[0] if isinstance(dim, (list, tuple)) and len(dim) == 1 else dim
            if isinstance(dim, int) and x.is_floating_point() and not kwargs:
                total = x.select(dim, 0).clone()
                for i in range(1, x.shape[dim]):
                    total += x.select(dim, i)
                total = total / x.shape[dim] if averages else total
                return total.unsqueeze(dim) if keepdim else total
        return func(*args, **kwargs)


def sums_in_one_lane(gm: torch.fx.GraphModule, example_inputs: Sequence[Any]) -> Compiled:
    """Correct, not planted: a sum or mean over one dimension is summed in order along it, in
    the input's dtype, as one lane of a vectorised loop sums (Inductor's reduction over a
    non-contiguous input): farther from the float64 answer than eager's blocked sum."""
    return _under(_SumsInOneLane, gm)


def _under(mode: Callable[[], torch.overrides.TorchFunctionMode], gm: Any) -> Compiled:
    """`gm` run under a fresh torch-function `mode` each call: a compiler that computes some
    operations its own way."""

    def run(*args: Any) -> Any:
        with mode():
            return gm(*args)

    return run


def sums_in_one_lane_one_row_off(
    gm: torch.fx.GraphModule, example_inputs: Sequence[Any]
) -> Compiled:
    """As sums_in_one_lane, and one row (three sevenths of the way down) of the first floating
    output is off by 5."""
    correct = sums_in_one_lane(gm, example_inputs)

    def run(*args: Any) -> Any:
        outs = _as_list(correct(*args))
        first = next(o for o in outs if isinstance(o, torch.Tensor) and o.is_floating_point())
        first[first.shape[0] * 3 // 7] += 5
        return outs

    return run


class _NearValuesRoundedOtherwise(torch.overrides.TorchFunctionMode):
    """topk and argmin see their input as another rounding would leave it: each value moved by
    one unit of its dtype, up or down by its position's parity. Near-equal neighbours (one unit
    apart, or equal) then come out in the other order, as in Inductor's distances."""

    def __torch_function__(
        self, func: Any, types: Any, args: Sequence[Any] = (), kwargs: Any = None
    ) -> Any:
        kwargs = dict(kwargs or {})
        if func in (torch.topk, torch.Tensor.topk, torch.argmin, torch.Tensor.argmin) and args:
            x, *rest = args
            if isinstance(x, torch.Tensor) and x.is_floating_point():
                unit = torch.finfo(x.dtype).eps * x.abs()
                parity = (torch.arange(x.numel()).reshape(x.shape) % 2) * 2 - 1
                x = x + (unit * parity).to(x.dtype)
                return func(x, *rest, **kwargs)
        return func(*args, **kwargs)


def near_values_rounded_otherwise(
    gm: torch.fx.GraphModule, example_inputs: Sequence[Any]
) -> Compiled:
    """Correct, not planted: topk and argmin order values one unit apart as another rounding of
    them would (the pairs a miner keeps at equal distances, in Inductor's order)."""
    return _under(_NearValuesRoundedOtherwise, gm)


def near_values_rounded_otherwise_one_index_off(
    gm: torch.fx.GraphModule, example_inputs: Sequence[Any]
) -> Compiled:
    """As near_values_rounded_otherwise, and the last element of the first integer output
    points one place further: an index no order of near-equal values returns."""
    correct = near_values_rounded_otherwise(gm, example_inputs)

    def run(*args: Any) -> Any:
        outs = _as_list(correct(*args))
        first = next(o for o in outs if isinstance(o, torch.Tensor) and not o.is_floating_point())
        first.view(-1)[-1] += 1
        return outs

    return run


# --- a wrong compile at each stage of the stack, for the stage bisect (issue 11) ---
#
# The bisect replays a failure with backends eager (TorchDynamo alone), aot_eager (+ AOTAutograd),
# aot_eager_decomp_partition (+ Inductor's decompositions and partitioner) and the configured one.
# A bug inside one of those stages must show from that stage on, so the first three are test-only
# patches of torch itself (each simulates a bug of that stage; none is a real one); the last two
# are ordinary custom backends, whose bugs belong to the custom backend.


def _rewrite_sin_as_cos(gm: torch.fx.GraphModule, sin: Any, cos: Any) -> None:
    for node in gm.graph.nodes:
        if node.op == "call_function" and node.target is sin:
            node.target = cos
    gm.recompile()


@contextmanager
def dynamo_traces_sin_as_cos() -> Iterator[None]:
    """A TorchDynamo bug: the graph Dynamo hands to every backend, eager included, calls
    torch.cos where the program calls torch.sin, as a wrong graph rewrite or polyfill inside
    Dynamo would. Patches Dynamo's private OutputGraph.call_user_compiler."""
    from torch._dynamo.output_graph import OutputGraph

    original = OutputGraph.call_user_compiler

    def call_user_compiler(self: Any, gm: torch.fx.GraphModule, example_inputs: Any) -> Any:
        _rewrite_sin_as_cos(gm, torch.sin, torch.cos)
        return original(self, gm, example_inputs)

    OutputGraph.call_user_compiler = call_user_compiler  # type: ignore[method-assign]
    try:
        yield
    finally:
        OutputGraph.call_user_compiler = original  # type: ignore[method-assign]


def _scale_first_output(gm: torch.fx.GraphModule, factor: float) -> None:
    output = next(node for node in gm.graph.nodes if node.op == "output")
    outs = list(output.args[0])
    index = next(i for i, out in enumerate(outs) if isinstance(out, torch.fx.Node))
    with gm.graph.inserting_before(output):
        outs[index] = gm.graph.call_function(torch.ops.aten.mul.Tensor, (outs[index], factor))
    output.args = (tuple(outs),)
    gm.recompile()


@contextmanager
def aot_autograd_scales_backward() -> Iterator[None]:
    """An AOTAutograd bug: every backward graph AOTAutograd builds returns its first gradient 1%
    too large, under every AOT-based backend (aot_eager, aot_eager_decomp_partition, inductor);
    Dynamo alone (backend=eager) is right. Patches the private
    torch._dynamo.backends.common.aot_module_simplified, which those backends call."""
    from torch._dynamo.backends import common

    original = common.aot_module_simplified

    def aot_module_simplified(gm: Any, example_inputs: Any, **kwargs: Any) -> Any:
        bw_compiler = kwargs["bw_compiler"]

        def wrong_backward(bw_gm: torch.fx.GraphModule, inputs: Any) -> Any:
            _scale_first_output(bw_gm, 1.01)
            return bw_compiler(bw_gm, inputs)

        return original(gm, example_inputs, **{**kwargs, "bw_compiler": wrong_backward})

    common.aot_module_simplified = aot_module_simplified
    try:
        yield
    finally:
        common.aot_module_simplified = original


def _sin_as_cos(x: torch.Tensor) -> torch.Tensor:
    return torch.cos(x)


@contextmanager
def inductor_decomposes_sin_as_cos() -> Iterator[None]:
    """A wrong decomposition in Inductor's table: aten.sin decomposes to cos, under
    aot_eager_decomp_partition and inductor; Dynamo and plain AOTAutograd are right. Patches the
    private table torch._inductor.decomposition.decompositions, and clears the copy of it that
    Inductor caches for graphs compiled without fallback_random (fast_random_decomps)."""
    from torch._inductor import decomposition

    decompositions = decomposition.decompositions
    cached = getattr(decomposition, "fast_random_decomps", None)
    key = torch.ops.aten.sin.default
    saved = decompositions.get(key)
    decompositions[key] = _sin_as_cos
    if cached is not None:
        cached.cache_clear()
    try:
        yield
    finally:
        if saved is None:
            del decompositions[key]
        else:
            decompositions[key] = saved
        if cached is not None:
            cached.cache_clear()


def _boxed_forward(gm: torch.fx.GraphModule, example_inputs: Sequence[Any]) -> Compiled:
    from functorch.compile import make_boxed_func

    return make_boxed_func(gm.forward)  # type: ignore[no-any-return]


def wrong_decomposition(gm: torch.fx.GraphModule, example_inputs: Sequence[Any]) -> Compiled:
    """A custom AOTAutograd backend whose own decomposition table turns aten.sin into cos: the
    custom backend's bug, so every stage before it is right."""
    from torch._dynamo.backends.common import aot_autograd

    backend = aot_autograd(
        fw_compiler=_boxed_forward, decompositions={torch.ops.aten.sin.default: _sin_as_cos}
    )
    return backend(gm, example_inputs)  # type: ignore[no-any-return]


# --- wrong on the export paths (issue 19): torch.export's program, AOTInductor's package ---


def _skewed_tree(out: Any) -> Any:
    if isinstance(out, (tuple, list)):
        return type(out)(_skewed_tree(item) for item in out)
    if isinstance(out, dict):
        return {key: _skewed_tree(item) for key, item in out.items()}
    return _skewed(out)


def _large_batch(args: Sequence[Any], limit: int) -> bool:
    first = next(iter(_tensor_args(args)), None)
    return first is not None and first.dim() > 0 and first.shape[0] > limit


def _wrong_for_batches_over(run: Compiled, limit: int) -> Compiled:
    """`run`, with every output skewed in calls where the first tensor input's first dimension
    is over `limit`: a kernel right only for the batch sizes it was tried on."""

    def wrong(*args: Any, **kwargs: Any) -> Any:
        out = run(*args, **kwargs)
        return _skewed_tree(out) if _large_batch([*args, *kwargs.values()], limit) else out

    return wrong


def _gradient_wrong_for_batches_over(run: Compiled, limit: int) -> Compiled:
    """`run`, with a tensor output's gradient 1% too large in calls where the first tensor
    input's first dimension is over `limit`; the output itself is right."""

    def wrong(*args: Any, **kwargs: Any) -> Any:
        out = run(*args, **kwargs)
        large = _large_batch([*args, *kwargs.values()], limit)
        if large and isinstance(out, torch.Tensor) and out.requires_grad:
            return _ScaleGrad.apply(out)  # type: ignore[no-untyped-call]
        return out

    return wrong


@contextmanager
def _patched(owner: Any, name: str, wrap: Callable[[Any], Any]) -> Iterator[None]:
    """`owner.name` replaced by a function returning `wrap` of what the original returns."""
    original = getattr(owner, name)

    def replaced(*args: Any, **kwargs: Any) -> Any:
        return wrap(original(*args, **kwargs))

    setattr(owner, name, replaced)
    try:
        yield
    finally:
        setattr(owner, name, original)


def export_wrong_for_large_batches(limit: int = 4) -> Any:
    """A torch.export bug: the exported program's module skews every output where the first
    tensor input's first dimension is over `limit`. Patches the public ExportedProgram.module."""
    return _patched(
        torch.export.ExportedProgram,
        "module",
        lambda module: _wrong_for_batches_over(module, limit),
    )


def export_scales_gradients(limit: int = 4) -> Any:
    """A torch.export bug in the backward only: where the first tensor input's first dimension
    is over `limit`, the exported program's module returns its output right but the gradient
    flowing back through it 1% too large."""
    return _patched(
        torch.export.ExportedProgram,
        "module",
        lambda module: _gradient_wrong_for_batches_over(module, limit),
    )


def aoti_wrong_for_large_batches(limit: int = 4) -> Any:
    """An AOTInductor bug: the loaded package skews every output where the first tensor input's
    first dimension is over `limit`. Patches torch._inductor.aoti_load_package."""
    import torch._inductor

    return _patched(
        torch._inductor,
        "aoti_load_package",
        lambda package: _LoadedWrong(package, limit),
    )


class _LoadedWrong:
    """A loaded package that keeps its own methods (binding constants) but is called wrongly."""

    def __init__(self, package: Any, limit: int) -> None:
        self._package = package
        self._wrong = _wrong_for_batches_over(package, limit)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._wrong(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._package, name)
