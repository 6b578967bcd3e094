"""pytest hooks only: options, marker, collection, per-test records and the session's summary.

Loading this module must not import torch: a session without parity tests never pays for it.
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Generator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_torchcompile import caches
from pytest_torchcompile.counting import budgets
from pytest_torchcompile.counting.records import CoverageRecord, ParityRecord
from pytest_torchcompile.counting.report import (
    junit_properties,
    section_text,
)
from pytest_torchcompile.errors import NOTE_PREFIX
from pytest_torchcompile.fixtures import compile_parity, device
from pytest_torchcompile.session import SessionHooks
from pytest_torchcompile.settings import (
    MARKER_KEYS,
    SESSION_OPTIONS,
    TEST_OPTIONS,
    SessionSettings,
    SettingError,
    Settings,
    from_config,
    marker_settings,
    session_from_config,
)
from pytest_torchcompile.stash import (
    CHECKER_KEY,
    CONSTRUCTIONS_KEY,
    COVERAGE_KEY,
    RECORD_KEY,
    RUN_KEY,
    SESSION_KEY,
    SESSION_TEST_SETTINGS,
    SETTING_ERROR_KEY,
    SETTINGS_KEY,
    TMP_PATHS_KEY,
    Run,
    settings_of,
)
from pytest_torchcompile.workers import XdistHooks, worker_gpu

if TYPE_CHECKING:
    from pytest_torchcompile.adoption.callsites import Constructions
    from pytest_torchcompile.adoption.functions import Found
    from pytest_torchcompile.adoption.intercept import Interceptor

__all__ = ["compile_parity", "device"]

MARKER = "compile_parity"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("torchcompile", "torch.compile parity (pytest-torchcompile)")
    for option in (*TEST_OPTIONS, *SESSION_OPTIONS):
        if option.flag is None or option.ini is None:
            continue
        if option.is_switch:
            group.addoption(
                option.flag,
                action="store_const",
                const=True,
                default=None,
                dest=option.dest,
                help=option.help,
            )
        else:
            group.addoption(
                option.flag,
                action="store",
                default=None,
                dest=option.dest,
                metavar=option.name.upper(),
                help=option.help,
            )
        parser.addini(option.ini, f"{option.help} [{option.flag}]", type="string", default="")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        f"{MARKER}(*, {', '.join(MARKER_KEYS)}): check this test's compile_parity calls, eager vs "
        "torch.compile, with these settings (each overrides --compile-* options and ini keys).",
    )
    try:
        config.stash[SESSION_KEY] = session_from_config(config.getoption, config.getini)
        config.stash[SESSION_TEST_SETTINGS] = from_config(config.getoption, config.getini)
    except SettingError as exc:
        raise pytest.UsageError(str(exc)) from None
    run = config.stash[RUN_KEY] = _start_run(config, config.stash[SESSION_KEY])
    config.pluginmanager.register(SessionHooks(config, run), "torchcompile-session")
    if config.pluginmanager.hasplugin("xdist"):
        config.pluginmanager.register(XdistHooks(run), "torchcompile-xdist")


def _start_run(config: pytest.Config, settings: SessionSettings) -> Run:
    """Send the compile caches to --compile-cache, resolve the report and budget paths and load
    the budget file, once in every process."""
    run = Run()
    if settings.cache is not None:
        run.cache = _use_compile_cache(config, settings.cache)
    if settings.report is not None:
        run.report_path = _session_path(config, "report", settings.report)
    if settings.budgets is None:
        if settings.budgets_update:
            raise pytest.UsageError(
                "--compile-budgets-update needs a budget file: pass --compile-budgets PATH "
                "or set compile_budgets in the ini file"
            )
        return run
    run.budget_path = _session_path(config, "budgets", settings.budgets)
    try:
        run.budget_file = budgets.load(run.budget_path)
    except budgets.BudgetFileError as exc:
        raise pytest.UsageError(f"Invalid --compile-budgets file: {exc}") from None
    return run


def _use_compile_cache(config: pytest.Config, value: str) -> caches.CachePlan:
    """Send torch's compile caches to the directory, from now until the session ends."""
    directory = _session_path(config, "cache", value)
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


def _session_path(config: pytest.Config, name: str, value: str) -> Path:
    """A path from the command line is relative to where pytest ran; from the ini, to that file."""
    if not _from_command_line(config, name) and config.inipath is not None:
        return config.inipath.parent / value
    return config.invocation_params.dir / value


def _test_settings(config: pytest.Config, node: pytest.Item | Any, name: str) -> Settings:
    """The session's settings with every compile_parity marker on `node` applied, closest last."""
    settings = config.stash[SESSION_TEST_SETTINGS]
    for mark in reversed(list(node.iter_markers(MARKER))):
        settings = marker_settings(settings, mark.args, mark.kwargs, name)
    return settings


def _is_parity_test(node: Any, fixturenames: Any) -> bool:
    return node.get_closest_marker(MARKER) is not None or "compile_parity" in fixturenames


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Parametrize `device` for parity tests: cpu and each CUDA device, filtered by settings."""
    definition = metafunc.definition
    if "device" not in metafunc.fixturenames or not _is_parity_test(
        definition, metafunc.fixturenames
    ):
        return
    if any("device" in _argnames(m) for m in definition.iter_markers("parametrize")):
        return  # the test chose its own devices
    try:
        settings = _test_settings(metafunc.config, definition, definition.name)
    except SettingError:  # the test's own error at its setup (see pytest_pycollect_makeitem)
        settings = metafunc.config.stash[SESSION_TEST_SETTINGS]
    devices = _device_params(settings.devices, pinned=worker_gpu(metafunc.config) is not None)
    metafunc.parametrize("device", devices, ids=devices, indirect=True)


def _argnames(mark: pytest.Mark) -> list[str]:
    names = mark.args[0] if mark.args else mark.kwargs.get("argnames", "")
    if isinstance(names, str):
        return [n.strip() for n in names.split(",")]
    return list(names)


def _device_params(selected: tuple[str, ...] | None, *, pinned: bool) -> list[str]:
    """cpu and cuda:0, cuda:1, ...; one "cuda" where there is none, or where each xdist worker
    has its own GPU (collection must be the same on every worker)."""
    import torch

    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    cuda = ["cuda"] if pinned or count == 0 else [f"cuda:{i}" for i in range(count)]
    params: list[str] = []
    for wanted in selected or ("cpu", "cuda"):
        for name in cuda if wanted == "cuda" else [wanted]:
            if name not in params:
                params.append(name)
    return params


@pytest.hookimpl(wrapper=True)
def pytest_pycollect_makeitem(collector: pytest.Collector, name: str, obj: object) -> Any:
    """Resolve each parity test's settings at collection. A bad or conflicting marker is kept as
    that test's error, raised at its setup: a collection error would stop the whole session,
    even with the test deselected."""
    result = yield
    items = result if isinstance(result, list) else [result]
    for item in items:
        if isinstance(item, pytest.Item) and _is_parity_test(
            item, getattr(item, "fixturenames", ())
        ):
            try:
                item.stash[SETTINGS_KEY] = _test_settings(item.config, item, item.name)
            except SettingError as exc:
                item.stash[SETTING_ERROR_KEY] = str(exc)
    return result


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, None, None]:
    """After the test body: budgets over all its calls, and misuse (marked but never checked).

    A test that does not use the checker is intercepted under --compile-parity=all, or when it
    is marked: its outermost module calls are cross-checked (see intercept.py).
    """
    __tracebackhide__ = True  # a verdict reached here is the test's failure, not the plugin's
    if item.config.stash[SESSION_KEY].parity == "off":  # the fixture still runs each example
        _relax_hypothesis_for_compiles(item, intercepted=False)
        yield
        return
    interceptor = _interceptor(item)
    _relax_hypothesis_for_compiles(item, intercepted=interceptor is not None)
    checker = interceptor.checker if interceptor is not None else None
    try:
        if interceptor is None:
            yield
        else:
            with _constructions(item), interceptor:
                yield
    except BaseException as exc:
        _finish(item, check=False, interceptor=interceptor)
        _triage(item, exc, checker or item.stash.get(CHECKER_KEY, None))
        raise
    try:
        _finish(item, check=True, interceptor=interceptor)
    except BaseException as exc:  # an intercepted test's divergences are raised here
        _triage(item, exc, checker)
        raise


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Generator[None, None, None]:
    """An intercepted test's fixtures construct modules too: the coverage table names them.

    Its triage writes under pytest's temporary directory, so the (session-scoped, inert)
    `tmp_path_factory` fixture joins the fixtures it sets up. A test whose marker is invalid
    errors here, before any fixture runs.
    """
    error = item.stash.get(SETTING_ERROR_KEY, None)
    if error is not None:
        pytest.fail(error, pytrace=False)
    if not _intercepted(item):
        return (yield)
    names = getattr(item, "fixturenames", None)
    if isinstance(names, list) and "tmp_path_factory" not in names:
        names.append("tmp_path_factory")
    if "torch" not in sys.modules:
        return (yield)
    with _constructions(item):
        return (yield)


def _constructions(item: pytest.Item) -> Constructions:
    """The test's record of module classes constructed, kept from setup to the call."""
    found = item.stash.get(CONSTRUCTIONS_KEY, None)
    if found is None:
        from pytest_torchcompile.adoption.callsites import Constructions

        found = item.stash[CONSTRUCTIONS_KEY] = Constructions()
    return found


def _triage(item: pytest.Item, exc: BaseException, checker: Any) -> None:
    """After a parity failure: the stage that diverged, a repro and the compiler's artifacts,
    added to the failure message (as a note) and to the test's record."""
    recorder = getattr(checker, "recorder", None)
    if checker is None or recorder is None or not recorder.calls or not _parity_failure(exc):
        return
    from pytest_torchcompile.after_failure import triage

    settings = item.config.stash[SESSION_KEY]
    if settings.artifacts is not None:
        root = _session_path(item.config, "artifacts", settings.artifacts)
    else:
        factory = item.stash.get(TMP_PATHS_KEY, None) or getattr(item, "funcargs", {}).get(
            "tmp_path_factory"
        )
        if factory is not None:
            root = factory.getbasetemp() / "torchcompile"
        else:  # an item type that takes no fixtures
            root = Path(tempfile.mkdtemp(prefix="pytest-torchcompile-"))
    key = getattr(recorder, "failure_key", None)
    run = item.config.stash[RUN_KEY]
    try:
        if key is not None and key in run.triaged:
            found = triage.reused(*run.triaged[key])
        else:
            found = triage.triage(
                recorder,
                checker.settings,
                root / triage.directory_name(item.nodeid),
                bisect=settings.bisect,
                title=item.nodeid,
            )
            if key is not None:
                run.triaged[key] = (item.nodeid, found)
    except Exception as error:  # triage must never hide the test's own failure
        exc.add_note(f"{NOTE_PREFIX}triage failed: {type(error).__name__}: {error}")
        return
    exc.add_note(found.message())
    record = item.stash.get(RECORD_KEY, None)
    if record is not None:
        record["stage"] = found.stage
        record["repro"] = found.repro
        record["artifacts"] = found.artifacts
        record["triage_time_s"] = found.time_s
        if "costs" in record:
            record["costs"]["seconds"]["triage"] = found.time_s


def _parity_failure(exc: BaseException) -> bool:
    """Whether `exc` is a ParityError, or a group (Hypothesis's FlakyFailure) holding one."""
    from pytest_torchcompile.errors import ParityError

    if isinstance(exc, BaseExceptionGroup):
        return any(_parity_failure(inner) for inner in exc.exceptions)
    return isinstance(exc, ParityError)


def _intercepted(item: pytest.Item) -> bool:
    """Whether the test's module calls are intercepted: it does not use the checker, and the
    mode is all or the test is marked."""
    session = item.config.stash[SESSION_KEY]
    if session.parity == "off" or "compile_parity" in getattr(item, "fixturenames", ()):
        return False
    return session.parity == "all" or item.get_closest_marker(MARKER) is not None


def _interceptor(item: pytest.Item) -> Interceptor | None:
    """The Interceptor for a test that does not use the checker, where the mode asks for one."""
    if not _intercepted(item):
        return None
    session = item.config.stash[SESSION_KEY]
    from pytest_torchcompile.adoption.intercept import Interceptor
    from pytest_torchcompile.adoption.selection import Selection

    # A marked test's settings were resolved (and validated) at collection.
    settings = settings_of(item)
    selection = Selection(
        include=session.parity_include,
        exclude=session.parity_exclude,
        every_call=session.parity_every_call,
    )
    run = item.config.stash[RUN_KEY]
    if run.shared_compiles is None and session.parity_shared:
        from pytest_torchcompile.running.shared_compiles import SharedCompiles

        # Without recompile regions a test's own torch.compile would meet the session's
        # entries: each test compiles afresh there.
        run.shared_compiles = SharedCompiles.start() if SharedCompiles.available() else False
    return Interceptor(
        settings,
        selection,
        run.checked_calls,
        _constructions(item),
        shared=run.shared_compiles or None,
        checked_per_class=run.checked_per_class,
        functions=_functions(item, settings),
    )


def _functions(item: pytest.Item, settings: Settings) -> Found | None:
    """--compile-parity-functions: its packages' functions, bound also in the test's module."""
    if not settings.parity_functions:
        return None
    from pytest_torchcompile.adoption import functions

    try:
        found = functions.find(settings.parity_functions, item.config.stash[RUN_KEY].functions)
    except ImportError as exc:
        pytest.fail(
            f"Invalid parity_functions={','.join(settings.parity_functions)!r} from "
            f"{settings.source('parity_functions')}: cannot import {exc.name or ''}: {exc}",
            pytrace=False,
        )
    module = getattr(item, "module", None)
    return found.including(vars(module)) if module is not None else found


def _finish(item: pytest.Item, check: bool, interceptor: Interceptor | None = None) -> None:
    """Record what the test's checker saw; with `check`, also enforce budgets and misuse."""
    __tracebackhide__ = True
    checker = interceptor.checker if interceptor is not None else item.stash.get(CHECKER_KEY, None)
    marked = item.get_closest_marker(MARKER) is not None
    if interceptor is not None:
        constructed = item.stash.get(CONSTRUCTIONS_KEY, None)
        item.stash[COVERAGE_KEY] = CoverageRecord(
            nodeid=item.nodeid,
            constructed=sorted(constructed.classes) if constructed is not None else [],
            calls=interceptor.module_calls(),
            inside_checked=sorted(interceptor.inside_checked),
        )
        _list_functions(item, interceptor)
    if check and marked and interceptor is not None and interceptor.outermost_calls == 0:
        from pytest_torchcompile.errors import UnusedCheckerError

        raise UnusedCheckerError(
            f"{item.nodeid} is marked compile_parity but neither called the compile_parity "
            "fixture nor made any nn.Module call to intercept (nor a call of a "
            "--compile-parity-functions function): call compile_parity(model, x), or call a "
            "model in the test body"
        )
    if check and marked and interceptor is None and (checker is None or checker.calls == 0):
        from pytest_torchcompile.errors import UnusedCheckerError

        raise UnusedCheckerError(
            f"{item.nodeid} is marked compile_parity but never checked anything: request the "
            "compile_parity fixture and call it, e.g. compile_parity(model, x)"
        )
    if checker is None or (interceptor is not None and interceptor.outermost_calls == 0):
        return
    record = _record(item, checker, "passed" if check else "failed")
    if interceptor is not None:
        record["module_calls"] = item.stash[COVERAGE_KEY]["calls"]  # tallied once, above
    try:
        if check:
            (interceptor or checker).finish()
            _check_budget_file(item.config, record)
    except BaseException:
        record["verdict"] = "failed"
        raise
    finally:
        item.stash[RECORD_KEY] = record
        item.add_report_section("call", "torch.compile", section_text(record))
        item.user_properties.extend(junit_properties(record))  # before the report copies them


def _list_functions(item: pytest.Item, interceptor: Interceptor) -> None:
    """Add the functions the test's calls reached inside checked ones, and the functions this
    process has not listed yet, wrapped or not, to its coverage record (once per process, so the
    report does not repeat a package's functions for every test)."""
    record, found = item.stash[COVERAGE_KEY], interceptor.functions
    if interceptor.inside_checked_functions:
        record["inside_checked_functions"] = sorted(interceptor.inside_checked_functions)
    if found is None:
        return
    listed = item.config.stash[RUN_KEY].listed_functions
    wrapped = sorted(set(found.functions) - listed)
    unwrapped = {name: why for name, why in found.unwrapped.items() if name not in listed}
    if wrapped:
        record["functions"] = wrapped
    if unwrapped:
        record["unwrapped"] = dict(sorted(unwrapped.items()))
    listed |= {*wrapped, *unwrapped}


def _check_budget_file(config: pytest.Config, record: ParityRecord) -> None:
    """Fail a test whose counts grew past its --compile-budgets entry (not while updating it)."""
    __tracebackhide__ = True
    run, settings = config.stash[RUN_KEY], config.stash[SESSION_KEY]
    if run.budget_file is None or settings.budgets is None or settings.budgets_update:
        return
    entry = run.budget_file.entry(record["nodeid"], record["device"])
    verdict = budgets.check(entry, record["counts"], source=settings.budgets)
    if verdict.status == "regressed":
        raise budgets.failure(verdict)


def _record(item: pytest.Item, checker: Any, verdict: str) -> ParityRecord:
    settings: Settings = checker.settings
    record = ParityRecord(
        nodeid=item.nodeid,
        device=",".join(checker.devices_seen) or "none",  # none: no call was checked
        backend=settings.backend,
        mode=settings.mode,
        dynamic=settings.dynamic,
        verdict=verdict,
        calls=checker.calls,
        counts=checker.accountant.counts(),
        largest_errors=sorted(checker.largest_errors.values(), key=lambda e: e["leaf"]),
        wall_time_s=checker.wall_time_s,
        notes=list(checker.notes),
    )
    record["costs"] = checker.costs.record(record["counts"]["compile_time_s"])
    if checker.excused:  # leaves a named rule excused, by rule
        record["excused"] = dict(sorted(checker.excused.items()))
    if checker.not_judged:  # leaves the checker could not judge: "checked partly"
        record["not_judged"] = dict(sorted(checker.not_judged.items()))
    if checker.rejected:  # Hypothesis examples eager raised on, rejected
        record["rejected"] = checker.rejected
        record["first_rejection"] = checker.first_rejection
    return record


def _relax_hypothesis_for_compiles(item: pytest.Item, *, intercepted: bool) -> None:
    """@given parity tests share one fixture across examples on purpose, and compiles are slow.

    So the function-scoped-fixture health check and the deadline are off for them (and for
    intercepted tests, whose examples now compile), and so is the explain phase: it re-runs the
    shrunk failing example about a hundred times per argument, each a compile traced line by line
    on Python 3.11, to name lines that are the checker's own. Everything else the test or profile
    set is kept.
    """
    function = getattr(item, "obj", None)
    checks = intercepted or "compile_parity" in getattr(item, "fixturenames", ())
    if getattr(function, "is_hypothesis_test", False) is not True or not checks:
        return
    from hypothesis import HealthCheck, Phase
    from hypothesis import settings as hypothesis_settings

    inner: Any = getattr(function, "__func__", function)
    parent = getattr(inner, "_hypothesis_internal_use_settings", None) or hypothesis_settings()
    inner._hypothesis_internal_use_settings = hypothesis_settings(
        parent,
        deadline=None,
        phases=[phase for phase in parent.phases if phase is not Phase.explain],
        suppress_health_check=[
            *parent.suppress_health_check,
            HealthCheck.function_scoped_fixture,
            HealthCheck.too_slow,
        ],
    )


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """Per-test data rides on the report, so summaries and budgets also work under xdist."""
    report = yield
    record = item.stash.get(RECORD_KEY, None)
    if record is not None and report.when == "call":
        report.torchcompile = {**record, "verdict": report.outcome}  # type: ignore[attr-defined]
    reached = item.stash.get(COVERAGE_KEY, None)
    if reached is not None and report.when == "call":
        report.torchcompile_coverage = reached  # type: ignore[attr-defined]
    return report
