"""One OpInfo sample through the plugin's checker at its defaults, and the verdict classified.

The plugin's verdict alone cannot say whether a failure is a compiler bug or the plugin crying
wolf, so every ParityError is judged again by an independent oracle written the way a careful
user would: a plain `torch.compile` of the same function, `torch.testing.assert_close` against
eager, and where they differ, each side's distance to a float64 reference. A failure is a plugin
false alarm when that oracle finds compiled as good as eager; a real divergence when it does not
(with torch's own inductor OpInfo expected failures, opinfo_xfails.json, cited where they list it).

Outcomes, one per sample (the order is the summary's):
  pass          the checker passed
  eager-invalid eager raised on the sample and the checker re-raised eager's own exception
  skip          not judged: random or uninitialised op, sample generation failed, eager not
                deterministic under a fixed seed
  unsupported   the backend cannot compile or run what eager runs (a compile crash, named)
  fallback      a budget or fallback verdict: EagerFallbackError, RecompileLimitExceeded,
                GraphBreakBudgetExceeded
  divergence    a real compiler divergence, with the oracle's evidence
  false-alarm   a ParityError the oracle does not confirm
  crash         an exception from inside pytest_torchcompile that is not a verdict
  timeout       the op ran past the per-op time limit (set by the driver, opinfo.py)
  died          the worker process died on the op (a segfault, an abort)
  harness       this benchmark's own code failed on the sample (not the plugin's fault)
"""

from __future__ import annotations

import contextlib
import itertools
import json
import time
import traceback
import warnings
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch
from torch.utils import _pytree as pytree

from pytest_torchcompile import (
    EagerFallbackError,
    GraphBreakBudgetExceeded,
    ParityError,
    RecompileLimitExceeded,
    assert_compile_parity,
)
from pytest_torchcompile.running.copier import clone_tree
from pytest_torchcompile.settings import load_backend_callable

OUTCOMES = (
    "pass",
    "eager-invalid",
    "skip",
    "unsupported",
    "fallback",
    "divergence",
    "false-alarm",
    "crash",
    "timeout",
    "died",
    "harness",
)
FAILURES = OUTCOMES[3:]

# Ops whose result is random or uninitialised memory: parity with eager means nothing for them.
RANDOM_OPS = frozenset(
    {
        "bernoulli",
        "cauchy",
        "exponential",
        "geometric",
        "log_normal",
        "multinomial",
        "normal",
        "normal.in_place",
        "normal.number_mean",
        "uniform",
        "rand_like",
        "randint",
        "randint_like",
        "randn",
        "randn_like",
        "nn.functional.alpha_dropout",
        "nn.functional.dropout",
        "nn.functional.dropout2d",
        "nn.functional.dropout3d",
        "nn.functional.feature_alpha_dropout.with_train",
        "nn.functional.rrelu",
        # Uninitialised memory: torch 2.13's OpInfo marks these has_nondeterministic_output,
        # torch 2.11's has no such attribute.
        "empty",
        "empty_like",
        "empty_permuted",
        "empty_strided",
        "new_empty",
        "new_empty_strided",
    }
)
DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}
_ABBREV = {torch.float32: "f32", torch.float16: "f16", torch.bfloat16: "bf16"}
_XFAILS = json.loads((Path(__file__).with_name("opinfo_xfails.json")).read_text())
_PLUGIN_DIR = str(Path(__import__("pytest_torchcompile").__file__).parent)
_WRAPPERS = ("torch._dynamo", "torch._inductor")


def load_op_db() -> tuple[list[Any], type]:
    """torch's OpInfo database and its SampleInput class, leaving Hypothesis as it was.

    Importing torch.testing._internal loads torch's own Hypothesis profile ("dev": 10 examples)
    for the whole process; in a test run that would quietly shrink every later @given test.
    """
    from hypothesis import settings

    profile = settings.get_current_profile_name()
    try:
        from torch.testing._internal.common_methods_invocations import op_db
        from torch.testing._internal.opinfo.core import SampleInput
    finally:
        settings.load_profile(profile)
    return op_db, SampleInput


@dataclass
class Record:
    """One sample's outcome: what ran, the class, and a one-line reason."""

    op: str
    dtype: str
    device: str
    backend: str
    sample: int
    outcome: str
    reason: str
    evidence: str = ""
    seconds: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def full_name(op: Any) -> str:
    return f"{op.name}.{op.variant_test_name}" if op.variant_test_name else str(op.name)


def torch_lists(name: str, dtype: torch.dtype, device: str) -> str:
    """Where torch's own inductor OpInfo test expects this op to fail, if it does."""
    abbrev = _ABBREV.get(dtype)
    found = [
        f"torch's inductor OpInfo {kind} expected failures ({device})"
        for kind in ("forward", "gradient")
        if abbrev in _XFAILS[kind].get(device.split(":")[0], {}).get(name, [])
    ]
    return "; ".join(found)


# --- running a side -------------------------------------------------------------------------


def _first_line(exc: BaseException) -> str:
    """The exception's type and its first two lines of text, for a one-line reason."""
    lines = [line.strip() for line in str(exc).strip().splitlines() if line.strip()]
    return f"{type(exc).__name__}: {' '.join(lines[:2])[:240]}"


def unwrap(exc: BaseException) -> BaseException:
    """The exception a user's code raised, under Dynamo's and Inductor's wrappers."""
    while type(exc).__module__.startswith(_WRAPPERS):
        # TorchRuntimeError is raised `from None`: the original sits in __context__'s __cause__
        inner = getattr(exc, "inner_exception", None) or exc.__cause__ or exc.__context__
        if not isinstance(inner, BaseException):
            break
        exc = inner
    return exc


def clone(tree: Any) -> Any:
    """A fresh copy of a sample's inputs as OpInfo hands them: aliasing, strides and offsets
    kept, and a view of a leaf (a transposed sample) still a view of a copy of that leaf, so
    its gradient flows where OpInfo's does (the checker's own copy, snapshot.clone_tree)."""
    return clone_tree(tree)


@dataclass
class Observed:
    """What one side did: its tensors by leaf name (outputs, gradients, inputs after), or a raise."""

    leaves: dict[str, torch.Tensor]
    exception: BaseException | None = None


def _as_tensor(value: Any) -> torch.Tensor | None:
    if isinstance(value, torch.Tensor):
        return value.detach().to_dense() if value.layout != torch.strided else value.detach()
    if isinstance(value, (bool, int, float, complex)):
        return torch.tensor(value)
    return None


def observe(
    call: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any], cotangents: bool
) -> Observed:
    """Run `call` once from seed 0; then backward with fixed cotangents; then the inputs after."""
    torch.manual_seed(0)
    try:
        output = call(*args, **kwargs)
    except Exception as exc:
        return Observed({}, exc)
    leaves: dict[str, torch.Tensor] = {}
    outputs = pytree.tree_leaves(output)
    for index, value in enumerate(outputs):
        tensor = _as_tensor(value)
        if tensor is not None:
            leaves[f"output[{index}]"] = tensor
    inputs = [leaf for leaf in pytree.tree_leaves((args, kwargs)) if isinstance(leaf, torch.Tensor)]
    if cotangents:
        wanted = [o for o in outputs if isinstance(o, torch.Tensor) and o.requires_grad]
        targets = [i for i in inputs if i.requires_grad and i.is_leaf]
        if wanted and targets:
            generator = torch.Generator().manual_seed(1)
            grads_out = [
                torch.randn(o.shape, generator=generator, dtype=torch.float64)
                .to(o.dtype)
                .to(o.device)
                for o in wanted
            ]
            try:
                grads = torch.autograd.grad(wanted, targets, grads_out, allow_unused=True)
            except Exception as exc:
                return Observed(leaves, exc)
            for index, grad in enumerate(grads):
                if grad is not None:
                    leaves[f"grad[{index}]"] = grad.detach()
    for index, tensor in enumerate(inputs):
        leaves[f"input[{index}] after"] = _as_tensor(tensor)  # type: ignore[assignment]
    return Observed(leaves)


def _upcast(tree: Any) -> Any:
    def convert(value: Any) -> Any:
        if isinstance(value, torch.Tensor) and value.dtype in DTYPES.values():
            return value.detach().to(torch.float64).requires_grad_(value.requires_grad)
        return value

    return pytree.tree_map(convert, clone(tree))


# --- judging ----------------------------------------------------------------------------------


def _close(actual: torch.Tensor, expected: torch.Tensor) -> bool:
    try:
        torch.testing.assert_close(
            actual, expected, equal_nan=True, check_dtype=False, check_stride=False
        )
    except AssertionError:
        return False
    except Exception:  # shapes or layouts that assert_close cannot compare: not close
        return False
    return True


def _error(side: torch.Tensor, reference: torch.Tensor) -> float:
    """Largest distance to the reference; inf where one of the two is finite and the other not
    (a finite answer where the reference is NaN contradicts the op's own convention: Triton's
    Bessel functions give 0 at +-inf where every eager kernel, float64 included, gives NaN)."""
    side64, ref64 = side.to(torch.float64).cpu(), reference.to(torch.float64).cpu()
    if side64.shape != ref64.shape:
        return float("inf")
    finite = torch.isfinite(ref64)
    if bool((finite != torch.isfinite(side64)).any()):
        return float("inf")
    if not bool(finite.any()):
        return 0.0
    return float((side64[finite] - ref64[finite]).abs().max())


def judge(
    fn: Callable[..., Any],
    inputs: tuple[tuple[Any, ...], dict[str, Any]],
    backend: str,
    cotangents: bool,
) -> tuple[str, str]:
    """The oracle: (outcome, evidence) for a sample the plugin failed with a ParityError."""
    args, kwargs = inputs
    eager = observe(fn, *clone(inputs), cotangents)
    torch._dynamo.reset()
    compiled_fn = torch.compile(
        fn, backend=load_backend_callable(backend) if ":" in backend else backend
    )
    compiled = observe(compiled_fn, *clone(inputs), cotangents)
    torch._dynamo.reset()
    if eager.exception is not None or compiled.exception is not None:
        return _judge_exceptions(eager.exception, compiled.exception)
    differing = [
        name
        for name in eager.leaves
        if name not in compiled.leaves or not _close(compiled.leaves[name], eager.leaves[name])
    ] + [name for name in compiled.leaves if name not in eager.leaves]
    if not differing:
        return "false-alarm", "plain torch.compile + assert_close(compiled, eager) agree"
    up_args, up_kwargs = _upcast((args, kwargs))
    reference = observe(fn, up_args, up_kwargs, cotangents)
    if reference.exception is not None:
        return (
            "divergence",
            f"{differing[0]} differs from eager (no float64 reference: {_first_line(reference.exception)})",
        )
    worse = []
    for name in differing:
        if name not in eager.leaves or name not in compiled.leaves or name not in reference.leaves:
            worse.append(f"{name} present on one side only")
            continue
        e_side, c_side, ref = eager.leaves[name], compiled.leaves[name], reference.leaves[name]
        if not e_side.is_floating_point():
            worse.append(f"{name} ({e_side.dtype}) differs exactly")
            continue
        e_err, c_err = _error(e_side, ref), _error(c_side, ref)
        if c_err > 2 * e_err and not _close(c_side, ref.to(c_side.dtype)):
            worse.append(f"{name}: compiled {c_err:.3g} from float64, eager {e_err:.3g}")
    if worse:
        return "divergence", "; ".join(worse)
    return (
        "false-alarm",
        f"{', '.join(differing)}: compiled as close to the float64 reference as eager",
    )


def _judge_exceptions(
    eager: BaseException | None, compiled: BaseException | None
) -> tuple[str, str]:
    if eager is None:
        assert compiled is not None
        return "unsupported", f"plain torch.compile raises {_first_line(unwrap(compiled))}"
    if compiled is None:
        return "divergence", f"compiled accepts what eager rejects ({_first_line(eager)})"
    inner = unwrap(compiled)
    if type(inner) is type(eager):
        return (
            "false-alarm",
            f"same exception under a wrapper: {type(compiled).__name__}({type(inner).__name__})",
        )
    return "divergence", f"eager raises {_first_line(eager)}, compiled {_first_line(inner)}"


# --- one sample ---------------------------------------------------------------------------------


def _from_plugin(exc: BaseException) -> str:
    """The innermost frame of pytest_torchcompile that the exception passed through."""
    frames = [
        f for f in traceback.extract_tb(exc.__traceback__) if f.filename.startswith(_PLUGIN_DIR)
    ]
    if not frames:
        return "outside the plugin"
    last = frames[-1]
    return f"{Path(last.filename).name}:{last.lineno} in {last.name}"


def callable_for(op: Any, sample: Any) -> Callable[..., Any]:
    """The op's function variant, its output post-processed as torch's gradient tests do."""
    function = op.op
    process = sample.output_process_fn_grad

    def fn(*args: Any, **kwargs: Any) -> Any:
        return process(function(*args, **kwargs))

    return fn


def check_sample(
    op: Any, index: int, sample: Any, dtype: torch.dtype, device: str, backend: str
) -> Record:
    """The plugin's checker at default settings on one sample, classified."""
    name = full_name(op)
    record = Record(name, str(dtype).removeprefix("torch."), device, backend, index, "pass", "")
    fn = callable_for(op, sample)
    inputs = ((sample.input, *sample.args), dict(sample.kwargs))
    cotangents = op.supports_autograd and dtype.is_floating_point
    first = observe(fn, *clone(inputs), cotangents)
    # An op whose eager runs differ (a random-state output such as flash attention's philox
    # seed and offset, uninitialised memory, atomics) goes to the checker all the same: it
    # judges eager's spread, and a leaf its control run differs at too is not judged.
    args, kwargs = clone(inputs)
    started = time.perf_counter()
    try:
        result = assert_compile_parity(fn, *args, kwargs=kwargs, backend=backend)
        record.evidence = "; ".join(result.report.notes)
    except (EagerFallbackError, RecompileLimitExceeded, GraphBreakBudgetExceeded) as exc:
        record.outcome, record.reason = "fallback", _first_line(exc)
    except ParityError as exc:
        record.reason = _first_line(exc)
        record.outcome, record.evidence = judge(fn, inputs, backend, cotangents)
    except Exception as exc:
        if first.exception is not None and _first_line(exc) == _first_line(first.exception):
            record.outcome, record.reason = "eager-invalid", _first_line(exc)
        else:
            record.outcome = "crash"
            record.reason = f"{_first_line(exc)} (at {_from_plugin(exc)})"
    else:
        if first.exception is not None:
            record.outcome = "crash"
            record.reason = f"checker passed where eager raises {_first_line(first.exception)}"
    record.seconds = round(time.perf_counter() - started, 3)
    if record.outcome == "divergence":
        listed = torch_lists(name, dtype, device)
        record.evidence += f"; listed in {listed}" if listed else ""
    return record


@contextlib.contextmanager
def quiet() -> Iterator[None]:
    """OpInfo samples and Dynamo warn a lot; the records say what matters."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def _extremal(sample: Any) -> bool:
    """Whether a floating input holds a non-finite value or one beyond 1e4 in magnitude."""
    floats = [
        leaf
        for leaf in pytree.tree_leaves((sample.input, sample.args, sample.kwargs))
        if isinstance(leaf, torch.Tensor) and leaf.is_floating_point() and leaf.numel()
    ]
    return any(
        bool((~torch.isfinite(t)).any()) or float(t.detach().abs().max()) > 1e4 for t in floats
    )


def _draw(op: Any, dtype: torch.dtype, device: str, kind: str) -> Iterator[Any]:
    if kind == "error_inputs":  # inputs eager must reject, with the error torch documents
        return (error.sample_input for error in op.error_inputs(device))
    requires_grad = op.supports_autograd and dtype in op.supported_backward_dtypes(device)
    if kind == "extremal":  # torch's reference inputs holding inf, nan or huge values
        drawn = op.reference_inputs(device, dtype, requires_grad=requires_grad)
        return (sample for sample in drawn if _extremal(sample))
    return iter(op.sample_inputs(device, dtype, requires_grad=requires_grad))


def check_op(
    op: Any, dtype: torch.dtype, device: str, backend: str, samples: int, kind: str = "sample"
) -> list[Record]:
    """The first `samples` inputs of one kind (sample, extremal, error_inputs) of one op.

    Never raises: what goes wrong becomes a record.
    """
    name = full_name(op)
    label = {"sample": str(dtype).removeprefix("torch."), "error_inputs": kind}.get(
        kind, f"{str(dtype).removeprefix('torch.')}-{kind}"
    )
    base = Record(name, label, device, backend, -1, "skip", "")
    if name in RANDOM_OPS or getattr(op, "has_nondeterministic_output", False):  # torch 2.13+
        base.reason = "random or uninitialised output"
        return [base]
    if dtype not in op.supported_dtypes(device):
        base.reason = f"{base.dtype} not supported on {device}"
        return [base]
    if kind == "error_inputs" and op.error_inputs_func is None:
        base.reason = "the op lists no error_inputs"
        return [base]
    records = []
    with quiet():
        try:
            drawn = list(itertools.islice(_draw(op, dtype, device, kind), samples))
        except Exception as exc:
            base.reason = f"drawing samples raised {_first_line(exc)}"
            return [base]
        if not drawn:
            base.reason = f"no {kind} inputs"
            return [base]
        for index, sample in enumerate(drawn):
            try:
                record = check_sample(op, index, sample, dtype, device, backend)
                record.dtype = label
                records.append(record)
            except Exception as exc:  # the harness's own oracle failed: say so, keep going
                reason = (
                    f"{_first_line(exc)} (at {traceback.extract_tb(exc.__traceback__)[-1].name})"
                )
                records.append(Record(name, label, device, backend, index, "harness", reason))
            finally:
                torch._dynamo.reset()
    return records
