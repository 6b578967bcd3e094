"""What the checker's failures and notes say: the inputs, the context line, and why it refused.

Text only: each function builds a message (or the exception carrying it) from what the checker
hands it, so the checker's own code reads as the steps of a check.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from pytest_torchcompile import _compat
from pytest_torchcompile.errors import (
    NOTE_PREFIX,
    CompileParityFailure,
    ExportFailure,
    GraphBreakBudgetExceeded,
    RecompileLimitExceeded,
    first_line,
)
from pytest_torchcompile.running.state import named_inputs
from pytest_torchcompile.settings import SettingError, Settings
from pytest_torchcompile.tensor_text import describe


def inputs_note(args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> str:
    """An `Inputs:` block: each scalar and tensor input in one line (dtype, shape, strides,
    offset, device, layout), with the inputs that share a storage named."""

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


def exclusion_hints(args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> list[str]:
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
        if not (value.is_floating_point() or value.is_complex()):
            found.append(
                f"is {value.dtype}: draw it with tcst.tensors(dtypes=tcst.float_dtypes()) if the "
                "program takes floating tensors only"
            )
        if value.dtype in (torch.float16, torch.bfloat16):
            found.append(
                f"is {value.dtype}: draw it with tcst.float_dtypes(sizes=(32, 64)) if the program "
                "does not support half precision"
            )
        hints += [f"{name} {what}" for what in found]
    return hints


def context_line(described: str, devices: list[str]) -> str:
    """`backend=... mode=... device=...`, with the TF32 settings where a CUDA device was seen:
    both sides run under the caller's TF32 settings, the float64 reference never does."""
    context = f"{described} device={','.join(devices) or 'cpu'}"
    if any(seen.startswith("cuda") for seen in devices):
        matmul = torch.backends.cuda.matmul.allow_tf32
        cudnn = torch.backends.cudnn.allow_tf32
        context += f" tf32(matmul={'on' if matmul else 'off'}, cudnn={'on' if cudnn else 'off'})"
    return context


def rejection_note(
    args: tuple[Any, ...], kwargs: Mapping[str, Any], source: str, *, examples: bool
) -> str:
    """The note on eager's own exception where both sides raised it: the program rejects the
    input; which property of each input is unusual and the strategy argument that excludes it."""
    lines = [
        f"{NOTE_PREFIX}eager itself raised this on the call's inputs, and the compiled "
        "run raised alike, so this is the program rejecting its input, not a miscompile.",
        *inputs_note(args, kwargs).splitlines()[1:],
        *(f"  {hint}" for hint in exclusion_hints(args, kwargs)),
    ]
    if examples:
        lines.append(
            f"  reject_eager_errors=False ({source}): with its default, True, an example "
            "eager rejects is no example at all (hypothesis.reject()) and the test goes on."
        )
    return "\n".join(lines)


def both_rejected_note(args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> str:
    """Where eager and compiled both raised, of other types: the program rejects the input on
    both sides (a float-only function given integers), and how to keep such inputs out ("" where
    no input is unusual)."""
    hints = exclusion_hints(args, kwargs)
    if not hints:
        return ""
    lines = ["Both sides rejected these inputs, with different exceptions; to keep them out:"]
    return "\n" + "\n".join([*lines, *(f"  {hint}" for hint in hints)])


def fresh_cache_note(recompiles: int, call: int, settings: Settings) -> str:
    """The report's note where Hypothesis examples hit Dynamo's recompile limit and the checker
    started a fresh compile cache."""
    budget = settings.max_recompiles
    verdict = (
        f"max_recompiles={budget} (from {settings.source('max_recompiles')}) judges the "
        "recompiles of all examples"
        if budget is not None
        else "no max_recompiles budget is set, so recompiles do not fail the test"
    )
    return (
        f"recompile limit ({_compat.recompile_limit_setting()}) hit after {recompiles} "
        f"recompiles at checker call {call}: started a fresh compile cache; {verdict}"
    )


def compile_refusal(
    compiled: BaseException | None,
    eager: BaseException | None,
    settings: Settings,
    context: str,
    refused_by: str | None = None,
) -> CompileParityFailure | SettingError | None:
    """The verdict where the compiler refused the call (Dynamo's recompile limit, a graph break
    under fullgraph, or `refused_by`: the export path whose exporter raised `compiled`) and
    eager did not raise alike, or the misuse where it refused a dimension dynamic_dims marks but
    the program specializes; None otherwise (parity judges it)."""
    if compiled is None or (
        eager is not None
        and isinstance(_compat.user_exception(compiled), type(_compat.user_exception(eager)))
    ):
        return None
    if refused_by is not None:
        return export_failure(refused_by, compiled, settings, context)
    if _compat.is_recompile_limit_error(compiled):
        return RecompileLimitExceeded(
            "Dynamo hit its recompile limit, so this call would have run eagerly and "
            f"shown no parity: {compiled}\n{context}"
        )
    if settings.fullgraph and _compat.is_graph_break_error(compiled):
        return GraphBreakBudgetExceeded(
            f"fullgraph=True (from {settings.source('fullgraph')}) but the program has a "
            f"graph break: {first_line(compiled)}\n{context}"
        )
    if settings.dynamic_dims != "off" and _compat.is_constraint_violation(compiled):
        return SettingError(
            f"Invalid dynamic_dims={settings.dynamic_dims!r} from "
            f"{settings.source('dynamic_dims')}: the program specializes a dimension it marks "
            f"dynamic, so Dynamo refused to compile it: {_violation(compiled)}\nMark only the "
            "dimensions that vary (e.g. backed:0 for a batch dimension), or use unbacked.\n"
            f"{context}"
        )
    return None


_EXPORTER_TEXT_LIMIT = 4000


def export_failure(
    path: str, exc: BaseException, settings: Settings, context: str
) -> ExportFailure:
    """The failure where torch.export or AOTInductor's packaging refused the program, with the
    exporter's own message (which says where in the user's code, and how to fix it)."""
    text = str(exc).strip()
    if len(text) > _EXPORTER_TEXT_LIMIT:
        text = text[:_EXPORTER_TEXT_LIMIT] + " [...]"
    step = "export" if path == "torch.export" else "package"
    return ExportFailure(
        f"{path} could not {step} the program (backend={settings.backend}, from "
        f"{settings.source('backend')}), so there was no compiled run and no parity was shown. "
        "This path compiles the whole program, so what torch.compile would break the graph at "
        f"fails here. The exporter said:\n\n{type(exc).__name__}: {text}\n\n{context}"
    )


def _violation(exc: BaseException) -> str:
    """Dynamo's constraint violation without its advice on torch.export's Dim."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip().startswith("- ")]
    return " ".join(line.removeprefix("- ").split(". If you")[0] for line in lines) or first_line(
        exc
    )
