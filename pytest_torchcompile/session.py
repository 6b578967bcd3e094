"""The session: at its start the run (the compile cache, the report and budget paths, the budget
file), then its hooks: what was collected, the records every process sends, and at its end the
budget file, the JSON report and the terminal summary, made once by the process that is no
worker, the same with and without pytest-xdist. No torch here.
"""

from __future__ import annotations

import glob
import os
from pathlib import Path

import pytest

from pytest_torchcompile import caches
from pytest_torchcompile.counting import budgets
from pytest_torchcompile.counting.records import CoverageRecord, ParityRecord
from pytest_torchcompile.counting.report import (
    json_report,
    runtime_versions,
    save_json,
    session_summary,
)
from pytest_torchcompile.settings import SESSION_OPTIONS, SessionSettings
from pytest_torchcompile.stash import SESSION_KEY, Run
from pytest_torchcompile.workers import (
    CACHE_OUTPUT,
    COLLECTED_OUTPUT,
    is_worker,
    tell_controller,
    tell_controller_the_gpu,
)


def start_run(config: pytest.Config, settings: SessionSettings) -> Run:
    """Send the compile caches to --compile-cache, resolve the report and budget paths and load
    the budget file, once in every process."""
    run = Run()
    if settings.cache is not None:
        run.cache = _use_compile_cache(config, settings.cache)
    if settings.report is not None:
        run.report_path = session_path(config, "report", settings.report)
    if settings.budgets is None:
        if settings.budgets_update:
            raise pytest.UsageError(
                "--compile-budgets-update needs a budget file: pass --compile-budgets PATH "
                "or set compile_budgets in the ini file"
            )
        return run
    run.budget_path = session_path(config, "budgets", settings.budgets)
    try:
        run.budget_file = budgets.load(run.budget_path)
    except budgets.BudgetFileError as exc:
        raise pytest.UsageError(f"Invalid --compile-budgets file: {exc}") from None
    return run


def _use_compile_cache(config: pytest.Config, value: str) -> caches.CachePlan:
    """Send torch's compile caches to the directory, from now until the session ends."""
    directory = session_path(config, "cache", value)
    source = caches.FLAG if _from_command_line(config, "cache") else caches.INI
    cache = caches.plan(directory, source, os.environ)
    try:
        cache.used.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise pytest.UsageError(f"Invalid {source}={value!r}: {exc}") from None
    config.add_cleanup(caches.apply(cache, os.environ))
    return cache


def _from_command_line(config: pytest.Config, name: str) -> bool:
    dest = next(option.dest for option in SESSION_OPTIONS if option.name == name)
    return config.getoption(dest) is not None


def session_path(config: pytest.Config, name: str, value: str) -> Path:
    """A path from the command line is relative to where pytest ran; from the ini, to that file."""
    if not _from_command_line(config, name) and config.inipath is not None:
        return config.inipath.parent / value
    return config.invocation_params.dir / value


class SessionHooks:
    """Session-wide hooks whose hookspecs pass no config: they reach the run through this object.

    Records are gathered from reports wherever they arrive (the only process, or the xdist
    controller), so the budget file, the JSON report and the summary are made the same way
    with and without xdist, once, by the process that is not a worker.
    """

    def __init__(self, config: pytest.Config, run: Run) -> None:
        self._config = config
        self._run = run
        self._settings = config.stash[SESSION_KEY]
        self._worker = is_worker(config)

    def pytest_itemcollected(self, item: pytest.Item) -> None:
        self._run.collected.add(item.nodeid)

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if report.failed:
            self._run.collection_failed = True
        elif report.skipped:
            self._run.uncollected.add(report.nodeid)

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        """An xdist worker tells the controller every test it collected (see `_collected`)."""
        if self._worker and (self._settings.budgets_update or self._settings.report is not None):
            tell_controller(self._config, COLLECTED_OUTPUT, sorted(self._run.collected))

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self._run.reported.add(report.nodeid)
        record: ParityRecord | None = getattr(report, "torchcompile", None)
        if record is not None:
            self._run.records.append(record)
        reached: CoverageRecord | None = getattr(report, "torchcompile_coverage", None)
        if reached is not None:
            self._run.coverage.append(reached)

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        """Write the budget file and the JSON report, once, in the process that is no worker."""
        run, settings = self._run, self._settings
        if run.shared_compiles:  # made (torch imported) by an intercepted test
            run.shared_compiles.close()
        if run.cache is not None:
            caches.add_counts(run.cache_counts, caches.use_counts())
        if self._worker:
            tell_controller_the_gpu(self._config)
            if run.cache is not None:
                tell_controller(self._config, CACHE_OUTPUT, run.cache_counts)
            return
        collected = _collected(self._config, run, exitstatus)
        budget_file, path, name = run.budget_file, run.budget_path, settings.budgets
        if budget_file is not None and path is not None and name and settings.budgets_update:
            run.updated = budgets.write_update(path, budget_file, run.records, collected, name=name)
        elif budget_file is not None and name:
            run.verdicts = budgets.verdicts(budget_file, run.records, source=name)
        if run.report_path is not None:
            document = json_report(
                run.records,
                versions=runtime_versions(),
                collected=collected,
                coverage_records=run.coverage,
                budget_verdicts=run.verdicts,
            )
            save_json(run.report_path, document)

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        """Shown with --compile-report, or when a budget verdict, a failure's triage or a
        rejected example is worth reading."""
        run = self._run
        notable = any(v.status != "unchanged" for v in (run.verdicts or {}).values()) or any(
            "artifacts" in record or "rejected" in record or "not_judged" in record
            for record in run.records
        )
        lines = session_summary(
            run.records, run.coverage, run.verdicts, counts=bool(run.report_path or notable)
        )
        if run.updated is not None:
            lines.append(f"compile budgets updated: {run.updated}")
        if self._settings.report is not None:
            lines.append(f"compile report written to {self._settings.report}")
        if run.cache is not None:
            lines.append(caches.summary(run.cache, run.cache_counts))
        if run.worker_gpus:
            lines.append(
                "GPUs per worker: "
                + ", ".join(f"{w} -> {gpu}" for w, gpu in sorted(run.worker_gpus.items()))
            )
        if self._worker or not lines:
            return
        terminalreporter.write_sep("=", "torch.compile")
        for line in lines:
            terminalreporter.write_line(line)


def _collected(config: pytest.Config, run: Run, exitstatus: int) -> budgets.Collected:
    """What this session collected, for the budget update and the JSON report.

    Its scope is the paths pytest collected from (arguments, testpaths or the invocation
    directory) less --ignore'd ones; node-id arguments add none. It has no scope (it cannot vouch
    for what it collected) when something failed to collect, the run was interrupted, an xdist
    worker did not report what it collected, or --lf, --ignore-glob or --pyargs narrowed
    collection in a way paths cannot say. -k, -m, --deselect, -x and pytest-split do not narrow
    it: the tests they leave out were still collected.
    """
    distributed = config.pluginmanager.getplugin("dsession") is not None
    complete = (
        not run.collection_failed
        and exitstatus != pytest.ExitCode.INTERRUPTED
        and (not distributed or (run.workers_collected > 0 and not run.worker_lost))
        and not any(config.getoption(name, None) for name in ("lf", "ignore_glob", "pyargs"))
    )
    root, here = config.rootpath, config.invocation_params.dir
    scopes: tuple[budgets.Scope, ...] = ()
    if complete:
        paths = [arg for arg in config.args if "::" not in arg]
        scope = budgets.Scope(
            paths=_rootdir_paths(root, here, paths),
            ignored=_rootdir_paths(root, here, config.getoption("ignore", None) or []),
        )
        scopes = (scope,)
    testpaths = [
        found
        for pattern in config.getini("testpaths")
        for found in glob.glob(pattern, root_dir=root, recursive=True)
    ]
    return budgets.Collected(
        suite=_rootdir_paths(root, root, testpaths) or (".",),
        scopes=scopes,
        existing=frozenset(run.collected | run.reported),
        uncollected=frozenset(run.uncollected),
    )


def _rootdir_paths(root: Path, here: Path, paths: list[str]) -> tuple[str, ...]:
    """Paths given relative to `here` (or absolute), as budgets' scope paths under `root`."""
    return budgets.relative_paths(root, (Path(os.path.abspath(here / path)) for path in paths))
