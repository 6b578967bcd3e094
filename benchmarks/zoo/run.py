"""The planted-miscompilation benchmark: 20 wrong backends, three ways of testing, one table.

    python benchmarks/zoo/run.py                    # all bugs; false-alarm check on eager only
    python benchmarks/zoo/run.py --correct eager aot_eager inductor     # the full benchmark
    python benchmarks/zoo/run.py --bugs stale_cache corrupt_output --correct none
    python benchmarks/zoo/run.py --seeds 0 1 2 3 4 --correct none       # catch rates over seeds

For each planted bug (zoo/bugs.py) on its zoo program (zoo/models.py):
  A     baseline_a: one torch.randn input, assert_close on the forward outputs;
  B     baseline_b: Hypothesis, contiguous float32 inputs of random shapes, a fresh compile per
        example, assert_close on the forward outputs;
  ours  the program's suite in zoo/suites/, run by pytest in its own process with
        --compile-backend=planted:<bug>; caught iff a test fails with one of the plugin's
        verdicts (a CompileParityFailure), not with some other error.
Then the false-alarm check: every tool on correct backends. Inductor is the slow one (a C++
compile per graph, and B compiles afresh for every example), so it is opt-in.
"""

from __future__ import annotations

import argparse
import datetime
import json
import multiprocessing
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

ZOO_DIR = Path(__file__).resolve().parent
REPO = ZOO_DIR.parents[1]
PATHS = (REPO / "benchmarks", REPO / "tests")  # zoo.*, and planted.py for planted:NAME
for _path in PATHS:
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

import torch  # noqa: E402 (after the path set-up, like everything below)

from pytest_torchcompile.settings import load_backend_callable  # noqa: E402
from zoo import EXAMPLES  # noqa: E402
from zoo.baselines import Backend, Verdict, baseline_a, baseline_b  # noqa: E402
from zoo.bugs import BUGS, Bug  # noqa: E402
from zoo.models import ZOO  # noqa: E402

SUITES = ZOO_DIR / "suites"
CORRECT_BACKENDS = ("eager", "aot_eager", "inductor")


def suite_file(model: str) -> Path:
    return SUITES / f"test_zoo_{model}.py"


# --- ours: the suites, each run by pytest in a fresh process --------------------------------


def pytest_command(files: Sequence[Path], backend: str, seed: int) -> list[str]:
    """The pytest command line for `files` on `backend` (run from the repository root)."""
    return [
        sys.executable,
        "-m",
        "pytest",
        *(str(f.relative_to(REPO)) for f in files),
        f"--compile-backend={backend}",
        "--hypothesis-profile=zoo",
        f"--hypothesis-seed={seed}",
        "--compile-bisect=off",  # suites that fail on purpose need no stage bisect each
        "-q",
        "-p",
        "no:cacheprovider",
    ]


@dataclass
class SuiteRun:
    """One pytest run of some suites: the exit status and each failed test's exception types."""

    backend: str
    files: list[str]
    returncode: int
    records: list[dict[str, Any]]
    seconds: float
    output_tail: str

    @property
    def failures(self) -> list[dict[str, Any]]:
        return [r for r in self.records if r["outcome"] == "failed"]

    @property
    def broken(self) -> list[str]:
        """What went wrong other than a verdict of the plugin: errors, crashes, usage errors."""
        found = [
            f"{_test_name(r)}: {'/'.join(r['leaves'])}: {r['message']}"
            for r in self.failures
            if not r["ours"]
        ]
        if self.returncode not in (0, 1) or (self.returncode == 1 and not self.failures):
            found.append(f"pytest exit status {self.returncode}: {self.output_tail[-300:]}")
        return found

    def verdict(self) -> Verdict:
        """Caught iff some test failed with one of the plugin's verdicts."""
        ours = [r for r in self.failures if r["ours"]]
        detail = ", ".join(f"{_test_name(r)} ({_kind(r)})" for r in ours)
        return Verdict(bool(ours), detail)


def _test_name(record: dict[str, Any]) -> str:
    return str(record["nodeid"]).rpartition("::")[2]


def _kind(record: dict[str, Any]) -> str:
    """The verdict's type; 'flaky' when Hypothesis could not reproduce it on replay."""
    names = [n for n in record["leaves"] if n != "AssertionError"] or record["leaves"]
    kind = "/".join(dict.fromkeys(names))
    return f"{kind}, flaky" if record["raised"] == "FlakyFailure" else kind


def run_suites(files: Sequence[Path], backend: str, seed: int, threads: int) -> SuiteRun:
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        outcomes = Path(tmp) / "outcomes.json"
        command = [
            *pytest_command(files, backend, seed),
            "-p",
            "zoo.outcomes",
            f"--zoo-outcomes={outcomes}",
        ]
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(
            [*map(str, PATHS), *filter(None, [env.get("PYTHONPATH")])]
        )
        env.setdefault("OMP_NUM_THREADS", str(threads))
        done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True)
        records = json.loads(outcomes.read_text()) if outcomes.exists() else []
    return SuiteRun(
        backend=backend,
        files=[str(f.relative_to(REPO)) for f in files],
        returncode=done.returncode,
        records=records,
        seconds=time.perf_counter() - started,
        output_tail=(done.stdout + done.stderr)[-3000:],
    )


# --- the benchmark ------------------------------------------------------------------------------


@dataclass
class BugResult:
    """One bug: A's verdict, and B's and ours per Hypothesis seed."""

    bug: str
    model: str
    what: str
    a: Verdict
    b: list[Verdict]
    ours: list[Verdict]
    ours_broken: list[list[str]]  # errors other than the plugin's verdicts, per seed
    ours_seconds: list[float]


@dataclass
class CorrectResult:
    """One correct backend and seed: which baseline programs and which of our tests failed."""

    backend: str
    seed: int
    a_failed: dict[str, str]
    b_failed: dict[str, str]
    ours_failed: list[str]
    ours_broken: list[str]
    ours_seconds: float

    @property
    def alarms(self) -> dict[str, int]:
        return {
            "A": len(self.a_failed),
            "B": len(self.b_failed),
            "ours": len(self.ours_failed) + len(self.ours_broken),
        }


def _failed(verdicts: dict[str, Verdict]) -> dict[str, str]:
    return {name: v.detail for name, v in verdicts.items() if v.caught}


def _init_worker(threads: int) -> None:
    torch.set_num_threads(threads)


def baseline_task(tool: str, entry: str, backend: str, seed: int) -> tuple[Verdict, float]:
    """Baseline A or B on a zoo entry, in a worker process; `backend` as --compile-backend takes it."""
    started = time.perf_counter()
    compiler: Backend = load_backend_callable(backend) if ":" in backend else backend
    if tool == "A":
        verdict = baseline_a(ZOO[entry], compiler)
    else:
        verdict = baseline_b(ZOO[entry], compiler, examples=EXAMPLES, seed_=seed)
    seconds = time.perf_counter() - started
    print(f"  {tool} on {entry}, {backend}, seed {seed}: {seconds:.1f}s", file=sys.stderr)
    return verdict, seconds


def benchmark(
    bugs: Sequence[Bug], correct: Sequence[str], seeds: Sequence[int], jobs: int
) -> tuple[list[BugResult], list[CorrectResult], dict[str, float]]:
    """Every run of every tool as a task for `jobs` worker processes, the longest first.

    Returns the results and the wall time, plus each tool's summed run time (its cost).
    """
    threads = max(1, (os.cpu_count() or 1) // jobs)
    every_suite = sorted(SUITES.glob("test_zoo_*.py"))
    started = time.perf_counter()
    context = multiprocessing.get_context("spawn")  # no fork of a process that loaded torch
    with ProcessPoolExecutor(jobs, context, initializer=_init_worker, initargs=(threads,)) as pool:
        correct_ours = {
            (name, seed): pool.submit(run_suites, every_suite, name, seed, threads)
            for name in correct
            for seed in seeds
        }
        correct_b = {
            (name, entry, seed): pool.submit(baseline_task, "B", entry, name, seed)
            for name in correct
            for seed in seeds
            for entry in ZOO
        }
        correct_a = {
            (name, entry): pool.submit(baseline_task, "A", entry, name, 0)
            for name in correct
            for entry in ZOO
        }
        bug_ours = {
            (bug.name, seed): pool.submit(
                run_suites, [suite_file(bug.model)], bug.spec, seed, threads
            )
            for bug in bugs
            for seed in seeds
        }
        bug_b = {
            (bug.name, seed): pool.submit(baseline_task, "B", bug.model, bug.spec, seed)
            for bug in bugs
            for seed in seeds
        }
        bug_a = {bug.name: pool.submit(baseline_task, "A", bug.model, bug.spec, 0) for bug in bugs}

        bug_results = []
        for bug in bugs:
            runs = [bug_ours[bug.name, seed].result() for seed in seeds]
            bug_results.append(
                BugResult(
                    bug.name,
                    bug.model,
                    bug.what,
                    bug_a[bug.name].result()[0],
                    [bug_b[bug.name, seed].result()[0] for seed in seeds],
                    [run.verdict() for run in runs],
                    [run.broken for run in runs],
                    [run.seconds for run in runs],
                )
            )
        correct_results = []
        for name in correct:
            a_failed = _failed({e: correct_a[name, e].result()[0] for e in ZOO})
            for seed in seeds:
                b_failed = _failed({e: correct_b[name, e, seed].result()[0] for e in ZOO})
                run = correct_ours[name, seed].result()
                failed = [f"{_test_name(r)} ({_kind(r)}): {r['message']}" for r in run.failures]
                correct_results.append(
                    CorrectResult(name, seed, a_failed, b_failed, failed, run.broken, run.seconds)
                )
    timings = {"wall": time.perf_counter() - started}
    for tool, futures in (
        ("A", [*correct_a.values(), *bug_a.values()]),
        ("B", [*correct_b.values(), *bug_b.values()]),
    ):
        timings[f"{tool} runs"] = sum(future.result()[1] for future in futures)
    timings["ours runs"] = sum(
        future.result().seconds for future in [*correct_ours.values(), *bug_ours.values()]
    )
    return bug_results, correct_results, timings


def _mark(verdicts: Sequence[Verdict]) -> str:
    caught = sum(v.caught for v in verdicts)
    if len(verdicts) > 1:
        return f"{caught}/{len(verdicts)}"
    return "caught" if caught else "-"


def report(
    bugs: list[BugResult],
    correct: list[CorrectResult],
    timings: dict[str, float],
    seeds: Sequence[int],
) -> str:
    """A Markdown table (one row per bug), the failures on correct backends, totals, timings."""
    many = len(seeds) > 1
    lines = [
        f"torch {torch.__version__}, Python {sys.version.split()[0]}, "
        f"{os.cpu_count()} CPUs, {datetime.date.today()}, Hypothesis seed(s) "
        f"{', '.join(map(str, seeds))}, {EXAMPLES} examples per property test",
        "",
        "| # | bug | model | A | B | ours | ours: failing tests (first seed) | ours: s |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for i, r in enumerate(bugs, 1):
        broken = r.ours_broken[0]
        detail = r.ours[0].detail + ("; other errors: " + "; ".join(broken) if broken else "")
        lines.append(
            f"| {i} | `{r.bug}` | {r.model} | {_mark([r.a])} | {_mark(r.b)} | {_mark(r.ours)} "
            f"| {detail} | {statistics.mean(r.ours_seconds):.0f} |"
        )
    lines += ["", "Failures on correct backends (false alarms, or real divergences):", ""]
    for c in correct:
        lines.append(
            f"- {c.backend}, seed {c.seed}: "
            + ", ".join(f"{tool} {n}" for tool, n in c.alarms.items())
            + f" (ours took {c.ours_seconds:.0f}s)"
        )
        lines += [f"    - ours: {failure}" for failure in c.ours_failed + c.ours_broken]
        lines += [f"    - A on {entry}: {detail}" for entry, detail in c.a_failed.items()]
        lines += [f"    - B on {entry}: {detail}" for entry, detail in c.b_failed.items()]
    n = len(bugs)
    totals = []
    for i, seed in enumerate(seeds):
        caught = {
            "A": sum(r.a.caught for r in bugs),
            "B": sum(r.b[i].caught for r in bugs),
            "ours": sum(r.ours[i].caught for r in bugs),
        }
        alarms = {tool: sum(c.alarms[tool] for c in correct if c.seed == seed) for tool in caught}
        totals.append(
            (f"seed {seed}: " if many else "")
            + ", ".join(f"{tool} {k}/{n}" for tool, k in caught.items())
            + ", false alarms: "
            + (", ".join(f"{tool} {k}" for tool, k in alarms.items()) if correct else "not checked")
        )
    lines += [
        "",
        *totals,
        "correct backends checked: " + (", ".join(correct_names(correct)) or "none"),
        "time: " + ", ".join(f"{key} {value:.0f}s" for key, value in timings.items()),
    ]
    return "\n".join(lines)


def correct_names(correct: Sequence[CorrectResult]) -> list[str]:
    return list(dict.fromkeys(c.backend for c in correct))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bugs", nargs="+", metavar="NAME", help="only these planted bugs")
    parser.add_argument(
        "--correct",
        nargs="+",
        default=["eager"],
        metavar="BACKEND",
        help=f"correct backends for the false-alarm check, of {', '.join(CORRECT_BACKENDS)} "
        "(default: eager; 'none' for no check)",
    )
    parser.add_argument(
        "--seeds", type=int, nargs="+", default=[0], help="Hypothesis seeds for B and ours"
    )
    parser.add_argument("--jobs", type=int, default=2, help="pytest processes at a time")
    parser.add_argument("--json", type=Path, help="also write the results as JSON here")
    args = parser.parse_args(argv)
    known = {bug.name: bug for bug in BUGS}
    unknown = sorted(set(args.bugs or ()) - known.keys())
    if unknown:
        parser.error(f"unknown bugs {unknown}; known: {', '.join(known)}")
    bugs = [known[name] for name in args.bugs] if args.bugs else list(BUGS)
    correct = [] if args.correct == ["none"] else args.correct
    bug_results, correct_results, timings = benchmark(bugs, correct, args.seeds, args.jobs)
    print(report(bug_results, correct_results, timings, args.seeds))
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "torch": torch.__version__,
                    "seeds": args.seeds,
                    "examples": EXAMPLES,
                    "bugs": [asdict(r) for r in bug_results],
                    "correct": [asdict(c) for c in correct_results],
                    "timings": timings,
                },
                indent=1,
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
