"""After a parity failure: which compiler stage diverged, a standalone repro, the compiler's artifacts.

A passing test pays only for the Recorder: at the start of each check it keeps a copy of the
inputs, the RNG state and (once per test and module) a copy of each module, so that the test's
whole sequence of checker calls can be replayed later. Everything else runs after a failure:

* the stage bisect replays that sequence with backends eager (TorchDynamo's capture alone),
  aot_eager (AOTAutograd), aot_eager_decomp_partition (Inductor's decompositions and partitioner)
  and then the configured backend, each in a fresh compile world, and names the first that
  diverges: failures that depend on earlier calls (stale caches, missing recompiles, dynamic
  shapes) show up because the calls are replayed in order;
* `repro.py` replays the same sequence from saved inputs, outside pytest, and exits 1 while the
  bug is present;
* a last replay with torch's structured trace on keeps the Dynamo graphs, AOT graphs and
  Inductor's code, and a trace directory `tlparse` reads.
"""

from __future__ import annotations

import ast
import inspect
import pickle
import re
import shutil
import sys
import sysconfig
import textwrap
import time
import types
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import torch

from pytest_torchcompile import __version__, _compat, randomness
from pytest_torchcompile.errors import ParityError
from pytest_torchcompile.runner import Checker, isolated
from pytest_torchcompile.settings import MARKER_KEYS, Settings, apply
from pytest_torchcompile.sides import RngState
from pytest_torchcompile.snapshot import clone_tree, leaves

# The stages before the configured backend, each adding one layer of the stack.
STAGES: tuple[tuple[str, str], ...] = (
    ("eager", "Dynamo"),
    ("aot_eager", "AOTAutograd"),
    ("aot_eager_decomp_partition", "decompositions"),
)
_NAMES = {**dict(STAGES), "inductor": "TorchInductor"}
MAX_REPLAYED_CALLS = (
    200  # longer call sequences (a Hypothesis shrink) are not replayed stage by stage
)
_REPRO_SETTINGS: tuple[str, ...] = ("backend", "mode", "dynamic", "fullgraph", "rtol", "atol")
_REPRO_SETTINGS += ("backward", "check_strides")
_INSTALLED = tuple(
    str(Path(sysconfig.get_paths()[key]).resolve())
    for key in ("purelib", "platlib", "stdlib", "platstdlib")
)


# --- recording, while the test runs ----------------------------------------------------------


@dataclass
class Call:
    """One checker call as it started: the callable, copies of its inputs, the RNG state."""

    fn: Any
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    rng: RngState
    example: int  # the Hypothesis example it belongs to (0 outside Hypothesis)
    diverged: bool = False  # the check raised ParityError
    note: str = ""  # what its message said about a setting the checker chose (fallback_random)


class Recorder:
    """Keeps what each check was asked, so that a failing test can be replayed from its start.

    Inputs are copied at every call (with their strides, offsets and aliasing); a module is
    copied once per test, when first seen, and later calls refer to that copy, so a replay
    evolves it through the calls as the test did. Changes the test makes to a module between
    checks (an optimizer step outside the checker) are not recorded.
    """

    def __init__(self, *, examples: bool = False) -> None:
        self.calls: list[Call] = []
        self.examples = examples
        self._modules: dict[int, tuple[torch.nn.Module, torch.nn.Module]] = {}
        self._example_context: object | None = None  # kept, so its id is not reused
        self._example = 0

    def record(
        self, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: Mapping[str, Any]
    ) -> None:
        memo: dict[int, Any] = {key: kept for key, (_, kept) in self._modules.items()}
        fn_copy, args_copy, kwargs_copy = clone_tree((fn, args, dict(kwargs)), memo)
        for leaf in _modules_in((fn, args, dict(kwargs))):
            if id(leaf) not in self._modules:
                self._modules[id(leaf)] = (leaf, memo[id(leaf)])
        self.calls.append(
            Call(fn_copy, args_copy, kwargs_copy, RngState.capture(), self._current_example())
        )

    def diverged(self, note: str = "") -> None:
        self.calls[-1].diverged = True
        self.calls[-1].note = note

    def _current_example(self) -> int:
        """Hypothesis runs each example in its own build context: a new one is a new example."""
        if not self.examples:
            return 0
        from hypothesis.control import current_build_context

        try:
            context = current_build_context()
        except Exception:  # no example is running (a check outside @given's body)
            return self._example
        if context is not self._example_context:
            self._example_context = context
            self._example += 1
        return self._example


def _modules_in(tree: Any) -> Iterator[torch.nn.Module]:
    """The modules among a call's callable and inputs, found as the checker finds them."""
    return (leaf for leaf in leaves(tree) if isinstance(leaf, torch.nn.Module))


# --- replaying ------------------------------------------------------------------------------------


@dataclass
class Divergence:
    """The first call of a replay whose check failed, and what it said."""

    call: int  # 1-based, within the replayed sequence
    message: str


def replay(calls: list[Call], settings: Settings, *, examples: bool = False) -> Divergence | None:
    """Check `calls` in order with a fresh checker in a fresh compile world; the first failure.

    The calls are copied first, so the recording stays as it was. An exception that both sides
    raised alike is what the test saw too; the replay goes on.
    """
    copies: list[Call] = clone_tree(calls)
    checker = Checker(settings, examples=examples)
    with isolated(checker.accountant):
        for number, call in enumerate(copies, 1):
            call.rng.restore()
            try:
                checker.check(call.fn, call.args, call.kwargs)
            except ParityError as exc:
                return Divergence(number, str(exc))
            except Exception:  # raised alike on both sides, or a budget verdict: not a divergence
                continue
    return None


def stage_backends(backend: str) -> list[str]:
    """The backends a bisect tries, in order, ending with the configured one."""
    earlier = [name for name, _ in STAGES]
    if backend in earlier:
        return earlier[: earlier.index(backend) + 1]
    return [*earlier, backend]


def stage_name(backend: str) -> str:
    return _NAMES.get(backend, backend)


def stage_settings(settings: Settings, backend: str) -> Settings:
    """The test's settings with another backend; modes are Inductor's, so earlier stages drop it."""
    if backend == settings.backend:
        return settings
    return replace(settings, backend=backend, mode="default")


def stage_line(results: list[tuple[str, bool]]) -> str:
    """`stage: Dynamo OK, AOTAutograd OK -> decompositions diverges` from (backend, diverged)."""
    ok = [f"{stage_name(backend)} OK" for backend, diverged in results if not diverged]
    bad = [stage_name(backend) for backend, diverged in results if diverged]
    if not bad:
        return "stage: " + ", ".join(ok) + " -> no stage diverges in the replay"
    if not ok:
        return f"stage: {bad[0]} diverges (the first stage)"
    return f"stage: {', '.join(ok)} -> {bad[0]} diverges"


def _candidates(recorder: Recorder) -> list[list[Call]]:
    """Call sequences that may reproduce the failure, shortest first.

    Outside Hypothesis: every call up to the last failing one. In a Hypothesis test: the failing
    example's calls alone, then every example up to the first failing one (a failure that needs
    what earlier examples compiled; Hypothesis reports it as flaky), then up to the last.
    Sequences longer than MAX_REPLAYED_CALLS are left out (each stage replays them), unless
    nothing shorter is left.
    """
    calls = recorder.calls
    failed = [index for index, call in enumerate(calls) if call.diverged]
    last = failed[-1] if failed else len(calls) - 1
    sequences: list[list[Call]] = []
    if recorder.examples:
        example = calls[last].example
        sequences.append([call for call in calls[: last + 1] if call.example == example])
        if failed:
            sequences.append(calls[: failed[0] + 1])
    sequences.append(calls[: last + 1])
    unique: list[list[Call]] = []
    for sequence in sequences:
        if all([id(c) for c in sequence] != [id(c) for c in seen] for seen in unique):
            unique.append(sequence)
    return [s for s in unique if len(s) <= MAX_REPLAYED_CALLS] or unique[:1]


# --- the triage of one failing test ------------------------------------------------------------


@dataclass
class Triage:
    """What triage found for one failing test, for the failure message, summary and report."""

    stage: str  # "stage: ... -> TorchInductor diverges", or "" when the bisect is off
    repro: str  # path of repro.py
    artifacts: str  # directory of the compiler's artifacts
    calls: int  # checker calls the repro replays
    time_s: float
    bisect_time_s: float
    notes: list[str] = field(default_factory=list)

    def message(self) -> str:
        lines = [self.stage] if self.stage else []
        if self.repro:
            lines.append(f"repro: python {self.repro}  (replays {self.calls} checker call(s))")
        lines.append(f"artifacts: {self.artifacts}")
        timing = f"triage took {self.time_s:.1f}s"
        if self.stage:
            timing += f" (stage bisect {self.bisect_time_s:.1f}s; --compile-bisect=off skips it)"
        lines.append(timing)
        return "\n".join(lines + self.notes)


def triage(
    recorder: Recorder, settings: Settings, directory: Path, *, bisect: str, title: str
) -> Triage:
    """Bisect the failing sequence (`bisect`: on, off or deep), write `directory`/repro.py and
    collect artifacts."""
    started = time.perf_counter()
    candidates = _candidates(recorder)
    sequence, stage = candidates[-1], ""
    if bisect != "off":
        sequence, stage = _bisect(candidates, settings, recorder.examples)
    if bisect == "deep" and stage.endswith("TorchInductor diverges"):
        stage += "\n" + _deep_bisect(sequence, settings, recorder.examples)
    bisect_time_s = time.perf_counter() - started
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True)
    repro = directory / "repro.py"
    try:
        notes = write_repro(directory, sequence, settings, recorder.examples, title, stage)
    except Exception as exc:  # e.g. an input pickle cannot save: the stage line still stands
        notes = [f"repro: could not be written: {type(exc).__name__}: {exc}"]
        repro.unlink(missing_ok=True)
    artifacts = directory / "artifacts"
    collect_artifacts(artifacts, sequence, settings, recorder.examples)
    return Triage(
        stage=stage,
        repro=str(repro) if repro.exists() else "",
        artifacts=str(artifacts),
        calls=len(sequence),
        time_s=time.perf_counter() - started,
        bisect_time_s=bisect_time_s,
        notes=notes,
    )


def _bisect(
    candidates: list[list[Call]], settings: Settings, examples: bool
) -> tuple[list[Call], str]:
    """The shortest candidate the configured backend still fails on, and the stage line."""
    for sequence in candidates:
        if replay(sequence, settings, examples=examples) is not None:
            break
    else:
        count = len(candidates[-1])
        return candidates[-1], (
            f"stage: not found: replaying the test's {count} checker call(s) with "
            f"backend={settings.backend} agreed with eager, so the failure depends on something "
            "the replay does not rebuild (state changed between checks, or other tests)"
        )
    results: list[tuple[str, bool]] = []
    for backend in stage_backends(settings.backend)[:-1]:
        diverged = replay(sequence, stage_settings(settings, backend), examples=examples)
        results.append((backend, diverged is not None))
        if diverged is not None:
            return sequence, stage_line(results)
    return sequence, stage_line([*results, (settings.backend, True)])


def _deep_bisect(sequence: list[Call], settings: Settings, examples: bool) -> str:
    """Inductor's compiler_bisector on the replay: the pass (and its application) that breaks it."""

    def passes(backend: str) -> bool:
        return replay(sequence, stage_settings(settings, backend), examples=examples) is None

    found = _compat.compiler_bisect(passes)
    if found is None:
        return "compiler_bisector: found no single Inductor pass (or this torch has no bisector)"
    return f"compiler_bisector: {found}"


# --- the compiler's artifacts ----------------------------------------------------------------


def collect_artifacts(
    directory: Path, calls: list[Call], settings: Settings, examples: bool
) -> list[Path]:
    """Replay `calls` with torch's structured trace on; keep the trace and each artifact as a file.

    `trace/` is what TORCH_TRACE would have written (run `tlparse` on it); next to it, numbered in
    the order torch logged them, the Dynamo graphs (`print_readable`), AOTAutograd's forward and
    backward graphs, and Inductor's output code.
    """
    trace = directory / "trace"
    trace.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []

    def keep(name: str, payload: str) -> None:
        if name.endswith(("_graph", "output_code")) or name == "dynamo_output_graph":
            path = directory / f"{len(written) + 1:03d}_{name}.py"
            path.write_text(payload, encoding="utf-8")
            written.append(path)

    with _compat.structured_trace(str(trace / "dedicated_log_torch_trace_rank_0.log"), keep):
        replay(calls, settings, examples=examples)
    return written


# --- the standalone repro -------------------------------------------------------------------------


def write_repro(
    directory: Path,
    calls: list[Call],
    settings: Settings,
    examples: bool,
    title: str,
    stage: str,
) -> list[str]:
    """Write repro.py, calls.pt and copies of the test's own modules the callables need.

    Returns notes for the failure message (what the repro could not rebuild).
    """
    notes: list[str] = []
    # Callables rebuilt from source: one maker per code object, called once per function object,
    # so that functions sharing code (a lambda made again each Hypothesis example) share it
    # again, and with it Dynamo's cache entry, as in the test.
    makers: dict[types.CodeType, str] = {}
    instances: dict[int, _FromSource] = {}
    makers_code: list[str] = []
    imports: set[str] = set()
    values: dict[str, list[dict[str, Any]]] = {}
    local_modules: set[str] = set()
    for call in calls:
        fn = call.fn
        local = _local_class(fn) if isinstance(fn, torch.nn.Module) else None
        if local is not None:
            notes.append(
                f"repro: the module class {local} is defined inside a function, so the repro "
                "cannot rebuild it; define it at module level for a standalone repro"
            )
            instances[id(fn)] = _FromSource("", 0)
            continue
        if id(fn) in instances or isinstance(fn, torch.nn.Module) or _importable(fn):
            local_modules |= _defining_modules(fn)
            continue
        try:
            if not isinstance(fn, types.FunctionType):
                raise _NotRebuildable(
                    f"{type(fn).__qualname__} objects defined inside a function cannot be "
                    "rebuilt outside the test; define the class at module level"
                )
            code_object = fn.__code__
            name = makers.get(code_object, f"make_fn_{len(makers)}")
            code, needed_imports, captured = _rebuild_source(fn, name)
        except _NotRebuildable as exc:
            notes.append(f"repro: {exc}")
            instances[id(fn)] = _FromSource("", 0)
            continue
        if code_object not in makers:
            makers[code_object] = name
            makers_code.append(code)
            imports |= needed_imports
        values.setdefault(name, []).append(captured)
        instances[id(fn)] = _FromSource(name, len(values[name]) - 1)
        for value in captured.values():
            local_modules |= _defining_modules(value)
    backend_module = settings.backend.partition(":")[0] if ":" in settings.backend else None
    if backend_module is not None and backend_module in sys.modules:
        local_modules |= _defining_modules(sys.modules[backend_module])
    saved = [
        {
            "fn": instances.get(id(call.fn), call.fn),
            "args": call.args,
            "kwargs": call.kwargs,
            "rng": call.rng,
            "example": call.example,
        }
        for call in calls
    ]
    _copy_sources(local_modules, directory / "source")
    torch.save({"calls": saved, "values": values, "examples": examples}, directory / "calls.pt")
    chosen = {key: getattr(settings, key) for key in _REPRO_SETTINGS}
    if settings.rtol is None:
        del chosen["rtol"], chosen["atol"]
    text = _REPRO_TEMPLATE.format(
        title=title,
        stage=(stage or "stage: not bisected (--compile-bisect=off)") + _random_note(calls),
        count=len(calls),
        listing=_listing(calls, instances),
        version=__version__,
        torch=torch.__version__,
        imports="".join(f"{line}  # noqa: E402\n" for line in sorted(imports)),
        makers="\n\n".join(makers_code) + ("\n\n" if makers_code else ""),
        settings="{\n" + "".join(f"    {k!r}: {v!r},\n" for k, v in chosen.items()) + "}",
        table="{" + ", ".join(f"{n!r}: {n}" for n in makers.values()) + "}",
    )
    (directory / "repro.py").write_text(text, encoding="utf-8")
    return notes


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

{imports}from pytest_torchcompile.triage import run_repro  # noqa: E402

SETTINGS = {settings}


{makers}if __name__ == "__main__":
    sys.exit(run_repro(HERE / "calls.pt", SETTINGS, {table}))
'''


_LISTED = 20  # calls the repro's docstring lists


def _listing(calls: list[Call], instances: Mapping[int, _FromSource]) -> str:
    """The calls, one line each, e.g. `2. rms_norm(float32[4, 4] ... contiguous, 1.5)`."""
    from pytest_torchcompile.strategies import describe

    def shown(value: Any) -> str:
        return describe(value) if isinstance(value, torch.Tensor) else repr(value)

    lines = []
    for number, call in enumerate(calls[:_LISTED], 1):
        made = instances.get(id(call.fn))
        name = (
            made.maker
            if made is not None and made.maker
            else getattr(call.fn, "__qualname__", None) or type(call.fn).__qualname__
        )
        inputs = [shown(a) for a in call.args] + [f"{k}={shown(v)}" for k, v in call.kwargs.items()]
        example = f"  (Hypothesis example {call.example})" if call.example else ""
        lines.append(f"  {number}. {name}({', '.join(inputs)}){example}")
    if len(calls) > _LISTED:
        lines.append(f"  ... and {len(calls) - _LISTED} more")
    return "Calls:\n" + "\n".join(lines)


@dataclass(frozen=True)
class _FromSource:
    """Stands in calls.pt for a callable that repro.py rebuilds from its source."""

    maker: str  # "" when the callable could not be rebuilt
    instance: int  # which of the maker's function objects


class _NotRebuildable(Exception):
    """A callable the repro cannot rebuild; the message says why and what to do."""


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


def _rebuild_source(fn: types.FunctionType, maker: str) -> tuple[str, set[str], dict[str, Any]]:
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
    body = source if fn.__name__ == "<lambda>" else f"{source}\n{fn.__name__}"
    lines = body.splitlines()
    lines[-1] = f"return {lines[-1]}"
    where = f"{inspect.getsourcefile(fn)}:{code.co_firstlineno}"
    text = f"def {maker}({', '.join(captured)}):\n"
    text += f'    """Rebuilds {fn.__qualname__} ({where}) from its source."""\n'
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
    if fn.__name__ == "<lambda>":
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
                and node.name == fn.__name__
            ):
                first = min([node.lineno] + [d.lineno for d in node.decorator_list])
                if first == code.co_firstlineno:
                    node.decorator_list = []
                    return ast.unparse(node)
    raise _NotRebuildable(f"could not find the source of {fn.__qualname__}")


def run_repro(
    path: Path, settings: Mapping[str, Any], makers: Mapping[str, Callable[..., Any]]
) -> int:
    """What repro.py runs: replay the saved calls, print the verdict; 1 while they disagree."""
    saved = torch.load(path, weights_only=False)
    if any(
        isinstance(entry["fn"], _FromSource) and not entry["fn"].maker for entry in saved["calls"]
    ):
        print("the test's callable could not be rebuilt outside the test (see the failure message)")
        return 2
    rebuilt = {
        (name, index): maker(**captured)
        for name, maker in makers.items()
        for index, captured in enumerate(saved["values"].get(name, []))
    }
    calls = [
        Call(
            fn=_rebuilt(entry["fn"], rebuilt),
            args=entry["args"],
            kwargs=entry["kwargs"],
            rng=entry["rng"],
            example=entry["example"],
        )
        for entry in saved["calls"]
    ]
    resolved = apply(
        Settings(), {k: v for k, v in settings.items() if k in MARKER_KEYS}, "repro.py"
    )
    print(f"torch {torch.__version__}: {resolved.describe()}, {len(calls)} checker call(s)")
    divergence = replay(calls, resolved, examples=saved["examples"])
    if divergence is None:
        print(f"eager and compiled agree on all {len(calls)} call(s): the bug is gone")
        return 0
    print(f"call {divergence.call} of {len(calls)}: {divergence.message}")
    print("eager and compiled disagree: the bug is present")
    return 1


def _rebuilt(saved: Any, rebuilt: Mapping[tuple[str, int], Any]) -> Any:
    if isinstance(saved, _FromSource):
        return rebuilt[saved.maker, saved.instance]
    return saved


def directory_name(nodeid: str) -> str:
    """A directory name for a test: its node id with path separators and brackets replaced."""
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", nodeid.replace("::", "__")).strip("_")
    return name[-120:]


__all__ = [
    "STAGES",
    "Call",
    "Divergence",
    "Recorder",
    "Triage",
    "collect_artifacts",
    "replay",
    "run_repro",
    "stage_backends",
    "stage_line",
    "triage",
    "write_repro",
]
