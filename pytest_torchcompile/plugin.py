"""pytest hooks only: options, marker, collection, per-test records and the session's summary.

Loading this module must not import torch: a session without parity tests never pays for it.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

import pytest

from pytest_torchcompile.fixtures import (
    CHECKER_KEY,
    SESSION_TEST_SETTINGS,
    SETTINGS_KEY,
    compile_parity,
    device,
)
from pytest_torchcompile.records import ParityRecord
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

__all__ = ["compile_parity", "device"]

MARKER = "compile_parity"
SESSION_KEY = pytest.StashKey[SessionSettings]()
RECORD_KEY = pytest.StashKey[ParityRecord]()


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
    except SettingError as exc:
        raise pytest.Collector.CollectError(str(exc)) from None
    devices = _device_params(settings.devices)
    metafunc.parametrize("device", devices, ids=devices, indirect=True)


def _argnames(mark: pytest.Mark) -> list[str]:
    names = mark.args[0] if mark.args else mark.kwargs.get("argnames", "")
    if isinstance(names, str):
        return [n.strip() for n in names.split(",")]
    return list(names)


def _device_params(selected: tuple[str, ...] | None) -> list[str]:
    import torch

    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    cuda = [f"cuda:{i}" for i in range(count)] or ["cuda"]
    params: list[str] = []
    for wanted in selected or ("cpu", "cuda"):
        for name in cuda if wanted == "cuda" else [wanted]:
            if name not in params:
                params.append(name)
    return params


@pytest.hookimpl(wrapper=True)
def pytest_pycollect_makeitem(collector: pytest.Collector, name: str, obj: object) -> Any:
    """Resolve each parity test's settings at collection: a bad marker is a collection error."""
    result = yield
    items = result if isinstance(result, list) else [result]
    for item in items:
        if isinstance(item, pytest.Item) and _is_parity_test(
            item, getattr(item, "fixturenames", ())
        ):
            try:
                item.stash[SETTINGS_KEY] = _test_settings(item.config, item, item.name)
            except SettingError as exc:
                raise collector.CollectError(str(exc)) from None
    return result


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, None, None]:
    """After the test body: budgets over all its calls, and misuse (marked but never checked)."""
    _relax_hypothesis_for_compiles(item)
    try:
        yield
    except BaseException:
        _finish(item, check=False)
        raise
    _finish(item, check=True)


def _finish(item: pytest.Item, check: bool) -> None:
    """Record what the test's checker saw; with `check`, also enforce budgets and misuse."""
    checker = item.stash.get(CHECKER_KEY, None)
    marked = item.get_closest_marker(MARKER) is not None
    if check and marked and (checker is None or checker.calls == 0):
        from pytest_torchcompile.errors import UnusedCheckerError

        raise UnusedCheckerError(
            f"{item.nodeid} is marked compile_parity but never checked anything: request the "
            "compile_parity fixture and call it, e.g. compile_parity(model, x)"
        )
    if checker is None:
        return
    from pytest_torchcompile.report import section_text

    verdict = "passed" if check else "failed"
    try:
        if check:
            checker.finish()
    except BaseException:
        verdict = "failed"
        raise
    finally:
        record = _record(item, checker, verdict)
        item.stash[RECORD_KEY] = record
        item.add_report_section("call", "torch.compile", section_text(record))


def _record(item: pytest.Item, checker: Any, verdict: str) -> ParityRecord:
    settings: Settings = checker.settings
    return ParityRecord(
        nodeid=item.nodeid,
        device=",".join(checker.devices_seen),
        backend=settings.backend,
        mode=settings.mode,
        dynamic=settings.dynamic,
        verdict=verdict,
        calls=checker.calls,
        counts=checker.accountant.counts(),
        largest_errors=sorted(checker.largest_errors.values(), key=lambda e: e["leaf"]),
        wall_time_s=checker.wall_time_s,
    )


def _relax_hypothesis_for_compiles(item: pytest.Item) -> None:
    """@given parity tests share one fixture across examples on purpose, and compiles are slow.

    So the function-scoped-fixture health check and the deadline are off for them; everything
    else the test or profile set is kept.
    """
    function = getattr(item, "obj", None)
    if getattr(
        function, "is_hypothesis_test", False
    ) is not True or "compile_parity" not in getattr(item, "fixturenames", ()):
        return
    from hypothesis import HealthCheck
    from hypothesis import settings as hypothesis_settings

    inner = getattr(function, "__func__", function)
    parent = getattr(inner, "_hypothesis_internal_use_settings", None) or hypothesis_settings()
    inner._hypothesis_internal_use_settings = hypothesis_settings(
        parent,
        deadline=None,
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
    return report
