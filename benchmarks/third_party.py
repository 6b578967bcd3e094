"""Zero-change adoption: an installed third-party test suite with and without --compile-parity=all.

Runs the suite once plainly, then once per backend under `--compile-parity=all`, and prints the
tests and their verdicts (which must match the plain run's, test by test), the intercepted module
calls checked, diverged and skipped (by reason) and the wall-time overhead. A planted backend run
(`--planted corrupt_output`) lists the tests that failed and the module classes and leaves named.

Set-up used for BENCHMARKS.md (a virtual environment that reuses the installed torch, so pip
cannot resolve another one):

    python3 -m venv --system-site-packages /tmp/tpvenv
    /tmp/tpvenv/bin/pip install torch==2.13.0 einops==0.8.2
    PYTHONPATH=$PWD python3 benchmarks/third_party.py --python /tmp/tpvenv/bin/python \\
        --package einops --tests-under tests --env EINOPS_TEST_BACKENDS=torch \\
        --backend aot_eager --backend inductor --planted corrupt_output
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_SUMMARY = re.compile(r"intercepted module calls in (\d+) test\(s\): (\d+) checked, (\d+) diverged")


def _tests_dir(python: str, package: str, under: str) -> str:
    code = f"import os, {package} as p; print(os.path.join(os.path.dirname(p.__file__), {under!r}))"
    return subprocess.run(
        [python, "-c", code], check=True, capture_output=True, text=True
    ).stdout.strip()


def _run(
    python: str, tests: str, env: dict[str, str], extra: list[str]
) -> tuple[dict[str, str], str, float]:
    """(verdict per test, output, wall seconds) of one pytest run."""
    with tempfile.TemporaryDirectory() as scratch:
        junit = os.path.join(scratch, "junit.xml")
        command = [
            python,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            tests,
            f"--junitxml={junit}",
            *extra,
        ]
        started = time.perf_counter()
        done = subprocess.run(command, env=env, capture_output=True, text=True, cwd=scratch)
        wall = time.perf_counter() - started
        verdicts: dict[str, str] = {}
        for case in ET.parse(junit).getroot().iter("testcase"):
            outcome = "passed"
            for child in case:
                if child.tag in ("failure", "error", "skipped"):
                    outcome = child.tag
            verdicts[f"{case.get('classname')}::{case.get('name')}"] = outcome
    return verdicts, done.stdout + done.stderr, wall


def _summary(output: str) -> list[str]:
    """The plugin's terminal summary section."""
    lines = output.splitlines()
    start = next((i for i, line in enumerate(lines) if "intercepted module calls in" in line), None)
    if start is None:
        return ["(no intercepted module calls)"]
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("=")), len(lines))
    return lines[start:end]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--python", default=sys.executable, help="interpreter with the library installed"
    )
    parser.add_argument("--package", required=True, help="the installed package whose tests run")
    parser.add_argument("--tests-under", default="tests", help="tests folder inside the package")
    parser.add_argument("--tests", help="a tests folder or file instead (e.g. from an sdist)")
    parser.add_argument("--env", action="append", default=[], help="KEY=VALUE for the suite")
    parser.add_argument("--backend", action="append", default=[], help="backends to run under")
    parser.add_argument(
        "--planted", action="append", default=[], help="planted backends (tests/planted.py)"
    )
    parser.add_argument("pytest_args", nargs="*", help="more pytest arguments (after --)")
    args = parser.parse_args()

    tests = args.tests or _tests_dir(args.python, args.package, args.tests_under)
    env = dict(os.environ, **dict(item.split("=", 1) for item in args.env))
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(ROOT / "tests"), env.get("PYTHONPATH", "")])
    plain, _, plain_wall = _run(
        args.python, tests, env, ["-p", "no:torchcompile", *args.pytest_args]
    )
    counts = {o: sum(1 for v in plain.values() if v == o) for o in sorted(set(plain.values()))}
    print(f"{args.package} ({tests}): {len(plain)} tests {counts}, plain run {plain_wall:.1f}s")
    status = 0
    for backend in args.backend:
        extra = ["--compile-parity=all", f"--compile-backend={backend}", *args.pytest_args]
        verdicts, output, wall = _run(args.python, tests, env, extra)
        changed = sorted(n for n in plain if verdicts.get(n) != plain[n])
        overhead = wall / plain_wall if plain_wall else float("nan")
        print(f"\n--compile-backend={backend}: {wall:.1f}s ({overhead:.2f}x the plain run)")
        print(
            f"  verdicts changed: {len(changed)}"
            + "".join(f"\n    {n}: {plain[n]} -> {verdicts.get(n)}" for n in changed)
        )
        print("\n".join(f"  {line}" for line in _summary(output)))
        status |= bool(changed)
    for planted in args.planted:
        extra = ["--compile-parity=all", f"--compile-backend=planted:{planted}", *args.pytest_args]
        verdicts, output, wall = _run(args.python, tests, env, extra)
        newly = sorted(n for n in plain if plain[n] == "passed" and verdicts.get(n) == "failure")
        print(f"\nplanted:{planted}: {len(newly)} passing tests now fail ({wall:.1f}s)")
        named = sorted(
            set(re.findall(r"module call \d+ \(([^)]+)\), differing at ([^:\n]+)", output))
        )
        print(
            "\n".join(f"  {module}: {leaf}" for module, leaf in named) or "  (no divergence named)"
        )
        print("\n".join(f"  {line}" for line in _summary(output)))
    return status


if __name__ == "__main__":
    raise SystemExit(main())
