"""A pytest plugin for the zoo runner: which tests failed, and with which exception types.

Loaded with ``-p zoo.outcomes --zoo-outcomes=PATH``; writes one JSON object per test report
that failed (and one per passed test), so the runner can tell the plugin's verdicts (subclasses
of CompileParityFailure) from other errors. Exception groups (Hypothesis's several distinct
failures, or a FlakyFailure) are searched for the exceptions inside them.
"""

from __future__ import annotations

import json
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import Any

import pytest

_RECORDS = pytest.StashKey[list[dict[str, Any]]]()


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--zoo-outcomes", metavar="PATH", help="write per-test outcomes as JSON")


def pytest_configure(config: pytest.Config) -> None:
    config.stash[_RECORDS] = []


def _leaves(exc: BaseException) -> Iterator[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            yield from _leaves(inner)
    else:
        yield exc


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    from pytest_torchcompile.errors import CompileParityFailure

    report = yield
    if report.failed and call.excinfo is not None:
        leaves = list(_leaves(call.excinfo.value))
        item.config.stash[_RECORDS].append(
            {
                "nodeid": item.nodeid,
                "when": report.when,
                "outcome": "failed",
                "raised": type(call.excinfo.value).__name__,
                "leaves": [type(exc).__name__ for exc in leaves],
                "ours": any(isinstance(exc, CompileParityFailure) for exc in leaves),
                "message": (str(leaves[0]).strip().splitlines() or [""])[0][:200],
            }
        )
    elif report.when == "call" and report.outcome in ("passed", "skipped"):
        item.config.stash[_RECORDS].append(
            {"nodeid": item.nodeid, "when": "call", "outcome": report.outcome}
        )
    return report


def pytest_sessionfinish(session: pytest.Session) -> None:
    path = session.config.getoption("--zoo-outcomes")
    if path:
        Path(path).write_text(json.dumps(session.config.stash[_RECORDS], indent=1))
