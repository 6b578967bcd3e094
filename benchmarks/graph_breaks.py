"""Graph-break counts: the plugin's against torch's own, on the ground-truth programs.

    python benchmarks/graph_breaks.py            # prints a markdown table (CPU, backend eager)

The programs are the rows of tests/unit/test_accounting_ground_truth.py that break a graph (the
test asserts the plugin's count for each; here it is set beside torch's). For each row:
  calls      how many times the row calls its program (new sizes recompile it);
  plugin     graph breaks the compile_parity checker counts over all the row's calls;
  explain    torch._dynamo.explain(fn)(*args).graph_break_count on the row's first call
             (explain resets Dynamo and sees one call; it reports graphs - 1);
  counters   sum(torch._dynamo.utils.counters["graph_break"].values()) after a plain
             torch.compile(fn, backend="eager") run of all the row's calls;
  graphs     graphs that plain run handed to the backend.
Results and who is right where they disagree: BENCHMARKS.md.
"""

from __future__ import annotations

import contextlib
import io
import sys
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from torch._dynamo.utils import counters

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.unit.test_accounting_ground_truth import ROWS, Row, run


def _plain(row: Row) -> tuple[int, int, list[tuple[Callable[..., Any], tuple[Any, ...]]]]:
    """counters["graph_break"] total and graphs of a plain torch.compile run of the row, and
    its calls."""
    graphs = 0

    def backend(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Any:
        nonlocal graphs
        graphs += 1
        return gm.forward

    compiled: dict[Callable[..., Any], Callable[..., Any]] = {}
    calls: list[tuple[Callable[..., Any], tuple[Any, ...]]] = []

    def call(fn: Callable[..., Any], *args: Any) -> None:
        calls.append((fn, args))
        if fn not in compiled:
            compiled[fn] = torch.compile(fn, backend=backend, dynamic=row.options.get("dynamic"))
        with contextlib.suppress(Exception):  # a call eager rejects too is the program's
            compiled[fn](*args)

    torch._dynamo.reset()
    counters.clear()
    row.drive(call)
    total = sum(counters["graph_break"].values())
    torch._dynamo.reset()
    return total, graphs, calls


def _explain(fn: Callable[..., Any], args: tuple[Any, ...]) -> int:
    return int(torch._dynamo.explain(fn)(*args).graph_break_count)


def main() -> None:
    lines = [
        "| program | calls | plugin | `explain()` graph_break_count "
        '| `counters["graph_break"]` | graphs |',
        "|---|---:|---:|---:|---:|---:|",
    ]
    for row in ROWS:
        if not row.breaks:
            continue
        with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            plugin = len(run(row).counts["graph_breaks"])
            total, graphs, calls = _plain(row)
            explained = _explain(*calls[0])
        cells = (row.name, len(calls), plugin, explained, total, graphs)
        lines.append("| " + " | ".join(map(str, cells)) + " |")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
