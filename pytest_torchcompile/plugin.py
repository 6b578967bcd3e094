"""pytest hooks only: options, marker, collection, and the objects that do the work registered
or made: the session's (session.py), each test's (checked_test.py) and xdist's (workers.py).

Loading this module must not import torch: a session without parity tests never pays for it.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

import pytest

from pytest_torchcompile.checked_test import MARKER, CheckedTest
from pytest_torchcompile.fixtures import compile_parity, device
from pytest_torchcompile.session import SessionHooks, start_run
from pytest_torchcompile.settings import (
    MARKER_KEYS,
    SESSION_OPTIONS,
    TEST_OPTIONS,
    SettingError,
    Settings,
    from_config,
    marker_settings,
    session_from_config,
)
from pytest_torchcompile.stash import (
    COVERAGE_KEY,
    RECORD_KEY,
    RUN_KEY,
    SESSION_KEY,
    SESSION_TEST_SETTINGS,
    SETTING_ERROR_KEY,
    SETTINGS_KEY,
)
from pytest_torchcompile.workers import XdistHooks, worker_gpu

__all__ = ["compile_parity", "device"]


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
    run = config.stash[RUN_KEY] = start_run(config, config.stash[SESSION_KEY])
    config.pluginmanager.register(SessionHooks(config, run), "torchcompile-session")
    if config.pluginmanager.hasplugin("xdist"):
        config.pluginmanager.register(XdistHooks(run), "torchcompile-xdist")


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
    is marked: its outermost module calls are cross-checked (see intercept.py). The test's
    CheckedTest does it (checked_test.py).
    """
    __tracebackhide__ = True  # a verdict reached here is the test's failure, not the plugin's
    yield from CheckedTest.of(item).call()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Generator[None, None, None]:
    """A test whose marker is invalid errors here, before any fixture runs; an intercepted
    test's setup records the module classes its fixtures construct (checked_test.py)."""
    error = item.stash.get(SETTING_ERROR_KEY, None)
    if error is not None:
        pytest.fail(error, pytrace=False)
    return (yield from CheckedTest.of(item).setup())


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
