"""Ground truth for accounting: programs whose graph breaks, recompiles and fallbacks are known.

Each row runs through the compile_parity checker exactly as a test would (one checker, one
compile cache, every call of the row), and asserts the exact counts, then that the budgets a
user would write act on them: the true count passes, one below it fails.

The truth is torch 2.13's. Rows marked "2.11?" are where Dynamo's handling changed in recent
releases; the table runs on torch 2.11 on the GPU machine, and a row that differs there gets
its 2.11 truth here, said so in the row.
"""

from __future__ import annotations

import linecache
import logging
import os
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest
import torch

from pytest_torchcompile import (
    CompileParityFailure,
    EagerFallbackError,
    GraphBreakBudgetExceeded,
    RecompileLimitExceeded,
)
from pytest_torchcompile.counting.records import CompileCounts
from pytest_torchcompile.runner import Checker, isolated
from pytest_torchcompile.settings import Settings, apply

_log = logging.getLogger("ground_truth")
_log.addHandler(logging.NullHandler())
_log.propagate = False

Check = Callable[..., Any]


# --- the programs ---------------------------------------------------------------------------


def with_print(x: torch.Tensor) -> torch.Tensor:
    x = x + 1
    print("ground truth")
    return x * 2


def with_logging(x: torch.Tensor) -> torch.Tensor:
    x = x + 1
    _log.warning("ground truth")
    return x * 2


def with_warning(x: torch.Tensor) -> torch.Tensor:
    x = x + 1
    warnings.warn("ground truth", UserWarning, stacklevel=1)
    return x * 2


def with_item(x: torch.Tensor) -> torch.Tensor:
    scale = x.sum().item()
    return x * scale


def with_tolist(x: torch.Tensor) -> torch.Tensor:
    first = x.tolist()[0]
    return x + first


def with_numpy(x: torch.Tensor) -> torch.Tensor:
    return torch.from_numpy(np.sin(x.numpy())) + 1


def with_two_breaks(x: torch.Tensor) -> torch.Tensor:
    x = x + 1
    torch._dynamo.graph_break()
    x = x * 2
    torch._dynamo.graph_break()
    return x - 3


@torch.compiler.disable
def _disabled(x: torch.Tensor) -> torch.Tensor:
    return x + 1


def with_disabled_callee(x: torch.Tensor) -> torch.Tensor:
    x = x * 2
    x = _disabled(x)
    return x * 3


def data_dependent_if(x: torch.Tensor) -> torch.Tensor:
    if x.sum() > 0:
        return x + 1
    return x - 1


def break_in_loop(x: torch.Tensor) -> torch.Tensor:
    for _ in range(2):
        x = x + 1
        torch._dynamo.graph_break()
    return x


def with_nonzero(x: torch.Tensor) -> torch.Tensor:
    return torch.nonzero(x * 2) + 1


def _helper_that_prints(x: torch.Tensor) -> torch.Tensor:
    x = x + 1
    print("ground truth helper")
    return x * 2


def calls_helper_that_prints(x: torch.Tensor) -> torch.Tensor:
    x = x - 1
    x = _helper_that_prints(x)
    return x / 2


def prints_twice_on_one_line(x: torch.Tensor) -> torch.Tensor:
    x = x + 1
    print("ground truth"); x = x * 2; print("ground truth")  # noqa: E702  # fmt: skip
    return x - 3


def two_items_on_one_line(x: torch.Tensor) -> torch.Tensor:
    return x * (x.sum().item() + x.amax().item())


def branch_then_print(x: torch.Tensor) -> torch.Tensor:
    x = x + 1 if x.sum() > 0 else x - 1
    print("ground truth")
    return x * 2


def _helper_that_breaks(x: torch.Tensor) -> torch.Tensor:
    x = x + 1
    torch._dynamo.graph_break()
    return x * 2


def calls_helper_twice(x: torch.Tensor) -> torch.Tensor:
    x = _helper_that_breaks(x)
    x = _helper_that_breaks(x)
    return x - 1


def break_then_sum(x: torch.Tensor) -> torch.Tensor:
    x = x + 1
    torch._dynamo.graph_break()
    return x.sum()


def double(x: torch.Tensor) -> torch.Tensor:
    return x * 2


def column_sums(x: torch.Tensor) -> torch.Tensor:
    return x.sum(0) + 1


def scaled(x: torch.Tensor, factor: float) -> torch.Tensor:
    return x * factor


class Counter(torch.nn.Module):
    """A module whose Python attribute changes every call: a new guard value each time."""

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        return x + self.calls


# --- the rows ---------------------------------------------------------------------------------


def _t(*shape: int, **kwargs: Any) -> torch.Tensor:
    return torch.arange(1.0, 1.0 + float(np.prod(shape)), **kwargs).reshape(shape) / 7


def once(fn: Callable[..., Any], *args: Any) -> Callable[[Check], None]:
    return lambda check: check(fn, *args)


def each(fn: Callable[..., Any], *arg_tuples: tuple[Any, ...]) -> Callable[[Check], None]:
    def drive(check: Check) -> None:
        for args in arg_tuples:
            check(fn, *args)

    return drive


def quietly(drive: Callable[[Check], None]) -> Callable[[Check], None]:
    def run(check: Check) -> None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            drive(check)

    return run


def marked_dynamic(check: Check) -> None:
    first = _t(5)
    torch._dynamo.mark_dynamic(first, 0)
    check(double, first)
    check(double, _t(6))
    check(double, _t(7))


def grad_mode_change(check: Check) -> None:
    check(double, _t(4))
    with torch.no_grad():
        check(double, _t(4))


@dataclass(frozen=True)
class Row:
    name: str
    drive: Callable[[Check], None]
    graphs: int
    breaks: int = 0
    at: tuple[str, ...] = ()  # source at each break's location, in order
    recompiles: tuple[str, ...] = ()  # categories, in order
    fallbacks: tuple[str, ...] = ()  # kinds
    error: type[CompileParityFailure] | None = None  # raised whatever the budgets
    options: dict[str, Any] = field(default_factory=dict)


ROWS = [
    Row("no break, same shape three times", each(double, (_t(4),), (_t(4),), (_t(4),)), graphs=1),
    Row("print", once(with_print, _t(4)), graphs=2, breaks=1, at=("print(",)),
    Row("logging", once(with_logging, _t(4)), graphs=2, breaks=1, at=("_log.warning(",)),  # 2.11?
    Row(
        "warnings.warn",
        quietly(once(with_warning, _t(4))),
        graphs=2,
        breaks=1,
        at=("warnings.warn(",),
    ),  # 2.11?
    Row(".item()", once(with_item, _t(4)), graphs=2, breaks=1, at=(".item()",)),
    # The break comes before any op: the graph in front of it is empty and never compiled.
    Row(".tolist()", once(with_tolist, _t(4)), graphs=1, breaks=1, at=(".tolist()",)),
    # Dynamo traces NumPy through torch._numpy: no break at all.
    Row("numpy conversion", once(with_numpy, _t(4)), graphs=1, options={"backward": False}),
    Row(
        "graph_break() twice",
        once(with_two_breaks, _t(4)),
        graphs=3,
        breaks=2,
        at=("graph_break()",) * 2,
    ),
    Row(
        "torch.compiler.disable'd callee",
        once(with_disabled_callee, _t(4)),
        graphs=2,
        breaks=1,
        at=("_disabled(x)",),
    ),
    # One break (counters["graph_break"] has none); each branch taken is its own continuation.
    Row(
        "data-dependent if",
        each(data_dependent_if, (_t(4),), (-_t(4),)),
        graphs=3,
        breaks=1,
        at=("if x.sum() > 0",),
    ),
    # Dynamo cannot resume inside a loop, so it gives up on the frame: all of it runs eagerly.
    # 2.11? (releases before ~2.8 skipped such frames without recording a failure)
    Row(
        "break inside a loop",
        once(break_in_loop, _t(4)),
        graphs=0,
        breaks=1,
        at=("graph_break()",),
        fallbacks=("skipped",),
        error=EagerFallbackError,
    ),
    Row(
        "nonzero (dynamic output shape)",
        once(with_nonzero, _t(4)),
        graphs=2,
        breaks=1,
        at=("nonzero(",),
    ),
    # The caller breaks at the call (it cannot inline the helper) and the helper, compiled as
    # its own frame, breaks at the print: two breaks, four graphs, as TORCH_LOGS shows them.
    Row(
        "break in a called helper",
        once(calls_helper_that_prints, _t(4)),
        graphs=4,
        breaks=2,
        at=("print(",) * 2,
    ),
    # Breaks are events: Dynamo breaks the frame at the first print, then the continuation
    # at the second. torch counts two (counters["graph_break"], TORCH_LOGS=graph_breaks).
    Row(
        "two prints on one line",
        once(prints_twice_on_one_line, _t(4)),
        graphs=3,
        breaks=2,
        at=("print(",) * 2,
    ),
    Row(
        "two .item() on one line",
        once(two_items_on_one_line, _t(4)),
        graphs=3,
        breaks=2,
        at=(".item()",) * 2,
    ),
    # The branch breaks once; each side's continuation then breaks at the print: two events at
    # one line, in two different frames (both continuations then resume in one shared frame).
    Row(
        "one print reached in both branches' continuations",
        each(branch_then_print, (_t(4),), (-_t(4),)),
        graphs=4,
        breaks=3,
        at=("x.sum() > 0", "print(", "print("),
    ),
    # The caller breaks at each call (its frame at the first, its continuation at the second);
    # the helper, compiled once as its own frame, breaks once: three, as counters["graph_break"].
    Row(
        "graph_break() in a helper called twice",
        once(calls_helper_twice, _t(4)),
        graphs=3,
        breaks=3,
        at=("graph_break()",) * 3,
    ),
    Row(
        "size change, automatic dynamic",
        each(double, (_t(2),), (_t(3),), (_t(4),), (_t(5),)),
        graphs=2,
        recompiles=("size",),
    ),
    Row(
        "dynamic=False over four sizes",
        each(double, (_t(2),), (_t(3),), (_t(4),), (_t(5),)),
        graphs=4,
        recompiles=("size", "size", "size"),
        options={"dynamic": False},
    ),
    # The dynamic graph assumes size >= 2; sizes 1 and 0 are specialized, each once.
    Row(
        "size-1 specialization",
        each(double, (_t(2),), (_t(3),), (_t(1),), (_t(1),), (_t(4),)),
        graphs=3,
        recompiles=("size", "size"),
    ),  # 2.11?
    Row(
        "size-0 specialization",
        each(double, (_t(2),), (_t(3),), (torch.zeros(0),), (torch.zeros(0),), (_t(4),)),
        graphs=3,
        recompiles=("size", "size"),
    ),  # 2.11?
    Row("mark_dynamic", marked_dynamic, graphs=1),
    Row(
        "dtype change",
        each(double, (_t(4),), (_t(4, dtype=torch.float64),)),
        graphs=2,
        recompiles=("dtype",),
    ),
    Row(
        "requires_grad change",
        each(double, (_t(4),), (_t(4).requires_grad_(),)),
        graphs=2,
        recompiles=("requires_grad",),
        options={"backend": "aot_eager"},
    ),
    Row("grad-mode change", grad_mode_change, graphs=2, recompiles=("grad_mode",)),
    Row(
        "stride change",
        each(column_sums, (_t(3, 4),), (_t(4, 3).t(),)),
        graphs=2,
        recompiles=("stride",),
    ),
    # The first new value recompiles; after that the int (or float) is dynamic.
    Row(
        "Python int argument",
        each(scaled, (_t(4), 2), (_t(4), 3), (_t(4), 4)),
        graphs=2,
        recompiles=("python_value",),
    ),
    Row(
        "Python float argument",
        each(scaled, (_t(4), 2.0), (_t(4), 3.0), (_t(4), 4.5)),
        graphs=2,
        recompiles=("python_value",),
    ),  # 2.11?
    # Each size recompiles the frame and its continuation after the break: one recompile each.
    Row(
        "recompile across a graph break",
        each(break_then_sum, (_t(2),), (_t(3),), (_t(4),)),
        graphs=6,
        breaks=1,
        at=("graph_break()",),
        recompiles=("size", "size"),
        options={"dynamic": False},
    ),
    # recompile_limit is 8: seven recompiles, then Dynamo refuses and the call would go eager.
    # The frame and the continuation between the prints recompile for each size, breaking at the
    # same prints again: still two breaks.
    Row(
        "recompile across two breaks on one line",
        quietly(each(prints_twice_on_one_line, (_t(2),), (_t(3),), (_t(4),))),
        graphs=9,
        breaks=2,
        at=("print(",) * 2,
        recompiles=("size", "size"),
        options={"dynamic": False},
    ),
    Row(
        "module attribute changes every call",
        each(Counter(), *[(_t(2),)] * 10),
        graphs=8,
        recompiles=("python_value",) * 7,
        fallbacks=("recompile_limit",),
        error=RecompileLimitExceeded,
    ),
]


# --- running a row ----------------------------------------------------------------------------


@dataclass
class Outcome:
    counts: CompileCounts
    error: CompileParityFailure | None


def run(row: Row, **budgets: Any) -> Outcome:
    """The row as a test marked compile_parity(**options, **budgets) would run it."""
    options = {"backend": "eager", **row.options, **budgets}
    checker = Checker(apply(Settings(), options, f"marker on {row.name}"))
    error = None
    with isolated(checker.accountant):
        try:
            row.drive(checker)
            checker.finish()
        except CompileParityFailure as exc:
            error = exc
    return Outcome(checker.accountant.counts(), error)


@pytest.mark.parametrize("row", ROWS, ids=[row.name for row in ROWS])
def test_counts_are_exact_and_the_true_budget_passes(row: Row) -> None:
    outcome = run(row, max_graph_breaks=row.breaks, max_recompiles=len(row.recompiles))
    counts = outcome.counts
    assert len(counts["graphs"]) == row.graphs, counts["graphs"]
    assert len(counts["graph_breaks"]) == row.breaks, counts["graph_breaks"]
    for brk, source in zip(counts["graph_breaks"], row.at, strict=True):
        filename, line = brk["location"].rsplit(":", 1)
        assert os.path.samefile(filename, __file__)
        assert source in linecache.getline(__file__, int(line)), brk
    assert tuple(r["category"] for r in counts["recompiles"]) == row.recompiles, counts[
        "recompiles"
    ]
    assert tuple(f["kind"] for f in counts["fallbacks"]) == row.fallbacks, counts["fallbacks"]
    if row.error is None:
        assert outcome.error is None
    else:
        assert isinstance(outcome.error, row.error), outcome.error


BREAK_ROWS = [row for row in ROWS if row.breaks and row.error is None]
RECOMPILE_ROWS = [row for row in ROWS if row.recompiles and row.error is None]


@pytest.mark.parametrize("row", BREAK_ROWS, ids=[row.name for row in BREAK_ROWS])
def test_one_graph_break_below_the_truth_fails(row: Row) -> None:
    outcome = run(row, max_graph_breaks=row.breaks - 1, max_recompiles=len(row.recompiles))
    assert isinstance(outcome.error, GraphBreakBudgetExceeded)
    message = str(outcome.error)
    assert f"{row.breaks} graph break" in message
    assert f"max_graph_breaks={row.breaks - 1} (from marker on {row.name})" in message
    for brk in outcome.counts["graph_breaks"]:
        assert f"{brk['location']}: {brk['reason']}" in message


@pytest.mark.parametrize("row", RECOMPILE_ROWS, ids=[row.name for row in RECOMPILE_ROWS])
def test_one_recompile_below_the_truth_fails(row: Row) -> None:
    budget = len(row.recompiles) - 1
    outcome = run(row, max_graph_breaks=row.breaks, max_recompiles=budget)
    assert isinstance(outcome.error, RecompileLimitExceeded)
    message = str(outcome.error)
    assert f"max_recompiles={budget} (from marker on {row.name})" in message
    for recompile in outcome.counts["recompiles"]:
        assert f"[{recompile['category']}]: {recompile['reason']}" in message
