"""scripts/false_alarm_sweep.py keeps its figures when cut off: results are written as runs
finish, and SIGTERM (as from `timeout`) still prints the table of the runs that finished."""

from __future__ import annotations

import importlib.util
import os
import signal
import sys
import time
from pathlib import Path
from types import ModuleType

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "false_alarm_sweep.py"


@pytest.fixture
def sweep() -> ModuleType:
    spec = importlib.util.spec_from_file_location("false_alarm_sweep", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    yield module
    del sys.modules[spec.name]


def _args(tmp_path: Path) -> list[str]:
    return [
        *("-n", "1", "--backends", "eager", "--seeds", "0", "1", "--random", "0"),
        *("--only", "zoo", "--logs", str(tmp_path)),
    ]


def _wait_for_runs(logs: Path, n: int) -> None:
    """Until the sweep has written `n` finished runs to runs.jsonl (the workers race ahead)."""
    deadline = time.monotonic() + 10
    while len((logs / "runs.jsonl").read_text().splitlines()) < n:
        assert time.monotonic() < deadline, f"runs.jsonl never reached {n} runs"
        time.sleep(0.01)


def _wait_for_summary(logs: Path, start: str) -> None:
    """Until summary.md begins with `start` (the sweep rewrites it after each run's line)."""
    deadline = time.monotonic() + 10
    summary = logs / "summary.md"
    while not (summary.exists() and summary.read_text().startswith(start)):
        assert time.monotonic() < deadline, f"summary.md never began with {start!r}"
        time.sleep(0.01)


def test_each_finished_run_is_written_as_it_finishes(sweep, tmp_path, monkeypatch, capsys):
    def execute(run, devices, threads, timeout, logs):
        if run.seed == 1 and "train_step" in run.file:  # the last run: the 11 before are written
            _wait_for_runs(logs, 11)
            _wait_for_summary(logs, "11 of 12 runs done")  # written just after runs.jsonl
        run.failures = ["test_x: ParityError: boom"] if "softmax" in run.file else []
        return run

    monkeypatch.setattr(sweep, "execute", execute)
    assert sweep.main(_args(tmp_path)) == 1
    assert len((tmp_path / "runs.jsonl").read_text().splitlines()) == 12
    assert (tmp_path / "summary.md").read_text().startswith("12 of 12 runs done")
    out = capsys.readouterr().out
    assert "failures (2):" in out and "cut off" not in out


def test_sigterm_stops_the_sweep_and_still_prints_the_table(sweep, tmp_path, monkeypatch, capsys):
    def execute(run, devices, threads, timeout, logs):
        if run.seed == 1:  # `timeout` strikes while seed 1's first file runs
            _wait_for_runs(logs, 6)
            os.kill(os.getpid(), signal.SIGTERM)
            assert sweep._STOPPING.wait(10)  # the sweep stops its pytest processes
            run.interrupted = True
        return run

    monkeypatch.setattr(sweep, "execute", execute)
    handler = signal.getsignal(signal.SIGTERM)
    assert sweep.main(_args(tmp_path)) == 1
    assert signal.getsignal(signal.SIGTERM) == handler
    assert len((tmp_path / "runs.jsonl").read_text().splitlines()) == 6
    out = capsys.readouterr().out
    assert "| eager | 0 | 0 | 0 |" in out
    assert "(cut off: 6 of 12 runs done)" in out
