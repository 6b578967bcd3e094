"""A pytest plugin (`-p silent_excuses`) that re-judges every leaf verdict independently.

Loaded into a run of real suites, it wraps `judges.judge` and records any outcome no rule stands
behind: a leaf passed although it is outside the plain tolerance (assert_close's, with the
reduction-order noise floor), or a leaf excused or not judged without the rule and a note that
names it. At the session's end the records go to the file named by the environment variable
SILENT_EXCUSES (one line each; an empty file when there were none).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

_FOUND: list[str] = []
_JUDGED = [0]


def pytest_configure(config: pytest.Config) -> None:
    from pytest_torchcompile.judging import judges

    judge = judges.judge

    def rejudged(case: judges.Case) -> judges.Outcome:
        outcome = judge(case)
        _JUDGED[0] += 1
        problem = _unsupported(case, outcome)
        if problem:
            _FOUND.append(f"{case.name}: {problem}")
        return outcome

    judges.judge = rejudged  # type: ignore[assignment]


def _unsupported(case: object, outcome: object) -> str:
    """What is wrong with `outcome` on `case`, or ""."""
    from pytest_torchcompile.judging import judges
    from pytest_torchcompile.judging.closeness import is_inexact, noise_floor, scan_leaf

    assert isinstance(case, judges.Case) and isinstance(outcome, judges.Outcome)
    if outcome.verdict is judges.Verdict.PASSED:
        e, c = case.eager, case.compiled
        floor = noise_floor(e, e.dtype) if is_inexact(e) else 0.0
        outside = scan_leaf(c, e, case.rtol, case.atol + floor).mismatched
        return f"passed outside the plain tolerance at {outside} element(s)" if outside else ""
    if outcome.verdict in (judges.Verdict.EXCUSED, judges.Verdict.NOT_JUDGED):
        named = {
            "float64 reference",
            "eager's rounding noise",
            "near ties",
            "eager's run-to-run spread",
        }
        if outcome.rule not in named | {judges.CONTROL}:
            return f"{outcome.verdict.value} by an unnamed rule {outcome.rule!r}"
        if not outcome.note.startswith(f"{case.name}: "):
            return f"{outcome.verdict.value} without a note naming the leaf: {outcome.note!r}"
    return ""


def pytest_unconfigure(config: pytest.Config) -> None:
    where = os.environ.get("SILENT_EXCUSES")
    if where:
        lines = [f"judged {_JUDGED[0]}", *_FOUND]
        Path(where).write_text("\n".join(lines) + "\n", encoding="utf-8")
