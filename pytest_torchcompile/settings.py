"""Every setting's names, help text, default, and one precedence: marker > command line > ini > default.

Nothing here imports torch: a backend name is only checked against torch's registry when the value
is not one of the built-in names, so sessions that never run a parity test stay torch-free.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

# The backends that take the deployment path instead of torch.compile, with the path each
# names in its failures (exported.py).
EXPORT_PATHS = {"export": "torch.export", "aot_inductor": "AOTInductor packaging"}
# The control as a backend: everything the compiled side does (copies, re-runs, comparison) but
# compiling. On any suite it gives a plain run's verdicts, and shows what the checker cannot judge.
CONTROL_BACKEND = "none"
BUILTIN_BACKENDS = (
    "inductor",
    "eager",
    "aot_eager",
    "aot_eager_decomp_partition",
    "cudagraphs",
    *EXPORT_PATHS,
    CONTROL_BACKEND,
)
# Backends that write no Inductor cache: what they raise, a fresh cache cannot change.
CACHELESS_BACKENDS = ("eager", "aot_eager", "aot_eager_decomp_partition", CONTROL_BACKEND)
MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")
DYNAMIC_CHOICES = ("auto", "true", "false")
BISECT_CHOICES = ("on", "off", "deep")
PARITY_MODES = ("marked", "all", "off")
# dynamic_dims: no marks, torch._dynamo.mark_dynamic, mark_unbacked
DIM_MARKS = ("off", "backed", "unbacked")


class SettingError(ValueError):
    """A bad value, with where it came from; the plugin turns it into a usage or collection error."""


def _parse_bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off"):
        return False
    raise ValueError("expected true or false")


def _parse_cap(value: Any) -> int | None:
    count = _parse_count(value)
    if count == 0:
        raise ValueError(
            "expected a positive integer or none (0 would check nothing: use "
            "--compile-parity=off for that)"
        )
    return count


def _parse_count(value: Any) -> int | None:
    if value is None or (isinstance(value, str) and value.strip().lower() in ("", "none")):
        return None
    if isinstance(value, bool):
        raise ValueError("expected a non-negative integer or none")
    try:
        count = int(value)
    except (TypeError, ValueError):
        raise ValueError("expected a non-negative integer or none") from None
    if count < 0 or (isinstance(value, float) and value != count):
        raise ValueError("expected a non-negative integer or none")
    return count


def _parse_tolerance(value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool):
        raise ValueError("expected a non-negative number")
    try:
        tol = float(value)
    except (TypeError, ValueError):
        raise ValueError("expected a non-negative number") from None
    if not tol >= 0:
        raise ValueError("expected a non-negative number")
    return tol


def _parse_seconds(value: Any) -> float:
    seconds = _parse_tolerance(value)
    if seconds is None:
        raise ValueError("expected a non-negative number of seconds")
    return seconds


def _parse_choice(choices: tuple[str, ...]) -> Callable[[Any], str]:
    def parse(value: Any) -> str:
        if isinstance(value, bool) and "true" in choices:
            return "true" if value else "false"
        text = str(value).strip().lower()
        if text not in choices:
            raise ValueError(f"expected one of {', '.join(choices)}")
        return text

    return parse


def _parse_dynamic_dims(value: Any) -> str:
    """'off', 'backed' or 'unbacked', each mark optionally limited to some dimensions
    ('backed:0', 'unbacked:0,-1'); True means 'backed'. Returned normalized."""
    if isinstance(value, bool):
        return "backed" if value else "off"
    kind, colon, dims = str(value).replace(" ", "").lower().partition(":")
    if kind not in DIM_MARKS or (colon and kind == "off"):
        raise ValueError(
            "expected off, backed or unbacked, optionally followed by the dimensions to mark "
            "(backed:0, unbacked:0,-1)"
        )
    if not colon:
        return kind
    numbers = dims.split(",")
    if not all(re.fullmatch(r"-?\d+", n) for n in numbers):
        raise ValueError(f"expected dimensions as integers such as {kind}:0 or {kind}:0,-1")
    return f"{kind}:{','.join(str(int(n)) for n in numbers)}"


def _parse_worker_gpus(value: Any) -> str:
    text = str(value).strip().lower()
    if text in ("round-robin", "off"):
        return text
    parts = [part.strip() for part in text.split(",")]
    if not all(part.isdigit() for part in parts):
        raise ValueError("expected round-robin, off, or GPU indices such as 0,0,1,1")
    return ",".join(parts)


def _parse_patterns(value: Any) -> tuple[str, ...]:
    """'torch.nn.*, Block' or a list: fnmatch patterns of module class names."""
    items = value.replace(",", " ").split() if isinstance(value, str) else list(value)
    patterns = tuple(str(item).strip() for item in items if str(item).strip())
    if not patterns:
        raise ValueError("expected comma-separated class name patterns such as torch.nn.*,Block")
    return patterns


def _parse_packages(value: Any) -> tuple[str, ...]:
    """'mylib, other.sub' or a list: importable package or module names; '' or none for none."""
    items = value.replace(",", " ").split() if isinstance(value, str) else list(value or ())
    packages = tuple(str(item).strip() for item in items if str(item).strip())
    if packages in ((), ("none",)):
        return ()
    for package in packages:
        if not all(part.isidentifier() for part in package.split(".")):
            raise ValueError(f"{package!r} is not a package name such as mylib or mylib.ops")
    return packages


def _parse_mode(value: Any) -> str:
    if value is None:
        return "default"
    text = str(value).strip()
    if text not in MODES:
        raise ValueError(f"expected one of {', '.join(MODES)}")
    return text


def _parse_devices(value: Any) -> tuple[str, ...] | None:
    """'cpu,cuda' or ['cpu', 'cuda:1']: a device type selects every device of that type."""
    if value is None:
        return None
    items = value.split(",") if isinstance(value, str) else list(value)
    devices = tuple(str(item).strip() for item in items if str(item).strip())
    if not devices:
        raise ValueError("expected a comma-separated list of devices such as cpu,cuda or cuda:1")
    for device in devices:
        kind, _, index = device.partition(":")
        if not kind.isidentifier() or (index and not index.isdigit()):
            raise ValueError(f"{device!r} is not a device such as cpu, cuda or cuda:1")
    return devices


def _parse_backend(value: Any) -> str:
    """A registered backend name or 'package.module:attr'; checked against torch only when unusual."""
    if callable(value) and not isinstance(value, str):
        raise ValueError("pass a backend name or 'package.module:attr', not the callable itself")
    text = str(value).strip()
    if not text:
        raise ValueError("expected a backend name")
    if ":" in text:
        load_backend_callable(text)
        return text
    if text in BUILTIN_BACKENDS:
        return text
    from pytest_torchcompile import _compat

    registered = _compat.registered_backends()
    if text not in registered:
        raise ValueError(
            f"unknown backend {text!r}; registered backends: {', '.join(registered)}; "
            "or name a callable as 'package.module:attr'"
        )
    return text


def load_backend_callable(spec: str) -> Callable[..., Any]:
    """Import the backend callable named by 'package.module:attr'."""
    module_name, _, attr = spec.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ValueError(
            f"cannot import module {module_name!r} for backend {spec!r}: {exc}"
        ) from None
    target: Any = module
    for part in attr.split("."):
        try:
            target = getattr(target, part)
        except AttributeError:
            raise ValueError(f"module {module_name!r} has no attribute {attr!r}") from None
    if not callable(target):
        raise ValueError(f"{spec!r} is not callable")
    return target  # type: ignore[no-any-return]


@dataclass(frozen=True)
class Option:
    """One setting at every level it can be given: the one source of its names and default.

    The `Settings`/`SessionSettings` field defaults, the help text's "(default: ...)" and the
    README's settings tables (checked by tests/unit/test_settings_table.py) all read from here.
    """

    name: str  # Settings field and marker keyword
    parse: Callable[[Any], Any]
    default: Any
    about: str  # the help text, without its "(default: ...)"
    flag: str | None = None  # command-line flag; the ini key is the flag's name with underscores
    is_switch: bool = False  # a flag that takes no value
    default_text: str | None = None  # what the default means, where its value alone does not say

    @property
    def ini(self) -> str | None:
        return self.flag[2:].replace("-", "_") if self.flag else None

    @property
    def shown_default(self) -> str:
        """The default as help and the README show it: ``inductor``, ``off``, ``none``, ``*``."""
        if self.default_text is not None:
            return self.default_text
        if isinstance(self.default, bool):
            return (
                ("on" if self.default else "off") if self.is_switch else str(self.default).lower()
            )
        if self.default is None or self.default == ():
            return "none"
        if isinstance(self.default, tuple):
            return ",".join(self.default)
        return str(self.default)

    @property
    def help(self) -> str:
        return f"{self.about} (default: {self.shown_default})"

    @property
    def dest(self) -> str:
        """The argparse destination of the flag."""
        return f"torchcompile_{self.name}"


_PER_DTYPE = "per dtype, as assert_close"

TEST_OPTIONS: tuple[Option, ...] = (
    Option(
        "backend",
        _parse_backend,
        "inductor",
        "torch.compile backend: inductor, eager, aot_eager, aot_eager_decomp_partition, "
        "cudagraphs, any registered name, or package.module:attr; or export (torch.export) "
        "or aot_inductor (an AOTInductor package) instead of torch.compile; or none (the "
        "checker's own path with no compiler: what it cannot judge in a suite)",
        "--compile-backend",
    ),
    Option(
        "mode",
        _parse_mode,
        "default",
        f"torch.compile mode: {', '.join(MODES)}",
        "--compile-mode",
    ),
    Option(
        "dynamic",
        _parse_choice(DYNAMIC_CHOICES),
        "auto",
        "torch.compile dynamic: auto (None: automatic dynamic shapes), true, false",
        "--compile-dynamic",
    ),
    Option(
        "fullgraph",
        _parse_bool,
        False,
        "compile with fullgraph=True: any graph break fails the test",
        "--compile-fullgraph",
        is_switch=True,
    ),
    Option(
        "devices",
        _parse_devices,
        None,
        "devices the `device` fixture runs on, e.g. cpu,cuda or cuda:1",
        "--compile-devices",
        default_text="cpu and every visible CUDA device",
    ),
    Option(
        "max_graph_breaks",
        _parse_count,
        None,
        "fail a parity test with more graph breaks than this",
        "--compile-max-graph-breaks",
        default_text="none, no limit",
    ),
    Option(
        "max_recompiles",
        _parse_count,
        None,
        "fail a parity test with more recompiles than this",
        "--compile-max-recompiles",
        default_text="none, no limit",
    ),
    Option("rtol", _parse_tolerance, None, "relative tolerance", default_text=_PER_DTYPE),
    Option("atol", _parse_tolerance, None, "absolute tolerance", default_text=_PER_DTYPE),
    Option("backward", _parse_bool, True, "also compare gradients"),
    Option(
        "check_strides",
        _parse_bool,
        True,
        "compare output strides where significant",
    ),
    Option(
        "reject_eager_errors",
        _parse_bool,
        True,
        "under @given, an example on which eager raises (and compiled raises alike) is "
        "rejected with hypothesis.reject() instead of failing the test; false re-raises "
        "eager's error",
    ),
    Option(
        "dynamic_dims",
        _parse_dynamic_dims,
        "off",
        "mark the compiled side's input tensors' dimensions dynamic before each compiled "
        "call: backed (torch._dynamo.mark_dynamic; sizes 0 and 1 stay static, as Dynamo "
        "specializes them), unbacked (mark_unbacked: every size symbolic, 0 and 1 included), "
        "or off; :dims limits it to those dimensions, e.g. backed:0 or unbacked:0,-1",
        "--compile-dynamic-dims",
    ),
    Option(
        "compiled_autograd",
        _parse_bool,
        False,
        "run the compiled side's backward through compiled autograd, with the same backend",
        "--compile-autograd",
        is_switch=True,
    ),
    Option(
        "parity_signatures",
        _parse_cap,
        None,
        "intercepted calls: check at most this many input signatures per module class (or "
        "function) in the session (per xdist worker); later calls of it are skipped and "
        "counted as such",
        "--compile-parity-signatures",
        default_text="none, no cap",
    ),
    Option(
        "parity_functions",
        _parse_packages,
        (),
        "intercepted tests: also cross-check the outermost calls of the public functions of "
        "these comma-separated packages (defined in them; bound in their modules or imported "
        "into the test module), as module calls are",
        "--compile-parity-functions",
    ),
)
MARKER_KEYS: tuple[str, ...] = tuple(option.name for option in TEST_OPTIONS)


_BY_NAME = {option.name: option for option in TEST_OPTIONS}


def _default(options: Mapping[str, Option], name: str) -> Any:
    """A settings field's default, read from its option: the defaults are written once."""
    return options[name].default


@dataclass(frozen=True)
class Settings:
    """The resolved settings of one parity test (or one assert_compile_parity call).

    One field per entry of `TEST_OPTIONS`, whose default it takes.
    """

    backend: str = _default(_BY_NAME, "backend")
    mode: str = _default(_BY_NAME, "mode")
    dynamic: str = _default(_BY_NAME, "dynamic")
    fullgraph: bool = _default(_BY_NAME, "fullgraph")
    devices: tuple[str, ...] | None = _default(_BY_NAME, "devices")
    max_graph_breaks: int | None = _default(_BY_NAME, "max_graph_breaks")
    max_recompiles: int | None = _default(_BY_NAME, "max_recompiles")
    rtol: float | None = _default(_BY_NAME, "rtol")
    atol: float | None = _default(_BY_NAME, "atol")
    backward: bool = _default(_BY_NAME, "backward")
    check_strides: bool = _default(_BY_NAME, "check_strides")
    reject_eager_errors: bool = _default(_BY_NAME, "reject_eager_errors")
    dynamic_dims: str = _default(_BY_NAME, "dynamic_dims")
    compiled_autograd: bool = _default(_BY_NAME, "compiled_autograd")
    parity_signatures: int | None = _default(_BY_NAME, "parity_signatures")
    parity_functions: tuple[str, ...] = _default(_BY_NAME, "parity_functions")
    # Where each value came from, for messages: "default", "ini compile_backend",
    # "--compile-backend", "marker on test_x", "assert_compile_parity(...)".
    sources: Mapping[str, str] = field(default_factory=dict, compare=False)

    @property
    def uses_cudagraphs(self) -> bool:
        """Whether compiled outputs live in CUDA-graph memory (reduce-overhead, max-autotune)."""
        return self.backend == "cudagraphs" or self.mode in ("reduce-overhead", "max-autotune")

    @property
    def has_autograd(self) -> bool:
        """Whether the compiled side can be differentiated (an AOTInductor package cannot)."""
        return self.backend != "aot_inductor"

    @property
    def compares_backward(self) -> bool:
        """Whether gradients are compared: asked for, and the compiled side has a backward."""
        return self.backward and self.has_autograd

    @property
    def torch_dynamic(self) -> bool | None:
        return {"auto": None, "true": True, "false": False}[self.dynamic]

    @property
    def dim_marks(self) -> tuple[bool, tuple[int, ...] | None] | None:
        """dynamic_dims as (unbacked, the dimensions or None for all); None when off."""
        kind, _, dims = self.dynamic_dims.partition(":")
        if kind == "off":
            return None
        return kind == "unbacked", tuple(int(d) for d in dims.split(",")) if dims else None

    def source(self, name: str) -> str:
        return self.sources.get(name, "default")

    def describe(self) -> str:
        """The compile settings in one line, for failure messages (the opt-in paths only when on)."""
        text = (
            f"backend={self.backend} mode={self.mode} dynamic={self.dynamic} "
            f"fullgraph={self.fullgraph}"
        )
        if self.dynamic_dims != "off":
            text += f" dynamic_dims={self.dynamic_dims}"
        return text + (" compiled_autograd=True" if self.compiled_autograd else "")


def parse_value(name: str, value: Any, source: str) -> Any:
    """Parse one value of setting `name`, naming `source` in the error."""
    option = _BY_NAME[name]
    try:
        return option.parse(value)
    except ValueError as exc:
        where = option.flag if source.startswith("--") and option.flag else name
        raise SettingError(f"Invalid {where}={value!r} from {source}: {exc}") from None


def apply(base: Settings, values: Mapping[str, Any], source: str) -> Settings:
    """A copy of `base` with `values` (raw, unparsed) applied, recording `source` for each."""
    unknown = sorted(set(values) - set(MARKER_KEYS))
    if unknown:
        raise SettingError(
            f"Unknown compile_parity setting(s) {', '.join(unknown)} from {source}; "
            f"valid keys: {', '.join(MARKER_KEYS)}"
        )
    parsed = {name: parse_value(name, value, source) for name, value in values.items()}
    if ("rtol" in parsed) != ("atol" in parsed):
        raise SettingError(f"Invalid tolerance from {source}: set both rtol and atol, or neither")
    sources = {**base.sources, **dict.fromkeys(parsed, source)}
    return replace(base, **parsed, sources=sources)


def from_config(getoption: Callable[[str], Any], getini: Callable[[str], Any]) -> Settings:
    """Session-wide settings: command line over ini over default."""
    settings = Settings()
    for option in TEST_OPTIONS:
        if option.flag is None or option.ini is None:
            continue
        cli_value = getoption(option.dest)
        if cli_value is not None:
            settings = apply(settings, {option.name: cli_value}, option.flag)
            continue
        ini_value = getini(option.ini)
        if ini_value not in (None, "", []):
            settings = apply(settings, {option.name: ini_value}, f"ini {option.ini}")
    return consistent(settings)


def consistent(settings: Settings) -> Settings:
    """`settings`, unless two of its values cannot go together (each named with its source)."""
    if settings.backend in EXPORT_PATHS:
        for name, off in (("compiled_autograd", False), ("dynamic_dims", "off")):
            value = getattr(settings, name)
            if value != off:
                raise SettingError(
                    f"Invalid {name}={value!r} from {settings.source(name)}: backend="
                    f"{settings.backend} (from {settings.source('backend')}) exports the whole "
                    f"program, and {name} applies to torch.compile's backends only"
                )
    return settings


def marker_settings(
    base: Settings, args: tuple[Any, ...], kwargs: Mapping[str, Any], test: str
) -> Settings:
    """Apply a compile_parity marker's keywords; positional arguments are an error."""
    if args:
        raise SettingError(
            f"compile_parity marker on {test} takes keyword arguments only, got positional "
            f"{', '.join(repr(a) for a in args)}; valid keys: {', '.join(MARKER_KEYS)}"
        )
    return consistent(apply(base, kwargs, f"marker on {test}"))


SESSION_OPTIONS: tuple[Option, ...] = (
    Option(
        "budgets",
        str,
        None,
        "budget file of graph breaks and recompiles per test; a test over its budget fails",
        "--compile-budgets",
    ),
    Option(
        "budgets_update",
        _parse_bool,
        False,
        "write the current counts into the --compile-budgets file",
        "--compile-budgets-update",
        is_switch=True,
    ),
    Option(
        "report",
        str,
        None,
        "write a JSON report of every parity test to this path; also prints a summary table",
        "--compile-report",
    ),
    Option(
        "cache",
        str,
        None,
        "keep torch's compile caches (Inductor's compiled graphs and kernels, AOTAutograd's, "
        "Triton's) in this directory, shared by xdist workers, for CI to save and restore; "
        "TORCHINDUCTOR_CACHE_DIR and TRITON_CACHE_DIR set in the environment win over the ini "
        "key, not over the option",
        "--compile-cache",
        default_text="none, torch's own cache directories",
    ),
    Option(
        "worker_gpus",
        _parse_worker_gpus,
        "round-robin",
        "under pytest-xdist, the GPU each worker runs its CUDA tests on: round-robin (worker i "
        "uses GPU i mod count), off (the device fixture lists every GPU), or indices such as "
        "0,0,1,1 (worker i uses entry i mod length)",
        "--compile-worker-gpus",
    ),
    Option(
        "bisect",
        _parse_choice(BISECT_CHOICES),
        "on",
        "after a parity failure, replay the test's calls with backends eager, aot_eager, "
        "aot_eager_decomp_partition and its own, and name the first compiler stage that "
        "diverges: on, off, or deep (also run Inductor's compiler_bisector to name the pass; "
        "slow); failing tests only",
        "--compile-bisect",
    ),
    Option(
        "triage_budget",
        _parse_seconds,
        300.0,
        "seconds of triage (stage bisect and artifacts, which replay the failing calls) a "
        "session spends, per xdist worker; a failure after that gets its repro.py and no "
        "replays, and says so; 0: no budget",
        "--compile-triage-budget",
        default_text="300",
    ),
    Option(
        "artifacts",
        str,
        None,
        "directory for each failing parity test's repro.py, saved inputs and compiler artifacts",
        "--compile-artifacts",
        default_text="a torchcompile folder in pytest's temporary directory",
    ),
    *(
        # --compile-parity: which tests the plugin checks, and the module-call interception.
        Option(
            "parity",
            _parse_choice(PARITY_MODES),
            "marked",
            "which tests are checked: marked (tests that use the compile_parity fixture, and "
            "marked tests that do not, whose module calls are intercepted), all (also every "
            "other test: each outermost nn.Module call is cross-checked), off (nothing is "
            "checked; the fixture only runs its callable eagerly)",
            "--compile-parity",
        ),
        Option(
            "parity_include",
            _parse_patterns,
            ("*",),
            "intercept only module classes and functions whose qualified name (pkg.mod.Class, "
            "pkg.mod.f) or own name matches one of these comma-separated fnmatch patterns",
            "--compile-parity-include",
        ),
        Option(
            "parity_exclude",
            _parse_patterns,
            (),
            "never intercept module classes or functions whose qualified name or own name "
            "matches one of these comma-separated fnmatch patterns",
            "--compile-parity-exclude",
        ),
        Option(
            "parity_every_call",
            _parse_bool,
            False,
            "intercepted calls: check every call, not only the first of each module class (or "
            "function), structure and input signature in the session",
            "--compile-parity-every-call",
            is_switch=True,
        ),
        Option(
            "parity_shared",
            _parse_bool,
            False,
            "intercepted calls: keep one compile per module class and structure that serves "
            "later tests, as in one long-running program, instead of compiling each test afresh "
            "(one Dynamo cache per test); slower on most suites measured (BENCHMARKS.md)",
            "--compile-parity-shared",
            is_switch=True,
        ),
    ),
)


_SESSION_BY_NAME = {option.name: option for option in SESSION_OPTIONS}


@dataclass(frozen=True)
class SessionSettings:
    """Settings that belong to the whole run rather than to one test.

    One field per entry of `SESSION_OPTIONS`, whose default it takes.
    """

    budgets: str | None = _default(_SESSION_BY_NAME, "budgets")
    budgets_update: bool = _default(_SESSION_BY_NAME, "budgets_update")
    report: str | None = _default(_SESSION_BY_NAME, "report")
    # one directory for torch's compile caches (see caches.py)
    cache: str | None = _default(_SESSION_BY_NAME, "cache")
    worker_gpus: str = _default(_SESSION_BY_NAME, "worker_gpus")
    # after a parity failure, replay the test stage by stage (triage.py)
    bisect: str = _default(_SESSION_BY_NAME, "bisect")
    triage_budget: float = _default(_SESSION_BY_NAME, "triage_budget")
    # where failing tests' repro and compiler artifacts go
    artifacts: str | None = _default(_SESSION_BY_NAME, "artifacts")
    # --compile-parity and the module-call interception it turns on (see intercept.py)
    parity: str = _default(_SESSION_BY_NAME, "parity")
    parity_include: tuple[str, ...] = _default(_SESSION_BY_NAME, "parity_include")
    parity_exclude: tuple[str, ...] = _default(_SESSION_BY_NAME, "parity_exclude")
    parity_every_call: bool = _default(_SESSION_BY_NAME, "parity_every_call")
    parity_shared: bool = _default(_SESSION_BY_NAME, "parity_shared")


def session_from_config(
    getoption: Callable[[str], Any], getini: Callable[[str], Any]
) -> SessionSettings:
    values: dict[str, Any] = {}
    for option in SESSION_OPTIONS:
        assert option.flag is not None and option.ini is not None
        raw = getoption(option.dest)
        source = option.flag
        if raw is None:
            raw, source = getini(option.ini), f"ini {option.ini}"
        if raw in (None, "", []):
            continue
        try:
            values[option.name] = option.parse(raw)
        except ValueError as exc:
            raise SettingError(f"Invalid {option.flag}={raw!r} from {source}: {exc}") from None
    return SessionSettings(**values)
