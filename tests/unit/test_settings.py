"""Settings: parsing, validation messages that say where a value came from, and precedence."""

from __future__ import annotations

import dataclasses

import pytest

from pytest_torchcompile.settings import (
    MARKER_KEYS,
    SESSION_OPTIONS,
    TEST_OPTIONS,
    SessionSettings,
    SettingError,
    Settings,
    apply,
    from_config,
    marker_settings,
    session_from_config,
)


def _config(cli: dict[str, object], ini: dict[str, object]):
    return (lambda dest: cli.get(dest.removeprefix("torchcompile_"))), (
        lambda key: ini.get(key, "")
    )


def test_defaults():
    settings = from_config(*_config({}, {}))
    assert settings == Settings()
    assert (settings.backend, settings.mode, settings.dynamic, settings.fullgraph) == (
        "inductor",
        "default",
        "auto",
        False,
    )
    assert settings.source("backend") == "default"


def test_precedence_marker_over_cli_over_ini_over_default():
    ini_only = from_config(
        *_config({}, {"compile_backend": "eager", "compile_max_recompiles": "3"})
    )
    assert ini_only.backend == "eager" and ini_only.source("backend") == "ini compile_backend"
    both = from_config(*_config({"backend": "aot_eager"}, {"compile_backend": "eager"}))
    assert both.backend == "aot_eager" and both.source("backend") == "--compile-backend"
    marked = marker_settings(both, (), {"backend": "eager"}, "test_x")
    assert marked.backend == "eager" and marked.source("backend") == "marker on test_x"
    assert marked.max_recompiles is None


@pytest.mark.parametrize(
    ("name", "value", "expected"),
    [
        ("dynamic", "TRUE", "true"),
        ("dynamic", False, "false"),
        ("fullgraph", "yes", True),
        ("max_graph_breaks", "0", 0),
        ("max_recompiles", "none", None),
        ("devices", "cpu, cuda:1", ("cpu", "cuda:1")),
        ("mode", "max-autotune", "max-autotune"),
        ("backend", "aot_eager_decomp_partition", "aot_eager_decomp_partition"),
    ],
)
def test_values_parse(name, value, expected):
    assert getattr(apply(Settings(), {name: value}, "here"), name) == expected


@pytest.mark.parametrize(
    ("values", "message"),
    [
        (
            {"max_graph_breaks": -1},
            r"Invalid max_graph_breaks=-1 from marker on test_x: expected a non-negative",
        ),
        ({"max_recompiles": 1.5}, r"max_recompiles=1.5 .*non-negative integer"),
        ({"dynamic": "maybe"}, r"dynamic='maybe' .*auto, true, false"),
        ({"mode": "fast"}, r"mode='fast' .*default, reduce-overhead"),
        ({"rtol": 1e-3}, r"set both rtol and atol, or neither"),
        ({"devices": "gpu#1"}, r"not a device"),
        (
            {"backend": "nonsense_backend"},
            r"unknown backend 'nonsense_backend'; registered backends: .*aot_eager",
        ),
        ({"backend": "no_such_module_xyz:fn"}, r"cannot import module 'no_such_module_xyz'"),
        ({"backend": "planted:nope"}, r"module 'planted' has no attribute 'nope'"),
        (
            {"bogus": 1},
            r"Unknown compile_parity setting\(s\) bogus from marker on test_x; valid keys: backend",
        ),
    ],
)
def test_bad_values_say_what_and_where(values, message):
    with pytest.raises(SettingError, match=message):
        marker_settings(Settings(), (), values, "test_x")


def test_positional_marker_arguments_are_refused():
    with pytest.raises(
        SettingError, match=r"keyword arguments only.*'eager'.*valid keys: " + MARKER_KEYS[0]
    ):
        marker_settings(Settings(), ("eager",), {}, "test_x")


def test_cli_error_names_the_flag():
    with pytest.raises(
        SettingError, match=r"Invalid --compile-dynamic='sometimes' from --compile-dynamic"
    ):
        from_config(*_config({"dynamic": "sometimes"}, {}))


def test_session_settings():
    session = session_from_config(*_config({"worker_gpus": "1,0"}, {"compile_budgets": "b.json"}))
    assert (session.worker_gpus, session.budgets, session.budgets_update) == (
        "1,0",
        "b.json",
        False,
    )
    with pytest.raises(
        SettingError, match=r"--compile-worker-gpus='some' from --compile-worker-gpus"
    ):
        session_from_config(*_config({"worker_gpus": "some"}, {}))


def test_triage_settings_default_on_and_validate():
    assert (session_from_config(*_config({}, {})).bisect, SessionSettings().artifacts) == (
        "on",
        None,
    )
    session = session_from_config(*_config({"bisect": "OFF"}, {"compile_artifacts": "triage"}))
    assert (session.bisect, session.artifacts) == ("off", "triage")
    with pytest.raises(
        SettingError, match=r"--compile-bisect='deeper' from ini compile_bisect: .*on, off, deep"
    ):
        session_from_config(*_config({}, {"compile_bisect": "deeper"}))
    assert session_from_config(*_config({"bisect": "deep"}, {})).bisect == "deep"
    assert SessionSettings().triage_budget == 300.0
    budget = session_from_config(*_config({}, {"compile_triage_budget": "0"})).triage_budget
    assert budget == 0.0
    with pytest.raises(
        SettingError, match=r"--compile-triage-budget='-5' from ini compile_triage_budget: .*number"
    ):
        session_from_config(*_config({}, {"compile_triage_budget": "-5"}))


@pytest.mark.parametrize(
    ("settings", "options"), [(Settings, TEST_OPTIONS), (SessionSettings, SESSION_OPTIONS)]
)
def test_each_field_is_an_option_and_takes_its_default(settings, options):
    """The option list is the one source: one field per option, in its order, with its default."""
    fields = [f for f in dataclasses.fields(settings) if f.name != "sources"]
    assert [f.name for f in fields] == [option.name for option in options]
    for f, option in zip(fields, options, strict=True):
        assert getattr(settings(), f.name) == option.default, f.name


@pytest.mark.parametrize("option", [*TEST_OPTIONS, *SESSION_OPTIONS], ids=lambda o: o.name)
def test_help_states_the_default_once_and_the_default_parses(option):
    assert "(default:" not in option.about, "the help text adds the default from the option"
    assert option.help.endswith(f" (default: {option.shown_default})")
    if option.default not in (None, ()):
        assert option.parse(option.default) == option.default


def test_shown_defaults():
    shown = {option.name: option.shown_default for option in (*TEST_OPTIONS, *SESSION_OPTIONS)}
    assert (shown["fullgraph"], shown["backward"], shown["budgets"]) == ("off", "true", "none")
    assert (shown["parity_include"], shown["parity_exclude"]) == ("*", "none")
