"""After a parity failure: which compiler stage diverged, a standalone repro, the compiler's artifacts.

Nothing here runs while tests pass (the Recorder, recorder.py, keeps what a failure needs). After
a failure, `triage` replays the test's checker calls (replay.py):

* the stage bisect replays that sequence with backends eager (TorchDynamo's capture alone),
  aot_eager (AOTAutograd), aot_eager_decomp_partition (Inductor's decompositions and partitioner)
  and then the configured backend, each in a fresh compile world, and names the first that
  diverges: failures that depend on earlier calls (stale caches, missing recompiles, dynamic
  shapes) show up because the calls are replayed in order;
* a standalone `repro.py`, written by the repro writer (repro.py), replays the same sequence
  from saved inputs, outside pytest, and exits 1 while the bug is present;
* torch's structured trace, on during the bisect's replay with the configured backend (or a
  replay of its own where the bisect is off), keeps the Dynamo graphs, AOT graphs and Inductor's
  code, and a trace directory `tlparse` reads.
"""

from __future__ import annotations

import re
import shutil
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

from pytest_torchcompile import _compat
from pytest_torchcompile.after_failure.replay import Divergence, replay
from pytest_torchcompile.after_failure.repro import run_repro, write_repro
from pytest_torchcompile.counting.costs import CHECK_KINDS
from pytest_torchcompile.running.recorder import Call, Recorder
from pytest_torchcompile.settings import Settings

# The stages before the configured backend, each adding one layer of the stack.
STAGES: tuple[tuple[str, str], ...] = (
    ("eager", "Dynamo"),
    ("aot_eager", "AOTAutograd"),
    ("aot_eager_decomp_partition", "decompositions"),
)
_NAMES = {
    **dict(STAGES),
    "inductor": "TorchInductor",
    "export": "torch.export",
    "aot_inductor": "AOTInductor",
}
MAX_REPLAYED_CALLS = (
    200  # longer call sequences (a Hypothesis shrink) are not replayed stage by stage
)


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
    example's calls alone; then the examples that passed before it, and it (a failure that needs
    what earlier examples compiled: a shape change that made a dimension dynamic), so that the
    repro still ends at the example the message shows, not at another one that failed while
    Hypothesis shrank; then every example up to the first failing one; then up to the last.
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
        failing = {call.example for call in calls if call.diverged} - {example}
        sequences.append([call for call in calls[: last + 1] if call.example not in failing])
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
    reused_from: str = ""  # the test whose triage this is, where a later one reuses it

    def message(self) -> str:
        lines = [self.stage] if self.stage else []
        if self.repro:
            lines.append(f"repro: python {self.repro}  (replays {self.calls} checker call(s))")
        if self.artifacts:
            lines.append(f"artifacts: {self.artifacts}")
        if self.reused_from:
            timing = (
                f"triage: reused from {self.reused_from}, which diverged the same way (the same "
                "class or function, structure, input signature and differing leaves: triaged "
                "once per session)"
            )
        else:
            timing = f"triage took {self.time_s:.1f}s"
        if self.stage and not self.reused_from:
            timing += f" (stage bisect {self.bisect_time_s:.1f}s; --compile-bisect=off skips it)"
        lines.append(timing)
        return "\n".join(lines + self.notes)


def triage(
    recorder: Recorder,
    settings: Settings,
    directory: Path,
    *,
    bisect: str,
    title: str,
    spent: tuple[float, float] | None = None,
) -> Triage:
    """Bisect the failing sequence (`bisect`: on, off or deep), write `directory`/repro.py and
    collect artifacts; only the repro where `spent` (the session's triage seconds so far, and
    its budget) says the budget is used up: each replay compiles again, and a suite failing
    everywhere (a wrong backend) would spend minutes per test on them."""
    started = time.perf_counter()
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True)
    artifacts = directory / "artifacts"
    candidates = _candidates(recorder)
    sequence, stage, traced = candidates[-1], "", False
    replays = spent is None  # past the budget: no replay at all, the repro alone
    if not replays:
        bisect = "off"
    if bisect != "off":
        sequence, stage, settings, traced = _bisect(
            candidates, _replay_settings(settings, recorder), recorder.examples, artifacts
        )
    elif recorder.session_graphs == CHECK_KINDS[1]:  # unbisected: the graphs were dynamic
        settings = _replay_settings(settings, recorder)[-1]
    if bisect == "deep" and "TorchInductor diverges" in stage:
        stage += "\n" + _deep_bisect(sequence, settings, recorder.examples)
    bisect_time_s = time.perf_counter() - started
    repro = directory / "repro.py"
    try:
        notes = write_repro(directory, sequence, settings, recorder.examples, title, stage)
    except Exception as exc:  # e.g. an input pickle cannot save: the stage line still stands
        notes = [f"repro: could not be written: {type(exc).__name__}: {exc}"]
        repro.unlink(missing_ok=True)
    if replays and not traced:
        collect_artifacts(artifacts, sequence, settings, recorder.examples)
    if spent is not None:
        notes.append(
            f"triage: no stage bisect and no artifacts: this session's triage took "
            f"{spent[0]:.0f}s, its --compile-triage-budget of {spent[1]:g}s; run this test alone, "
            "or raise the budget (0: none), for them"
        )
    return Triage(
        stage=stage,
        repro=str(repro) if repro.exists() else "",
        artifacts=str(artifacts) if artifacts.exists() else "",
        calls=len(sequence),
        time_s=time.perf_counter() - started,
        bisect_time_s=bisect_time_s,
        notes=notes,
    )


def reused(nodeid: str, earlier: Triage) -> Triage:
    """What an earlier test's triage found, for a test that diverged the same way (the same
    class or function, structure, input signature and differing leaves): its stage, repro and
    artifacts, at no cost, saying whose they are (a suite's tests often fail on one bug: pykeen's
    nine NTN tests bisected the same Dynamo divergence nine times)."""
    return replace(earlier, time_s=0.0, bisect_time_s=0.0, reused_from=nodeid)


def _replay_settings(settings: Settings, recorder: Recorder) -> list[Settings]:
    """The settings a replay tries, in order: the test's; then, where the divergence came from
    graphs an earlier call of the session left (a fresh replay compiles static ones), the same
    with dynamic shapes (`dynamic=true`: every input size symbolic, as automatic dynamic shapes
    made the sizes that changed)."""
    if not recorder.session_graphs or settings.dynamic == "true":
        return [settings]
    return [settings, replace(settings, dynamic="true")]


_DYNAMIC_REPLAY = (
    " (replayed with dynamic=true: the divergence came from graphs an earlier call of the "
    "session left, which a replay with the test's settings compiles afresh with static shapes)"
)


def _bisect(
    candidates: list[list[Call]], tried: list[Settings], examples: bool, artifacts: Path
) -> tuple[list[Call], str, Settings, bool]:
    """The shortest candidate the configured backend still fails on (under the first of the
    `tried` settings that fails at all), the stage line, those settings, and whether
    `artifacts` holds the trace of that replay (each replay with the configured backend is
    traced: the one that fails is the compile the artifacts are for, and no replay of its own
    is needed)."""
    found = None
    for settings in tried:
        for sequence in candidates:
            shutil.rmtree(artifacts, ignore_errors=True)
            if _traced_replay(artifacts, sequence, settings, examples)[1] is not None:
                found = (sequence, settings)
                break
        if found is not None:
            break
    if found is None:
        count, backend = len(candidates[-1]), tried[0].backend
        shapes = " (with the test's settings and with dynamic=true)" if len(tried) > 1 else ""
        return (
            candidates[-1],
            (
                f"stage: not found: replaying the test's {count} checker call(s) with "
                f"backend={backend}{shapes} agreed with eager, so the failure depends on something "
                "the replay does not rebuild (state changed between checks, or other tests)"
            ),
            tried[0],
            len(tried) == 1,  # the last replay traced was candidates[-1] under tried[0]
        )
    sequence, settings = found
    how = _DYNAMIC_REPLAY if settings is not tried[0] else ""
    results: list[tuple[str, bool]] = []
    for backend in stage_backends(settings.backend)[:-1]:
        diverged = replay(sequence, stage_settings(settings, backend), examples=examples)
        results.append((backend, diverged is not None))
        if diverged is not None:
            return sequence, stage_line(results) + how, settings, True
    return sequence, stage_line([*results, (settings.backend, True)]) + how, settings, True


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
    return _traced_replay(directory, calls, settings, examples)[0]


def _traced_replay(
    directory: Path, calls: list[Call], settings: Settings, examples: bool
) -> tuple[list[Path], Divergence | None]:
    """`collect_artifacts`, and what the replay found."""
    trace = directory / "trace"
    trace.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []

    def keep(name: str, payload: str) -> None:
        if name.endswith(("_graph", "output_code")) or name == "dynamo_output_graph":
            path = directory / f"{len(written) + 1:03d}_{name}.py"
            path.write_text(payload, encoding="utf-8")
            written.append(path)

    with _compat.structured_trace(str(trace / "dedicated_log_torch_trace_rank_0.log"), keep):
        diverged = replay(calls, settings, examples=examples)
    return written, diverged


def directory_name(nodeid: str) -> str:
    """A directory name for a test: its node id with path separators and brackets replaced."""
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", nodeid.replace("::", "__")).strip("_")
    return name[-120:]


__all__ = [
    "STAGES",
    "Triage",
    "collect_artifacts",
    "directory_name",
    "run_repro",  # repro.py files written before the repro writer had its own room import it here
    "stage_backends",
    "stage_line",
    "triage",
]
