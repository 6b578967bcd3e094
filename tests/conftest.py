"""Shared test set-up: planted wrong backends importable as `planted:NAME` (here and, with the
`planted_in_subprocesses` fixture, in the processes a test starts), and inline pytester runs that
keep torch loaded between runs."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path

import _pytest.pytester
import pytest

TESTS = str(Path(__file__).parent)  # where planted.py lives
sys.path.insert(0, TESTS)


class _KeepLibraries(_pytest.pytester.SysModulesSnapshot):
    """pytester drops every module an inline run imported. For torch that means importing it
    again on top of its still-registered C++ operator libraries, which fails; so only the
    generated test modules and conftests are dropped."""

    def __init__(self, preserve: Callable[[str], bool] | None = None) -> None:
        super().__init__(preserve=lambda name: not name.startswith(("test_", "conftest")))


_pytest.pytester.SysModulesSnapshot = _KeepLibraries  # type: ignore[misc]


@pytest.fixture
def planted_in_subprocesses(monkeypatch: pytest.MonkeyPatch) -> None:
    """planted.py importable in the processes a test starts (runpytest_subprocess, its xdist
    workers) too."""
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([TESTS, os.environ.get("PYTHONPATH", "")]))
