"""The standalone repro of a failing test: writing repro.py and calls.pt, and what repro.py runs.

`write_repro` saves the replayed checker calls (recorder.py) in calls.pt, the test's own modules
the callables need in source/, and writes repro.py, which calls `run_repro` to replay them
(replay.py) outside pytest and exit 1 while the bug is present. What pickle cannot save is saved as
a stand-in (standins.py): a lambda or nested function rebuilt from its source, an object found
again by its import path or taken apart as pickle would take it apart; a callable that cannot be
rebuilt at all gets a FILL IN line in repro.py.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import pickle
import shutil
import sys
import sysconfig
import textwrap
import types
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from pytest_torchcompile import _compat
from pytest_torchcompile._version import __version__
from pytest_torchcompile.after_failure.replay import replay
from pytest_torchcompile.after_failure.standins import (
    ByImport,
    FillIn,
    FromSource,
    Placeholder,
    Reduced,
    resolve,
)
from pytest_torchcompile.running import randomness
from pytest_torchcompile.running.recorder import Call, Modes
from pytest_torchcompile.settings import MARKER_KEYS, Settings, apply
from pytest_torchcompile.tensor_text import describe

_REPRO_SETTINGS: tuple[str, ...] = ("backend", "mode", "dynamic", "fullgraph", "rtol", "atol")
_REPRO_SETTINGS += ("dynamic_dims", "compiled_autograd")
_REPRO_SETTINGS += ("backward", "check_strides")
_INSTALLED = tuple(
    str(Path(sysconfig.get_paths()[key]).resolve())
    for key in ("purelib", "platlib", "stdlib", "platstdlib")
)


def write_repro(
    directory: Path,
    calls: list[Call],
    settings: Settings,
    examples: bool,
    title: str,
    stage: str,
) -> list[str]:
    """Write repro.py, calls.pt and copies of the test's own modules the callables need.

    Every failure gets one: what pickle cannot save is saved as a stand-in (standins.py); a
    callable that cannot be rebuilt at all gets a FILL IN line in repro.py. Returns notes for the
    failure message (what the repro could not rebuild).
    """
    saver = InputSaver({getattr(call.fn, "__module__", None) or "" for call in calls})
    saved_fns, fill_ins = _save_callables(calls, saver)
    saver.modules |= _backend_modules(settings.backend)
    saved = [
        {
            "fn": saved_fns[id(call.fn)],
            "args": saver.save(call.args, f"the inputs of checker call {number}"),
            "kwargs": saver.save(call.kwargs, f"the keyword inputs of checker call {number}"),
            "rng": call.rng,
            "example": call.example,
            "modes": call.modes,
        }
        for number, call in enumerate(calls, 1)
    ]
    _copy_sources(saver.modules, directory / "source")
    torch.save({"calls": saved, "examples": examples}, directory / "calls.pt")
    text = _repro_text(calls, settings, title, stage, saver, fill_ins)
    (directory / "repro.py").write_text(text, encoding="utf-8")
    notes = [
        f"repro: {fill.reason}; repro.py saves the inputs: fill in its line `{fill.name} = ...` "
        f"({fill.described})"
        for fill in fill_ins
    ]
    return notes + [f"repro: {note}" for note in saver.notes]


def _save_callables(calls: list[Call], saver: InputSaver) -> tuple[dict[int, Any], list[_FillIn]]:
    """What calls.pt holds for each distinct callable (by id), and the FILL IN lines of those
    that cannot be rebuilt, each with the checker calls that use it."""
    fill_ins: dict[int, _FillIn] = {}  # by id of the callable
    saved_fns: dict[int, Any] = {}
    for number, call in enumerate(calls, 1):
        fn = call.fn
        if id(fn) in fill_ins:
            fill_ins[id(fn)].calls.append(number)
        if id(fn) in saved_fns:
            continue
        saved, reason = _save_callable(fn, saver)
        if reason is not None:
            fill_ins[id(fn)] = _FillIn(f"fn_{len(fill_ins)}", _described(fn), reason, [number])
            saved = FillIn(fill_ins[id(fn)].name)
        saved_fns[id(fn)] = saved
    return saved_fns, list(fill_ins.values())


def _save_callable(fn: Any, saver: InputSaver) -> tuple[Any, str | None]:
    """What calls.pt holds for the callable under test, or None and why it cannot be rebuilt."""
    if isinstance(fn, torch.nn.Module):
        local = _local_class(fn)
        if local is not None:
            return None, (
                f"the module class {local} is defined inside a function, so the repro cannot "
                "rebuild it; define it at module level for a standalone repro"
            )
        saver.modules |= _defining_modules(fn)
        return fn, None
    mark = len(saver.notes)
    standin = saver.save(fn, getattr(fn, "__qualname__", "the callable under test"))
    if isinstance(standin, Placeholder):
        del saver.notes[mark:]  # the FILL IN note says it
        return None, standin.reason
    return standin, None


def _backend_modules(backend: str) -> set[str]:
    """The project modules a `pkg.mod:attr` backend needs copies of (none for a named one)."""
    backend_module = backend.partition(":")[0] if ":" in backend else None
    if backend_module is not None and backend_module in sys.modules:
        return _defining_modules(sys.modules[backend_module])
    return set()


def _repro_settings(settings: Settings) -> dict[str, Any]:
    """The settings repro.py passes on; the tolerances only where the test set them."""
    chosen = {key: getattr(settings, key) for key in _REPRO_SETTINGS}
    if settings.rtol is None:
        del chosen["rtol"], chosen["atol"]
    return chosen


def _repro_text(
    calls: list[Call],
    settings: Settings,
    title: str,
    stage: str,
    saver: InputSaver,
    fill_ins: list[_FillIn],
) -> str:
    """repro.py's source: the docstring, the makers, the FILL IN lines and the settings."""
    lines = [
        f"{fill.name} = ...  # FILL IN: the callable of checker call(s) "
        f"{', '.join(map(str, fill.calls))} of {title}: {fill.described}, could not be rebuilt: "
        f"{fill.reason}"
        for fill in fill_ins
    ]
    chosen = _repro_settings(settings)
    return _REPRO_TEMPLATE.format(
        title=title,
        stage=(stage or "stage: not bisected (--compile-bisect=off)") + _random_note(calls),
        count=len(calls),
        listing=_listing(calls),
        version=__version__,
        torch=torch.__version__,
        imports="".join(f"{line}  # noqa: E402\n" for line in sorted(saver.imports)),
        makers="\n\n".join(saver.code) + ("\n\n" if saver.code else ""),
        fill_ins="".join(f"{line}\n" for line in lines) + ("\n\n" if lines else ""),
        settings="{\n" + "".join(f"    {k!r}: {v!r},\n" for k, v in chosen.items()) + "}",
        table="{" + ", ".join(f"{n!r}: {n}" for n in saver.makers.values()) + "}",
        fill_table="{" + ", ".join(f"{f.name!r}: {f.name}" for f in fill_ins) + "}",
        cache=_compat.inductor_cache_dirs()[0] if settings.backend == "inductor" else None,
    )


@dataclass
class _FillIn:
    """A callable repro.py cannot rebuild: the line `name = ...` the user fills in."""

    name: str
    described: str  # what it is and where it is defined
    reason: str
    calls: list[int]  # the checker calls (1-based) that use it


def _random_note(calls: list[Call]) -> str:
    """What the failure message said about fallback_random, and that the replay sets it too."""
    said = next((call.note for call in calls if call.note), "")
    if not said:
        return ""
    setting = (
        f"The replay sets {randomness.FALLBACK_RANDOM} on the graphs that draw random numbers, "
        "as the test did, and compiles each such callable once more as you compile it."
    )
    return "".join(f"\n\n{textwrap.fill(text, 100)}" for text in (said, setting))


_REPRO_TEMPLATE = '''\
"""Standalone repro of {title}, written by pytest-torchcompile {version} (torch {torch}).

{stage}

Replays the test's {count} checker call(s) in order (saved inputs in calls.pt, exact strides,
offsets, aliasing and RNG state), eager vs torch.compile, with the plugin's own comparison.
Exits 1 while eager and compiled still disagree, 0 once they agree.

{listing}

    python repro.py
"""

import pathlib
import sys

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "source"))  # copies of the test's own modules, if it needed any

{imports}from pytest_torchcompile.after_failure.repro import run_repro  # noqa: E402

SETTINGS = {settings}
# Where the test's session kept Inductor's caches: a graph cached there, compiled for another
# module or test, can be what diverged (a fresh cache compiles afresh).
SESSION_CACHE = {cache!r}


{makers}{fill_ins}if __name__ == "__main__":
    sys.exit(run_repro(HERE / "calls.pt", SETTINGS, {table}, {fill_table}, SESSION_CACHE))
'''


_LISTED = 20  # calls the repro's docstring lists


def _listing(calls: list[Call]) -> str:
    """The calls, one line each, e.g. `2. rms_norm(float32[4, 4] ... contiguous, 1.5)`."""

    def shown(value: Any) -> str:
        return describe(value) if isinstance(value, torch.Tensor) else repr(value)

    lines = []
    for number, call in enumerate(calls[:_LISTED], 1):
        name = getattr(call.fn, "__qualname__", None) or type(call.fn).__qualname__
        inputs = [shown(a) for a in call.args] + [f"{k}={shown(v)}" for k, v in call.kwargs.items()]
        example = f"  (Hypothesis example {call.example})" if call.example else ""
        modes = f" under {call.modes}" if str(call.modes) else ""
        lines.append(f"  {number}. {name}({', '.join(inputs)}){modes}{example}")
    if len(calls) > _LISTED:
        lines.append(f"  ... and {len(calls) - _LISTED} more")
    return "Calls:\n" + "\n".join(lines)


class _NotRebuildable(Exception):
    """A callable the repro cannot rebuild; the message says why and what to do."""


_MAX_DEPTH = 8  # how deep the saver takes apart objects pickle refuses


class InputSaver:
    """Turns each value a repro needs into something calls.pt can hold (see standins.py).

    What pickle saves is kept as it is. Otherwise: a lambda or nested function is rebuilt from
    its source (a maker function in repro.py, one per code object), a module is imported again,
    an object found in a module (a global, or an entry of a global list or dict, as OpInfo's
    op_db) by its import path, and any other object taken apart as pickle takes it apart
    (`__reduce_ex__`), each part saved the same way. A part none of these can save becomes a
    Placeholder, named in `notes`.
    """

    def __init__(self, homes: set[str]) -> None:
        self.makers: dict[types.CodeType, str] = {}
        self.code: list[str] = []  # the makers' source
        self.imports: set[str] = set()
        self.modules: set[str] = set()  # the project's modules the repro needs copies of
        self.notes: list[str] = []
        self._homes = sorted(homes - {"", "__main__"})  # where import paths are looked for
        self._memo: dict[int, Any] = {}
        self._kept: list[Any] = []  # keeps the memo's ids from being reused

    def save(self, value: Any, what: str, depth: int = 0) -> Any:
        if id(value) in self._memo:
            return self._memo[id(value)]
        if _picklable(value):
            self.modules |= _defining_modules(value)
            return value
        self._kept.append(value)
        if type(value) in (tuple, list, dict):
            saved = self._container(value, what, depth)
        elif isinstance(value, types.ModuleType):
            saved = Reduced(importlib.import_module, (value.__name__,))
        elif isinstance(value, types.FunctionType):
            saved = self._function(value, what, depth)
        else:
            saved = self._by_import(value) or self._reduced(value, what, depth)
        self._memo[id(value)] = saved
        return saved

    def _container(self, value: Any, what: str, depth: int) -> Any:
        if isinstance(value, dict):
            return {k: self.save(v, f"{what}[{k!r}]", depth + 1) for k, v in value.items()}
        items = [self.save(v, f"{what}[{i}]", depth + 1) for i, v in enumerate(value)]
        return type(value)(items)

    def _function(self, fn: types.FunctionType, what: str, depth: int) -> Any:
        name = self.makers.get(fn.__code__, f"make_fn_{len(self.makers)}")
        try:
            code, imports, captured = rebuild_source(fn, name)
        except _NotRebuildable as exc:
            return self._placeholder(what, str(exc))
        if fn.__code__ not in self.makers:
            self.makers[fn.__code__] = name
            self.code.append(code)
            self.imports |= imports
        made = FromSource(name, {})
        self._memo[id(fn)] = made  # before its closure, which may hold the function again
        self._homes = sorted({*self._homes, fn.__module__})
        made.captured = {
            key: self.save(value, f"{fn.__code__.co_qualname}: {key}", depth + 1)
            for key, value in captured.items()
        }
        return made

    def _by_import(self, value: Any) -> ByImport | None:
        """`module.name` or `module.name[key]` holding `value` itself, in the modules the test's
        callables and the value's class come from."""
        for home in dict.fromkeys([*self._homes, type(value).__module__]):
            module = sys.modules.get(home)
            if module is None or home == "__main__":
                continue
            for name, item in list(vars(module).items()):
                found: ByImport | None = None
                if item is value:
                    found = ByImport(home, name)
                elif isinstance(item, (list, tuple)) and len(item) <= 100_000:
                    index = next((i for i, x in enumerate(item) if x is value), None)
                    found = ByImport(home, name, index, True) if index is not None else None
                elif isinstance(item, dict) and len(item) <= 100_000:
                    key = next((k for k, x in item.items() if x is value), None)
                    found = ByImport(home, name, key, True) if key is not None else None
                if found is not None:
                    self.modules |= _defining_modules(module)
                    return found
        return None

    def _reduced(self, value: Any, what: str, depth: int) -> Any:
        kind = type(value).__qualname__
        if isinstance(value, type):  # pickle saves classes by name only
            return self._placeholder(what, f"the class {value.__qualname__} cannot be imported")
        if depth >= _MAX_DEPTH:
            return self._placeholder(what, f"a {kind} nested too deeply to take apart")
        try:
            reduced = value.__reduce_ex__(pickle.DEFAULT_PROTOCOL)
        except Exception as exc:  # what pickle itself would have raised
            return self._placeholder(what, f"a {kind}: {type(exc).__name__}: {exc}")
        if not isinstance(reduced, tuple) or len(reduced) < 2:
            return self._placeholder(what, f"a {kind} that pickle saves by a name it cannot find")
        factory, args, state, items, entries = (*reduced, None, None, None)[:5]
        method = inspect.ismethod(value)
        mark = len(self.notes)
        made = Reduced(
            self.save(factory, f"{what} (its constructor)", depth + 1),
            tuple(
                self.save(
                    arg, f"{what}.__self__" if method else f"{what} (argument {i})", depth + 1
                )
                for i, arg in enumerate(args)
            ),
        )
        missing = [p for p in (made.factory, *made.args) if isinstance(p, Placeholder)]
        if missing:  # one note for the object, not one for each part
            del self.notes[mark:]
            why = f"a {kind} that cannot be constructed again: {missing[0].reason}"
            return self._placeholder(what, why)
        self._memo[id(value)] = made  # before its state, which may hold the object again
        made.state = (
            {k: self.save(v, f"{what}.{k}", depth + 1) for k, v in state.items()}
            if type(state) is dict
            else self.save(state, f"{what} (its state)", depth + 1)
        )
        made.items = [self.save(v, f"an item of {what}", depth + 1) for v in items or ()]
        made.entries = [(k, self.save(v, f"{what}[{k!r}]", depth + 1)) for k, v in entries or ()]
        return made

    def _placeholder(self, what: str, reason: str) -> Placeholder:
        self.notes.append(
            f"{what} could not be saved ({reason}); repro.py holds a placeholder for it that "
            "raises if the replay uses it"
        )
        return Placeholder(what, reason)


class _Sink:
    def write(self, data: bytes) -> int:
        return len(data)


class _Probe(pickle.Pickler):
    """A pickler that writes nothing and skips tensor data (torch.save saves tensors itself)."""

    def persistent_id(self, obj: Any) -> str | None:
        kinds = (torch.Tensor, torch.UntypedStorage, torch.TypedStorage)
        return "tensor" if isinstance(obj, kinds) else None


def _picklable(value: Any) -> bool:
    """Whether calls.pt can hold `value` as it is (a lambda or nested function never can)."""
    if isinstance(value, types.FunctionType) and "<" in value.__qualname__:
        return False
    try:
        _Probe(_Sink(), protocol=pickle.DEFAULT_PROTOCOL).dump(value)
    except Exception:  # pickle raises PicklingError, AttributeError or TypeError here
        return False
    return True


def _described(fn: Any) -> str:
    """`TestX.scaled, a bound method defined at tests/test_x.py:12`: what a FILL IN stands for."""
    target = getattr(fn, "__func__", fn)
    if isinstance(target, types.FunctionType):
        kind = "a bound method" if inspect.ismethod(fn) else "a function"
        where = f"{inspect.getsourcefile(target)}:{target.__code__.co_firstlineno}"
        return f"{target.__qualname__}, {kind} defined at {where}"
    try:
        where = f"{inspect.getsourcefile(type(fn))}:{inspect.getsourcelines(type(fn))[1]}"
    except (OSError, TypeError):
        where = "an unknown place"
    return f"an instance of {type(fn).__qualname__} defined at {where}"


def _importable(fn: Any) -> bool:
    """Whether pickle saves `fn` by reference (a module-level function or class, a builtin)."""
    if isinstance(fn, types.FunctionType) and "<" in fn.__qualname__:
        return False  # a lambda or nested function: rebuilt from its source instead
    try:
        pickle.dumps(fn)
    except Exception:  # pickle raises PicklingError, AttributeError or TypeError here
        return False
    return True


def _local_class(module: torch.nn.Module) -> str | None:
    """The qualified name of a class among `module`'s submodules that pickle cannot import."""
    for sub in module.modules():
        if not _importable(type(sub)):
            return type(sub).__qualname__
    return None


def _is_local(module: types.ModuleType) -> bool:
    """A module of the user's project (not installed): the repro needs a copy of its source."""
    name = module.__name__
    path = getattr(module, "__file__", None)
    if path is None or name.split(".")[0] in ("torch", "pytest_torchcompile", "__main__"):
        return False
    resolved = str(Path(path).resolve())
    return not resolved.startswith(_INSTALLED)


def _defining_modules(obj: Any) -> set[str]:
    """The project modules `obj` (a callable, module, class or value) needs, with their imports."""
    roots: set[str] = set()
    if isinstance(obj, types.ModuleType):
        roots.add(obj.__name__)
    elif isinstance(obj, torch.nn.Module):
        roots |= {type(sub).__module__ for sub in obj.modules()}
    else:
        roots.add(getattr(obj, "__module__", None) or type(obj).__module__)
    found: set[str] = set()
    pending = [name for name in roots if name in sys.modules]
    while pending:
        name = pending.pop()
        module = sys.modules.get(name)
        if name in found or module is None or not _is_local(module):
            continue
        found.add(name)
        for value in vars(module).values():
            source = value if isinstance(value, types.ModuleType) else None
            owner = source.__name__ if source else getattr(value, "__module__", None)
            if isinstance(owner, str) and owner in sys.modules and owner not in found:
                pending.append(owner)
    return found


def _copy_sources(modules: set[str], root: Path) -> None:
    for name in sorted(modules):
        path = getattr(sys.modules[name], "__file__", None)
        if path is None:
            continue
        parts = name.split(".")
        is_package = Path(path).name == "__init__.py"
        target = (
            root.joinpath(*parts, "__init__.py")
            if is_package
            else root.joinpath(*parts[:-1], f"{parts[-1]}.py")
        )
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, target)


def rebuild_source(fn: types.FunctionType, maker: str) -> tuple[str, set[str], dict[str, Any]]:
    """A maker function's source that rebuilds a lambda or nested function, its imports, and
    the values of the names it closes over (saved in calls.pt and passed to the maker)."""
    source = _function_source(fn)
    code = fn.__code__
    closure = dict(
        zip(code.co_freevars, [cell.cell_contents for cell in fn.__closure__ or ()], strict=True)
    )
    imports: set[str] = set()
    captured: dict[str, Any] = dict(closure)
    for name in sorted(_global_names(code)):
        if name not in fn.__globals__:
            continue  # a builtin
        value = fn.__globals__[name]
        if isinstance(value, types.ModuleType):
            imports.add(
                f"import {value.__name__}"
                if value.__name__ == name
                else f"import {value.__name__} as {name}"
            )
        else:
            captured[name] = value
    defined = code.co_name  # not __name__, which functools.wraps rewrites
    body = source if defined == "<lambda>" else f"{source}\n{defined}"
    lines = body.splitlines()
    lines[-1] = f"return {lines[-1]}"
    where = f"{inspect.getsourcefile(fn)}:{code.co_firstlineno}"
    text = f"def {maker}({', '.join(captured)}):\n"
    text += f'    """Rebuilds {code.co_qualname} ({where}) from its source."""\n'
    text += "\n".join(f"    {line}" for line in lines)
    return text, imports, captured


def _global_names(code: types.CodeType) -> set[str]:
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _global_names(const)
    return names


def _function_source(fn: types.FunctionType) -> str:
    """The source of a lambda (found among the lambdas of its line by its positions) or of a
    nested def without its decorators."""
    try:
        lines, _ = inspect.findsource(fn)
    except OSError as exc:
        raise _NotRebuildable(f"the source of {fn.__qualname__} is not available: {exc}") from None
    tree = ast.parse("".join(lines))
    code = fn.__code__
    if code.co_name == "<lambda>":
        spots = {
            (line, col)
            for line, _, col, end in code.co_positions()
            if line is not None and col is not None and end  # (0, 0): no source span
        }
        for node in ast.walk(tree):
            if isinstance(node, ast.Lambda) and node.lineno == code.co_firstlineno:
                inside = all(
                    (node.lineno, node.col_offset)
                    <= spot
                    <= (node.end_lineno or 0, node.end_col_offset or 0)
                    for spot in spots
                )
                if inside:
                    return ast.unparse(node)
    else:
        for node in ast.walk(tree):
            if (
                isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
                and node.name == code.co_name
            ):
                first = min([node.lineno] + [d.lineno for d in node.decorator_list])
                if first == code.co_firstlineno:
                    node.decorator_list = []
                    return ast.unparse(node)
    raise _NotRebuildable(f"could not find the source of {fn.__qualname__}")


def run_repro(
    path: Path,
    settings: Mapping[str, Any],
    makers: Mapping[str, Callable[..., Any]],
    fill_ins: Mapping[str, Any] | None = None,
    session_cache: str | None = None,
) -> int:
    """What repro.py runs: replay the saved calls, print the verdict; 1 while they disagree,
    2 while a FILL IN line of repro.py is not filled in. `session_cache`: the Inductor cache
    the test's session compiled with, named where the replay agrees in another one."""
    fill_ins = dict(fill_ins or {})
    unfilled = [name for name, value in fill_ins.items() if value is Ellipsis]
    if unfilled:
        print(
            f"the test's callable could not be rebuilt outside the test: fill in the line(s) "
            f"{', '.join(f'`{name} = ...`' for name in unfilled)} of {path.parent / 'repro.py'} "
            "(each says what it needs), then run it again"
        )
        return 2
    saved = torch.load(path, weights_only=False)
    resolved_calls = resolve(saved["calls"], makers, fill_ins)
    calls = [
        Call(
            fn=entry["fn"],
            args=entry["args"],
            kwargs=entry["kwargs"],
            rng=entry["rng"],
            example=entry["example"],
            modes=entry.get("modes", Modes()),
        )
        for entry in resolved_calls
    ]
    resolved = apply(
        Settings(), {k: v for k, v in settings.items() if k in MARKER_KEYS}, "repro.py"
    )
    print(f"torch {torch.__version__}: {resolved.describe()}, {len(calls)} checker call(s)")
    divergence = replay(calls, resolved, examples=saved["examples"])
    if divergence is None:
        print(f"eager and compiled agree on all {len(calls)} call(s): the bug is gone")
        if session_cache and session_cache != _compat.inductor_cache_dirs()[0]:
            print(
                f"note: the test's session kept Inductor's caches in {session_cache}, this run "
                "compiled afresh; a graph served from that cache (compiled for another module or "
                "test) can be what diverged there: "
                f"TORCHINDUCTOR_CACHE_DIR={session_cache} python {path.parent / 'repro.py'}"
            )
        return 0
    print(f"call {divergence.call} of {len(calls)}: {divergence.message}")
    print("eager and compiled disagree: the bug is present")
    return 1


__all__ = ["run_repro", "write_repro"]
