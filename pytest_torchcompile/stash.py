"""What the plugin keeps on pytest's config and items: its stash keys, the session's state, and
the one lookup of a test's settings. The one key not here is each test's CheckedTest, kept by
checked_test.py itself: naming that class here would make the two modules import each other.

No torch here: the plugin loads this in every session.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_torchcompile import caches
from pytest_torchcompile.counting import budgets
from pytest_torchcompile.counting.records import CoverageRecord, ParityRecord
from pytest_torchcompile.settings import SessionSettings, Settings

if TYPE_CHECKING:  # named in the keys' types only (a key is subscripted with a string)
    from pytest_torchcompile.adoption.callsites import Constructions  # noqa: F401
    from pytest_torchcompile.runner import Checker  # noqa: F401


@dataclass
class Run:
    """What this process learns in a session, for the budget file, the JSON report and summary."""

    budget_file: budgets.Budgets | None = None  # the --compile-budgets file, as loaded at start
    budget_path: Path | None = None
    report_path: Path | None = None
    records: list[ParityRecord] = field(default_factory=list)
    reported: set[str] = field(default_factory=set)  # node ids of every test report
    collected: set[str] = field(default_factory=set)  # every test collected, before deselection
    uncollected: set[str] = field(default_factory=set)  # collectors skipped at collection
    collection_failed: bool = False
    workers_collected: int = 0  # xdist workers that sent the node ids they collected
    worker_gpus: dict[str, str] = field(default_factory=dict)  # worker id -> "cuda:1 (name)"
    worker_lost: bool = False  # an xdist worker went down without them
    verdicts: dict[str, budgets.BudgetVerdict] | None = None  # when checking a budget file
    updated: str | None = None  # what --compile-budgets-update wrote, for the summary
    checked_calls: set[Any] = field(default_factory=set)  # intercepted call signatures checked
    # per class, the signatures checked or diverged (--compile-parity-signatures)
    checked_per_class: dict[str, set[Any]] = field(default_factory=dict)
    # Zero-change mode's compiles that serve later tests (running/shared_compiles.py), made by
    # the first intercepted test that needs them: torch is not imported here.
    shared_compiles: Any = None
    coverage: list[CoverageRecord] = field(default_factory=list)  # one per intercepted test
    # --compile-parity-functions: what functions.find found (its cache), and the functions
    # this process's coverage records listed already
    functions: dict[Any, Any] = field(default_factory=dict)
    listed_functions: set[str] = field(default_factory=set)
    # Zero-change mode's divergences triaged in this process: failure key -> (the test, what
    # its triage found), so a later test failing the same way reuses it (triage.Triage)
    triaged: dict[Any, tuple[str, Any]] = field(default_factory=dict)
    triage_s: float = 0.0  # the seconds triage took in this process (--compile-triage-budget)
    cache: caches.CachePlan | None = None  # --compile-cache
    cache_counts: dict[str, int] = field(default_factory=dict)  # its hits and misses, all processes


# On the config: the session's own settings, the tests' settings before markers, the run.
SESSION_KEY = pytest.StashKey[SessionSettings]()  # budgets, report, parity mode, ...
SESSION_TEST_SETTINGS = pytest.StashKey[Settings]()  # command line > ini > default
RUN_KEY = pytest.StashKey[Run]()
# On a test item.
SETTINGS_KEY = pytest.StashKey[Settings]()  # its settings, with its markers applied
SETTING_ERROR_KEY = pytest.StashKey[str]()  # a marker that is invalid: the test's setup error
CHECKER_KEY = pytest.StashKey["Checker"]()
TMP_PATHS_KEY = pytest.StashKey[pytest.TempPathFactory]()  # for the default --compile-artifacts
RECORD_KEY = pytest.StashKey[ParityRecord]()
COVERAGE_KEY = pytest.StashKey[CoverageRecord]()  # intercepted tests: classes reached
CONSTRUCTIONS_KEY = pytest.StashKey["Constructions"]()  # intercepted tests: classes constructed


def settings_of(item: pytest.Item) -> Settings:
    """A test's settings: its markers' over the session's (those resolved at collection)."""
    return item.stash.get(SETTINGS_KEY, None) or item.config.stash[SESSION_TEST_SETTINGS]


__all__ = [
    "CHECKER_KEY",
    "CONSTRUCTIONS_KEY",
    "COVERAGE_KEY",
    "RECORD_KEY",
    "RUN_KEY",
    "SESSION_KEY",
    "SESSION_TEST_SETTINGS",
    "SETTINGS_KEY",
    "SETTING_ERROR_KEY",
    "TMP_PATHS_KEY",
    "Run",
    "settings_of",
]
