"""The third-party corpus: `third_party.py` over every suite described in a folder, one table.

Each suite is a `suite.json` in a folder of its own under `--corpus` (the suite's tests are not
part of this repository: they come from the library's sdist or repository snapshot):

    {"name": "zuko", "version": "1.6.0", "python": "/venvs/zuko/bin/python",
     "cwd": "/corpus/zuko", "tests": ["tests"], "pytest_args": ["-p", "no:xdist"],
     "env": {}, "parity_functions": "zuko"}

`python` is an interpreter with the library installed (a virtual environment made with
`--system-site-packages`, so it uses the one installed torch), `cwd` the folder pytest runs
from, `tests` and `pytest_args` the slice (deselecting what fails plainly or needs a network).
Every suite runs plainly, then under each `--backend` spec (a backend and, optionally, more
parity arguments: `"aot_eager --compile-parity-shared"`), each `--planted` spec and each peer run
(`--peer`, PyTorch CI's way: peer.py); `{functions}` in a spec stands for
`--compile-parity-functions=<the suite's parity_functions>` and drops the spec where the suite
has none. Each suite's runs, logs and table go to `--out/<name>/`; the corpus table, one row per
suite and run, to `--out/corpus.md`.

    python benchmarks/corpus.py --corpus /work/corpus --out /tmp/corpus \\
        --backend none --backend "none --compile-parity-shared" --backend aot_eager \\
        --backend "aot_eager --compile-parity-shared" --backend "none {functions}" \\
        --planted corrupt_output --peer aot_eager --only zuko kornia
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent


def _specs(specs: list[str], suite: dict[str, Any]) -> list[str]:
    """The specs with `{functions}` filled in for the suite (dropped where it has none)."""
    functions = suite.get("parity_functions")
    filled = []
    for spec in specs:
        if "{functions}" not in spec:
            filled.append(spec)
        elif functions:
            filled.append(spec.replace("{functions}", f"--compile-parity-functions={functions}"))
    return filled


def _command(suite: dict[str, Any], args: argparse.Namespace, out: Path) -> list[str]:
    command = [sys.executable, str(HERE / "third_party.py"), "--python", suite["python"]]
    command += ["--package", suite["name"], "--cwd", suite["cwd"], "--tests", *suite["tests"]]
    command += ["--timeout", str(args.timeout), "--out", str(out)]
    for key, value in suite.get("env", {}).items():
        command += ["--env", f"{key}={value}"]
    for option, specs in (("--backend", args.backend), ("--planted", args.planted)):
        for spec in _specs(specs, suite):
            command += [option, spec]
    for backend in args.peer:
        command += ["--peer", backend]
    for name in args.peer_planted:
        command += ["--peer-planted", name]
    return [*command, "--", *suite.get("pytest_args", [])]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", required=True, help="a folder of suite folders")
    parser.add_argument("--out", required=True, help="where each suite's runs and the table go")
    parser.add_argument("--only", nargs="*", help="these suites (their names) alone")
    parser.add_argument("--backend", action="append", default=[], help="as third_party.py's")
    parser.add_argument("--planted", action="append", default=[], help="as third_party.py's")
    parser.add_argument("--peer", action="append", default=[], help="as third_party.py's")
    parser.add_argument("--peer-planted", action="append", default=[], help="as third_party.py's")
    parser.add_argument("--timeout", type=float, default=1800, help="seconds per pytest run")
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    suites = [
        json.loads(path.read_text()) for path in sorted(Path(args.corpus).glob("*/suite.json"))
    ]
    suites = [suite for suite in suites if not args.only or suite["name"] in args.only]
    table: list[str] = []
    status = 0
    for suite in suites:
        folder = out / suite["name"]
        started = time.perf_counter()
        with (out / f"{suite['name']}.log").open("w") as log:
            done = subprocess.run(_command(suite, args, folder), stdout=log, stderr=log)
        status |= done.returncode
        rows = (
            (folder / "table.md").read_text().splitlines() if (folder / "table.md").exists() else []
        )
        if not table and rows:
            table = ["| suite " + rows[0], "| --- " + rows[1]]
        label = f"{suite['name']} {suite.get('version', '')}".strip()
        table += [f"| {label} {row}" for row in rows[2:]]
        print(f"{label}: {time.perf_counter() - started:.0f} s, rc {done.returncode}", flush=True)
    (out / "corpus.md").write_text("\n".join(table) + "\n")
    print("\n".join(table))
    return status


if __name__ == "__main__":
    raise SystemExit(main())
