"""Run the GPU part of the tests and the examples on a CUDA machine, and print a summary.

    python scripts/gpu_suite.py                 # everything below, on every visible GPU
    python scripts/gpu_suite.py --only tests    # one step (tests, examples, xdist)
    python scripts/gpu_suite.py --only examples --runs inductor/reduce-overhead

CI has no GPU, so this is how the CUDA paths are exercised: the test suite (its CUDA tests run
here instead of skipping), the examples on CUDA under every torch.compile mode the plugin
supports, and, on a host with two or more GPUs, the GPU tests spread over the GPUs with -n N.
Logs go to $OUT (or ./gpu-suite-logs); the last lines printed are the summary table.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE_RUNS = [
    ("inductor", "default"),
    ("inductor", "reduce-overhead"),
    ("inductor", "max-autotune"),
    ("inductor", "max-autotune-no-cudagraphs"),
    ("cudagraphs", "default"),
]


def _log_name(name: str) -> str:
    return f"{re.sub(r'[^A-Za-z0-9_.-]', '_', name)}.log"


def run(name: str, args: list[str], logs: Path, timeout: int) -> tuple[str, str, float]:
    """Run pytest with `args`; return (name, pytest's closing line, seconds)."""
    started = time.perf_counter()
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    try:
        done = subprocess.run(
            [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        output, status = done.stdout + done.stderr, done.returncode
    except subprocess.TimeoutExpired as exc:
        partial = exc.stdout or b""  # bytes even with text=True
        text = partial.decode(errors="replace") if isinstance(partial, bytes) else partial
        output, status = f"{text}\nTIMED OUT after {timeout}s", -1
    seconds = time.perf_counter() - started
    (logs / _log_name(name)).write_text(output)
    closing = [
        line.strip("= ")
        for line in output.splitlines()
        if re.search(r"\d+ (passed|failed|error)", line)
    ]
    return name, (closing[-1] if closing else f"exit {status}"), seconds


def _lines(logs: Path, name: str, text: str) -> list[str]:
    """The lines of run `name`'s log that contain `text`."""
    log = logs / _log_name(name)
    return [line for line in log.read_text().splitlines() if text in line] if log.exists() else []


def _verdicts(report: Path) -> set[tuple[str, str]]:
    """(test id with its CUDA index dropped, verdict) pairs of a --compile-report file.

    With -n 0 the device fixture lists cuda:0, cuda:1, ...; under xdist each worker has one GPU
    and the id is plain [cuda]; the verdicts must agree either way."""
    import json

    if not report.exists():
        return set()
    tests = json.loads(report.read_text())["tests"]
    return {
        (re.sub(r"cuda:\d+", "cuda", nodeid), entry["verdict"]) for nodeid, entry in tests.items()
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=["tests", "examples", "xdist"], default=None)
    parser.add_argument("--workers", type=int, default=8, help="xdist workers for the test suite")
    parser.add_argument(
        "--runs",
        nargs="+",
        default=[f"{backend}/{mode}" for backend, mode in EXAMPLE_RUNS],
        metavar="BACKEND/MODE",
        help="the example runs to make (default: all five)",
    )
    parser.add_argument("--timeout", type=int, default=540, help="seconds per pytest run")
    parser.add_argument(
        "--paths",
        nargs="+",
        default=["examples"],
        help="what the examples and xdist steps run (default: examples)",
    )
    options = parser.parse_args()

    import torch

    logs = Path(os.environ.get("OUT", ROOT / "gpu-suite-logs"))
    logs.mkdir(parents=True, exist_ok=True)
    gpus = torch.cuda.device_count()
    rows: list[tuple[str, str, float]] = []
    if options.only in (None, "tests"):
        rows.append(
            run(
                "tests (all, CUDA included)",
                ["tests", "-n", str(options.workers)],
                logs,
                options.timeout,
            )
        )
    if options.only in (None, "examples"):
        for backend, mode in (spec.split("/", 1) for spec in options.runs):
            args = [
                *options.paths,
                f"--compile-backend={backend}",
                f"--compile-mode={mode}",
                "--compile-devices=cuda",
                "-n",
                "4",
            ]
            rows.append(run(f"examples {backend}/{mode}", args, logs, options.timeout))
    if options.only in (None, "xdist") and gpus >= 2:
        verdicts = []
        for workers in ("0", str(gpus)):
            report = logs / f"report-n{workers}.json"
            args = [
                *options.paths,
                "--compile-devices=cuda",
                "-n",
                workers,
                f"--compile-report={report}",
            ]
            name = f"examples on cuda, -n {workers}"
            rows.append(run(name, args, logs, options.timeout))
            verdicts.append(_verdicts(report))
            pinning = _lines(logs, name, "GPUs per worker:")
            if pinning:
                rows.append(("  pinning", pinning[-1].strip(), 0.0))
        same = "same verdicts" if verdicts[0] == verdicts[1] else "VERDICTS DIFFER"
        rows.append((f"-n 0 vs -n {gpus}", f"{same} ({len(verdicts[0])} distinct)", 0.0))

    from importlib import metadata

    try:
        triton = metadata.version("triton")
    except metadata.PackageNotFoundError:
        triton = "none"
    names = sorted({torch.cuda.get_device_name(i) for i in range(gpus)}) or ["no GPU"]
    print(
        f"\nGPU: {gpus} x {', '.join(names)}; torch {torch.__version__}; Triton {triton}; "
        f"Python {sys.version.split()[0]}"
    )
    width = max(len(name) for name, _, _ in rows) if rows else 10
    for name, closing, seconds in rows:
        print(f"{name:<{width}}  {seconds:7.1f}s  {closing}")
    failed = [
        name for name, closing, _ in rows if re.search(r"failed|error|TIMED OUT|exit", closing)
    ]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
