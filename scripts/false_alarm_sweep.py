"""Run the zoo suites and the examples on correct backends over many Hypothesis seeds.

    python3 scripts/false_alarm_sweep.py -n 14                         # CPU, the full sweep
    python3 scripts/false_alarm_sweep.py -n 14 --devices cuda          # the device tests on CUDA
    python3 scripts/false_alarm_sweep.py -n 2 --backends eager aot_eager --seeds 0 --random 0

Every failure on a correct backend is a false alarm until shown otherwise (issue 10's target is
none). Each (backend, seed, test file) runs as its own pytest process, `-n` of them at a time,
inductor first (its compiles are the long pole); the seeds are 0-4 plus `--random` fresh ones,
printed so that a failure can be re-run. The zoo suites run with their `zoo` profile (as
benchmarks/zoo/run.py does), the examples with their own settings (as CI runs them). Each run gets
an empty Hypothesis database, so no run replays another's failures. Logs and a JSON summary go
to `--logs` ($OUT or ./sweep-logs); the last lines printed are the table of failures per
(backend, seed) and, per backend, how many leaves outside the plain tolerance each named rule
excused (the excuse audit: every excuse's note is in the logs, `-rA`). Each finished run is
appended to `runs.jsonl` there and the table so far is rewritten to `summary.md`, so a sweep cut
off by `timeout` (SIGTERM or SIGINT) still leaves its figures behind; on such a signal it stops
the running pytest processes and prints the table of the runs that finished.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
ZOO_SUITES = sorted((ROOT / "benchmarks" / "zoo" / "suites").glob("test_zoo_*.py"))
EXAMPLES = sorted((ROOT / "examples").glob("test_*.py"))
BACKENDS = ("inductor", "aot_eager", "eager")  # the slow one first
_LIVE: set[subprocess.Popen[str]] = set()  # pytest processes running now, stopped on a signal
_LIVE_LOCK = threading.Lock()
_STOPPING = threading.Event()  # set under _LIVE_LOCK once the sweep is interrupted


@dataclass
class Run:
    """One pytest process: a test file on a backend with a Hypothesis seed."""

    backend: str
    seed: int
    file: str
    status: int = 0
    seconds: float = 0.0
    failures: list[str] = field(default_factory=list)  # "test: first line of the error"
    passed: int = 0
    interrupted: bool = False  # stopped by a signal: no verdict, left out of the figures
    # leaves outside the plain tolerance a named rule excused, and leaves not judged, by rule
    # (from the run's --compile-report): the excuse audit reads each rule's notes in the logs
    excused: dict[str, int] = field(default_factory=dict)
    not_judged: dict[str, int] = field(default_factory=dict)

    @property
    def group(self) -> str:
        return "zoo" if self.file.startswith("benchmarks") else "examples"

    def command(self, devices: str) -> list[str]:
        profile = ["--hypothesis-profile=zoo"] if self.group == "zoo" else []
        return [
            sys.executable,
            "-m",
            "pytest",
            self.file,
            f"--compile-backend={self.backend}",
            f"--compile-devices={devices}",
            f"--hypothesis-seed={self.seed}",
            *profile,
            "-q",
            "-p",
            "no:cacheprovider",
            "-W",
            "ignore::DeprecationWarning",
        ]


def execute(run: Run, devices: str, threads: int, timeout: int, logs: Path) -> Run:
    """Run `run` in a fresh process; record its failures through benchmarks/zoo/outcomes.py."""
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        outcomes = Path(tmp) / "outcomes.json"
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join(
                [str(ROOT), str(ROOT / "benchmarks"), *filter(None, [os.getenv("PYTHONPATH")])]
            ),
            "HYPOTHESIS_STORAGE_DIRECTORY": str(Path(tmp) / "hypothesis"),
            "OMP_NUM_THREADS": str(threads),
            "TORCHINDUCTOR_COMPILE_THREADS": "1",  # -n processes already share the cores
        }
        report = Path(tmp) / "report.json"
        command = [
            *run.command(devices),
            "-p",
            "zoo.outcomes",
            f"--zoo-outcomes={outcomes}",
            f"--compile-report={report}",
            "-rA",  # the passing tests' notes too: every excuse is read once
        ]
        process = subprocess.Popen(
            command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        with _LIVE_LOCK:
            _LIVE.add(process)
            if _STOPPING.is_set():
                process.kill()
        try:
            output, _ = process.communicate(timeout=timeout)
            run.status = process.returncode
            run.interrupted = run.status < 0 or (run.status == 2 and "KeyboardInterrupt" in output)
        except subprocess.TimeoutExpired:
            process.kill()
            output = f"{process.communicate()[0]}\nTIMED OUT after {timeout}s"
            run.status = -1
        finally:
            with _LIVE_LOCK:
                _LIVE.discard(process)
        records: list[dict[str, Any]] = (
            json.loads(outcomes.read_text()) if outcomes.exists() else []
        )
        tests = json.loads(report.read_text())["tests"].values() if report.exists() else []
    for test in tests:
        for key in ("excused", "not_judged"):
            counts = getattr(run, key)
            for rule, n in test.get(key, {}).items():
                counts[rule] = counts.get(rule, 0) + n
    run.seconds = time.perf_counter() - started
    run.passed = sum(r["outcome"] == "passed" for r in records)
    run.failures = [
        f"{r['nodeid'].rpartition('::')[2]}: {'/'.join(dict.fromkeys(r['leaves']))}: {r['message']}"
        for r in records
        if r["outcome"] == "failed"
    ]
    if run.interrupted:
        run.failures = []
    elif run.status not in (0, 1) or (run.status == 1 and not run.failures):
        run.failures.append(f"pytest exit status {run.status}: {output.strip()[-200:]}")
    name = f"{run.backend}-{run.seed}-{Path(run.file).stem}.log"
    (logs / name).write_text(" ".join(run.command(devices)) + "\n\n" + output)
    print(
        f"  {run.backend:9} seed {run.seed:<10} {run.file}: "
        f"{'interrupted' if run.interrupted else f'{len(run.failures)} failed'}, "
        f"{run.seconds:.0f}s",
        *(f"\n    {failure}" for failure in run.failures),
        file=sys.stderr,
        flush=True,
    )
    return run


def _interrupt(signum: int, frame: FrameType | None) -> None:
    """SIGTERM (as from `timeout`) stops the sweep as Ctrl-C does, so the summary still prints."""
    raise KeyboardInterrupt


def _stop_live() -> None:
    """Kill the pytest processes this sweep started and that still run."""
    with _LIVE_LOCK:
        _STOPPING.set()
        for process in _LIVE:
            process.kill()


def table(runs: Sequence[Run], seeds: Sequence[int], backends: Sequence[str]) -> str:
    """Failures per (backend, seed), zoo and examples apart, then each failure."""
    lines = [
        "| backend | seed | zoo failures | examples failures | tests passed | slowest file s |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for backend in backends:
        for seed in seeds:
            mine = [r for r in runs if r.backend == backend and r.seed == seed]
            zoo = sum(len(r.failures) for r in mine if r.group == "zoo")
            examples = sum(len(r.failures) for r in mine if r.group == "examples")
            lines.append(
                f"| {backend} | {seed} | {zoo} | {examples} | {sum(r.passed for r in mine)} "
                f"| {max((r.seconds for r in mine), default=0):.0f} |"
            )
    lines += [
        "",
        "| backend | leaves excused, by rule | leaves not judged, by why |",
        "| --- | --- | --- |",
    ]
    for backend in backends:
        mine = [r for r in runs if r.backend == backend]
        lines.append(
            f"| {backend} | {_totals(r.excused for r in mine)} "
            f"| {_totals(r.not_judged for r in mine)} |"
        )
    failed = [r for r in runs if r.failures]
    lines += ["", f"failures ({sum(len(r.failures) for r in failed)}):"]
    for r in sorted(failed, key=lambda r: (r.backend, r.seed, r.file)):
        lines += [f"- {r.backend}, seed {r.seed}, {r.file}: {f}" for f in r.failures]
    return "\n".join(lines)


def _totals(counts: Iterable[dict[str, int]]) -> str:
    total: dict[str, int] = {}
    for each in counts:
        for rule, n in each.items():
            total[rule] = total.get(rule, 0) + n
    return ", ".join(f"{rule}: {n}" for rule, n in sorted(total.items())) or "none"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-n", "--jobs", type=int, default=2, help="pytest processes at a time")
    parser.add_argument("--backends", nargs="+", default=list(BACKENDS), metavar="BACKEND")
    parser.add_argument(
        "--seeds", type=int, nargs="*", default=[0, 1, 2, 3, 4], help="(none: --random only)"
    )
    parser.add_argument("--random", type=int, default=3, help="fresh random seeds to add")
    parser.add_argument(
        "--devices", default="cpu", help="--compile-devices for the tests that take `device`"
    )
    parser.add_argument("--only", choices=("zoo", "examples"), help="one of the two groups")
    parser.add_argument("--timeout", type=int, default=540, help="seconds per pytest process")
    parser.add_argument(
        "--logs", type=Path, default=Path(os.getenv("OUT") or "sweep-logs"), help="log folder"
    )
    args = parser.parse_args(argv)
    seeds = [*args.seeds, *(random.SystemRandom().randrange(2**32) for _ in range(args.random))]
    files = {"zoo": ZOO_SUITES, "examples": EXAMPLES}
    chosen = [f for group, fs in files.items() if args.only in (None, group) for f in fs]
    backends = sorted(args.backends, key=lambda b: BACKENDS.index(b) if b in BACKENDS else -1)
    runs = [
        Run(backend, seed, str(f.relative_to(ROOT)))
        for backend in backends
        for seed in seeds
        for f in chosen
    ]
    args.logs.mkdir(parents=True, exist_ok=True)
    threads = max(1, (os.cpu_count() or 1) // args.jobs)
    print(f"{len(runs)} pytest runs, {args.jobs} at a time, seeds {seeds}", file=sys.stderr)
    (args.logs / "runs.jsonl").write_text("")
    _STOPPING.clear()
    previous = signal.signal(signal.SIGTERM, _interrupt)
    started = time.perf_counter()
    done: list[Run] = []
    pool = ThreadPoolExecutor(args.jobs)
    try:
        futures = [
            pool.submit(execute, r, args.devices, threads, args.timeout, args.logs) for r in runs
        ]
        for future in as_completed(futures):
            if future.result().interrupted:  # a signal meant for the whole sweep
                continue
            done.append(future.result())
            with (args.logs / "runs.jsonl").open("a") as jsonl:
                jsonl.write(json.dumps(asdict(done[-1])) + "\n")
            summary = args.logs / "summary.md.part"  # replaced whole: a reader never sees it empty
            summary.write_text(
                f"{len(done)} of {len(runs)} runs done\n\n{table(done, seeds, backends)}\n"
            )
            summary.replace(args.logs / "summary.md")
    except KeyboardInterrupt:
        print(f"\nINTERRUPTED: {len(done)} of {len(runs)} runs done", file=sys.stderr)
        pool.shutdown(wait=False, cancel_futures=True)
        _stop_live()
    pool.shutdown()
    signal.signal(signal.SIGTERM, previous)
    wall = time.perf_counter() - started
    (args.logs / "summary.json").write_text(
        json.dumps({"seeds": seeds, "wall_s": wall, "runs": [asdict(r) for r in done]}, indent=1)
    )
    print(table(done, seeds, backends))
    cut = "" if len(done) == len(runs) else f" (cut off: {len(done)} of {len(runs)} runs done)"
    print(f"\nwall {wall:.0f}s, devices {args.devices}, logs in {args.logs}{cut}")
    return 1 if cut or any(r.failures for r in done) else 0


if __name__ == "__main__":
    sys.exit(main())
