"""Zero-change adoption: a third-party test suite with and without --compile-parity=all.

Runs the suite once plainly, then once per backend under `--compile-parity=all`, and prints the
tests and their verdicts (which must match the plain run's, test by test; each changed test with
the first line of its failure), the plugin's summary and coverage table as printed, and the wall
and CPU time of each run against the plain one. A planted backend run (`--planted
corrupt_output`) lists the tests that failed and the module classes and leaves named.

The tests are those shipped inside an installed package (`--package`, `--tests-under`) or any
paths and node ids (`--tests`, e.g. a suite unpacked from an sdist or a repository snapshot),
run from `--cwd` where the suite imports itself as a package (`from tests.utils import ...`).
Where the plugin is not an installed entry point of `--python` (a separate virtual environment
for the library), it is loaded with `-p pytest_torchcompile.plugin` from this checkout. Each run
gets its own fresh `TORCHINDUCTOR_CACHE_DIR` (a cold compile cache, as on CI) and a time limit;
`--out DIR` keeps every run's output, JUnit XML and a Markdown table for the notes. Any
backend name goes to `--backend` (`none`, the checker with no compiler, where the plugin has it).
The project's own examples use the fixture, so their plain run is `--plain=--compile-parity=off`.
`--parity-args` go to the parity runs only (`--compile-parity-functions=mylib`); each parity run
writes a JSON report, from which the table counts the tests that reached a check and takes
the compile time (the compile part of its costs: the user's compiles and the checker's own).

`--peer BACKEND` runs the suite once more per backend the way PyTorch CI runs its own suites
under compile (benchmarks/peer.py: each test wrapped in `torch._dynamo.optimize(backend,
nopython=False)`, Dynamo reset around it, the test's own assertions the only oracle), the
alternative zero-change mode is judged against; `--peer-planted NAME` does so under a planted
backend, and `--peer-args` go to the peer runs only (`--peer-no-compiled-autograd`). The table
says for each run its compile time (the peer's: Dynamo's own sum over its tests), how many
changed verdicts are compile failures of the whole test body (a Dynamo or backend exception,
not the test's own assertion), and how many tests that pass plainly now fail (under a planted
backend: the bugs each way catches).

Set-up (a virtual environment that reuses the installed torch, so pip cannot resolve another
one), e.g. for torch-optimizer, whose tests ship in its sdist:

    python3 -m venv --system-site-packages /work/tpvenv
    /work/tpvenv/bin/pip install -c constraints.txt torch-optimizer pytest-xdist  # torch==2.13.0
    pip download --no-deps --no-binary :all: torch-optimizer==0.3.0 -d /work/tp/sdist
    tar xzf /work/tp/sdist/torch-optimizer-0.3.0.tar.gz -C /work/tp  # its tests/
    python3 benchmarks/third_party.py --python /work/tpvenv/bin/python \\
        --package torch_optimizer --cwd /work/tp/torch-optimizer-0.3.0 --tests tests \\
        --backend aot_eager --backend inductor --out /tmp/tp-torch-optimizer -- -p no:xdist
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import resource
import signal
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
_KINDS = r"(?:module|function|module and function)"
_COUNTS = re.compile(rf"intercepted {_KINDS} calls in \d+ test\(s\): (\d+) checked, (\d+) diverged")
_SKIPPED = re.compile(r"checked partly, (\d+) skipped")
# pytest's closing line ("3 passed, 1 warning in 2.0s", with or without the = rule around it).
NO_RESULT = "no result: killed before it wrote its JUnit report (timed out)"
_CLOSING = re.compile(r"^=*\s*(\d+ \w+(, \d+ \w+)*)? ?(no tests ran )?in [\d.]+s")


@dataclass
class Run:
    """One pytest run: its verdicts, output and cost."""

    name: str
    verdicts: dict[str, str] = field(default_factory=dict)
    messages: dict[str, str] = field(default_factory=dict)
    output: str = ""
    wall: float = 0.0
    cpu: float = 0.0
    timed_out: bool = False
    # pytest wrote its JUnit XML: a run killed before it did (SIGINT not taken within a minute)
    # has no verdicts, and counts nothing as changed or failing
    reported: bool = True
    report: dict[str, Any] | None = None  # a parity run's --compile-report, a peer's --peer-report
    properties: dict[str, dict[str, str]] = field(default_factory=dict)  # JUnit, per test

    def counts(self) -> str:
        if not self.reported:
            return NO_RESULT
        tally: dict[str, int] = {}
        for outcome in self.verdicts.values():
            tally[outcome] = tally.get(outcome, 0) + 1
        text = ", ".join(f"{n} {o}" for o, n in sorted(tally.items()))
        return text + (" (timed out: partial)" if self.timed_out else "")

    def calls(self) -> str:
        """'checked / diverged / skipped' intercepted module calls, as the summary counts them."""
        found, skipped = _COUNTS.search(self.output), _SKIPPED.search(self.output)
        if found is None or skipped is None:
            return "-"
        return f"{found.group(1)} / {found.group(2)} / {skipped.group(1)}"

    def reached(self) -> str:
        """'tests with a call checked + tests whose calls were all checked earlier in the session
        / tests intercepted', from the run's JSON report."""
        coverage = (self.report or {}).get("coverage", {})
        reached = coverage.get("tests_reached")
        if reached is None:
            return "-"
        tests = len(coverage.get("tests", []))
        return f"{reached['checked']} + {reached['checked earlier']} / {tests}"

    def compile_time(self) -> str:
        """Seconds compiling: a parity run's compile cost (the user's compiles and those the
        checker adds), a peer run's sum of Dynamo's compile time over its tests."""
        totals = (self.report or {}).get("totals")
        if totals is None:
            return "-"
        seconds = totals.get("costs", {}).get("seconds", {}).get("compile")
        return f"{totals['compile_time_s'] if seconds is None else seconds:.1f} s"

    def compile_failure(self, name: str) -> str:
        """The exception type where compiling a peer run's whole test body failed the test."""
        return self.properties.get(name, {}).get("peer.compile_failure", "")


def _tests_dir(python: str, package: str, under: str) -> str:
    code = f"import os, {package} as p; print(os.path.join(os.path.dirname(p.__file__), {under!r}))"
    return subprocess.run(
        [python, "-c", code], check=True, capture_output=True, text=True
    ).stdout.strip()


def _plugin_installed(python: str) -> bool:
    """Whether `python` loads the plugin by its entry point (else it needs `-p`)."""
    code = (
        "from importlib.metadata import entry_points;"
        "print(any(e.name == 'torchcompile' for e in entry_points(group='pytest11')))"
    )
    done = subprocess.run([python, "-c", code], capture_output=True, text=True)
    return done.stdout.strip() == "True"


def _junit(path: str, run: Run) -> None:
    """The verdict, first line of the failure or error message and properties of each test of
    a JUnit XML file, into `run`."""
    if not os.path.exists(path):
        return
    for case in ET.parse(path).getroot().iter("testcase"):
        if case.get("name") is None:  # the test a timeout interrupted: no verdict, not a pass
            continue
        name = f"{case.get('classname')}::{case.get('name')}"
        run.verdicts[name] = "passed"
        for child in case:
            if child.tag in ("failure", "error", "skipped"):
                run.verdicts[name] = child.tag
                text = child.get("message") or child.text or ""
                run.messages[name] = text.strip().splitlines()[0][:200] if text.strip() else ""
        properties = {p.get("name", ""): p.get("value", "") for p in case.iter("property")}
        if properties:
            run.properties[name] = properties


def _run(
    name: str,
    args: argparse.Namespace,
    tests: list[str],
    extra: list[str],
    report_option: str | None = None,
) -> Run:
    """Run pytest once on the suite in a scratch directory, with a fresh Inductor cache;
    `report_option` names the option that writes the run's JSON report."""
    run = Run(name)
    with tempfile.TemporaryDirectory(prefix="tp-") as scratch:
        junit = os.path.join(scratch, "junit.xml")
        env = dict(os.environ, **dict(item.split("=", 1) for item in args.env))
        inherited = env.get("PYTHONPATH", "").split(os.pathsep)
        paths = [_import_path(scratch), *(p for p in inherited if p and Path(p) != ROOT)]
        env["PYTHONPATH"] = os.pathsep.join(paths)
        env["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(scratch, "inductor-cache")
        command = [args.python, "-m", "pytest", "-q", "-p", "no:cacheprovider", *tests]
        command += [f"--junitxml={junit}", *extra, *args.pytest_args]
        slug = re.sub(r"[^\w.-]+", "_", name)
        report = Path(args.out or scratch, f"{slug}.json")
        if report_option:
            command.append(f"{report_option}={report}")
        log = Path(args.out or scratch, f"{slug}.txt")
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.perf_counter()
        with log.open("w") as sink:  # written as it runs, to follow a long run
            sink.write(" ".join(command) + "\n\n")
            sink.flush()
            child = subprocess.Popen(
                command,
                env=env,
                stdout=sink,
                stderr=subprocess.STDOUT,
                cwd=args.cwd or scratch,
                start_new_session=True,  # a time-out ends Inductor's compile workers too
                preexec_fn=_interruptible,
            )
            try:
                child.wait(timeout=args.timeout)
            except subprocess.TimeoutExpired:
                run.timed_out = True
                _stop(child)
        run.wall = time.perf_counter() - started
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        run.cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        run.output = log.read_text(errors="replace")
        _junit(junit, run)
        run.reported = os.path.exists(junit)
        if report.exists():
            run.report = json.loads(report.read_text())
        if args.out and os.path.exists(junit):
            Path(args.out, f"{slug}.xml").write_bytes(Path(junit).read_bytes())
    return run


def _interruptible() -> None:
    """Let pytest take SIGINT as KeyboardInterrupt: a background job started by a shell ignores
    SIGINT, and Python keeps an ignored SIGINT ignored."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _stop(child: subprocess.Popen[bytes]) -> None:
    """Interrupt pytest as Ctrl-C would, so that it still writes the JUnit XML and the plugin's
    summary of the tests it ran; kill the whole group if that takes over a minute."""
    child.send_signal(signal.SIGINT)
    with contextlib.suppress(subprocess.TimeoutExpired):
        child.wait(timeout=60)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(child.pid, signal.SIGKILL)  # Inductor's compile workers too
    child.wait()


def _import_path(scratch: str) -> str:
    """A folder holding only the plugin, the planted backends (as `planted`) and the peer.

    Not this checkout's root: its `tests` package would shadow a suite's own `tests` namespace
    package (torch-optimizer's `from tests.utils import ...`).
    """
    folder = Path(scratch, "path")
    folder.mkdir()
    (folder / "pytest_torchcompile").symlink_to(ROOT / "pytest_torchcompile")
    (folder / "planted.py").symlink_to(ROOT / "tests" / "planted.py")
    (folder / "peer.py").symlink_to(ROOT / "benchmarks" / "peer.py")
    return str(folder)


def _summary(output: str) -> list[str]:
    """The plugin's terminal summary section: the calls, then the coverage table."""
    lines = output.splitlines()
    start = next((i for i, line in enumerate(lines) if _COUNTS.search(line)), None)
    if start is None:
        return ["(no intercepted calls)"]
    end = next(
        (
            i
            for i in range(start + 1, len(lines))
            if _CLOSING.match(lines[i]) or lines[i][:1] in ("=", "!")
        ),
        len(lines),
    )
    return lines[start:end]


def _changed_names(plain: Run, run: Run) -> list[str]:
    """The tests whose verdict differs from the plain run's."""
    ran = run.verdicts if run.timed_out else plain.verdicts  # a timed-out run: the tests it ran
    return sorted(
        n for n in ran if n in plain.verdicts and run.verdicts.get(n) != plain.verdicts[n]
    )


def _changed(plain: Run, run: Run) -> list[str]:
    """Each test whose verdict differs from the plain run's, with its failure's first line (and
    for a peer run, the compile error where compiling the test body failed it)."""
    return [
        f"{n}: {plain.verdicts[n]} -> {run.verdicts.get(n, 'not run')}"
        + (f" (compile failure: {run.compile_failure(n)})" if run.compile_failure(n) else "")
        + (f"\n      {run.messages[n]}" if run.messages.get(n) else "")
        for n in _changed_names(plain, run)
    ]


def _compile_failures(plain: Run, run: Run) -> list[str]:
    """The changed tests a peer run failed because compiling the whole test body raised."""
    return [n for n in _changed_names(plain, run) if run.compile_failure(n)]


def _newly_failing(plain: Run, run: Run) -> list[str]:
    """The tests that pass plainly and fail in `run`."""
    return sorted(
        n
        for n in plain.verdicts
        if plain.verdicts[n] == "passed" and run.verdicts.get(n) == "failure"
    )


def _row(run: Run, plain: Run, peer: bool = False) -> str:
    if run is plain:
        changed = failures = newly = "-"
        ratio = "-"
    else:
        changed = str(len(_changed_names(plain, run)))
        failures = str(len(_compile_failures(plain, run))) if peer else "-"
        newly = str(len(_newly_failing(plain, run)))
        if not run.reported:
            changed = failures = newly = "no result"
        ratio = f"{run.wall / plain.wall:.2f}x" if plain.wall else "-"
    return (
        f"| {run.name} | {len(run.verdicts)} | {run.counts()} | {changed} | {failures} | {newly} "
        f"| {run.calls()} | {run.reached()} | {run.compile_time()} | {run.wall:.0f} s "
        f"| {run.cpu:.0f} s | {ratio} |"
    )


def _peer(name: str, args: argparse.Namespace, tests: list[str], plain_args: list[str]) -> Run:
    """One peer run (benchmarks/peer.py): the plain run with each test compiled as PyTorch CI
    compiles its own, under backend `name`; prints what changed against the plain run."""
    extra = [*plain_args, "-p", "peer", f"--peer-backend={name}", *args.peer_args.split()]
    return _run(f"peer:{name}", args, tests, extra, "--peer-report")


def _print_peer(run: Run, plain: Run) -> None:
    changed, failures = _changed(plain, run), _compile_failures(plain, run)
    print(f"\n{run.name}: {run.wall:.1f}s wall, {run.cpu:.1f}s CPU", end="")
    print(f" ({run.wall / plain.wall:.2f}x the plain run's wall){' TIMED OUT' * run.timed_out}")
    if not run.reported:
        print(f"  {NO_RESULT}")
        return
    newly = len(_newly_failing(plain, run))
    print(f"  compile time: {run.compile_time()}; passing tests now failing: {newly}")
    print(f"  verdicts changed: {len(changed)} ({len(failures)} compile failures of the test body)")
    print("".join(f"    {c}\n" for c in changed), end="")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--python", default=sys.executable, help="interpreter with the library installed"
    )
    parser.add_argument("--package", required=True, help="the library (its name in the report)")
    parser.add_argument("--tests-under", default="tests", help="tests folder inside the package")
    parser.add_argument("--tests", nargs="+", help="test paths or node ids instead (from --cwd)")
    parser.add_argument("--cwd", help="directory to run pytest from (default: a scratch dir)")
    parser.add_argument("--env", action="append", default=[], help="KEY=VALUE for the suite")
    parser.add_argument(
        "--backend",
        action="append",
        default=[],
        help="a backend to run under, with more parity arguments after it if any "
        "('aot_eager --compile-parity-shared')",
    )
    parser.add_argument(
        "--planted",
        action="append",
        default=[],
        help="a planted backend (tests/planted.py), with more parity arguments after it if any",
    )
    parser.add_argument(
        "--plain",
        default="-p no:torchcompile",
        help="pytest arguments of the plain run (--plain=--compile-parity=off for a suite that"
        " uses the fixture, such as the examples)",
    )
    parser.add_argument(
        "--parity-args",
        default="",
        help="pytest arguments of the parity runs only, e.g. --compile-parity-functions=mylib",
    )
    parser.add_argument(
        "--peer",
        action="append",
        default=[],
        help="backends to run the peer under (benchmarks/peer.py: PyTorch CI's way)",
    )
    parser.add_argument(
        "--peer-planted",
        action="append",
        default=[],
        help="planted backends (tests/planted.py) to run the peer under",
    )
    parser.add_argument(
        "--peer-args",
        default="",
        help="pytest arguments of the peer runs only, e.g. --peer-no-compiled-autograd",
    )
    parser.add_argument("--timeout", type=float, default=3600, help="seconds per pytest run")
    parser.add_argument("--out", help="folder for each run's output, JUnit XML and table")
    parser.add_argument("pytest_args", nargs="*", help="more pytest arguments (after --)")
    args = parser.parse_args()
    if args.out:
        os.makedirs(args.out, exist_ok=True)

    tests = args.tests or [_tests_dir(args.python, args.package, args.tests_under)]
    load = [] if _plugin_installed(args.python) else ["-p", "pytest_torchcompile.plugin"]
    plain_args = args.plain.split()
    if "no:torchcompile" not in plain_args:  # a plain run with the plugin loaded (parity off)
        plain_args = [*load, *plain_args]
    parity = args.parity_args.split()
    plain = _run("plain", args, tests, plain_args)
    print(f"{args.package} ({' '.join(tests)}): {len(plain.verdicts)} tests, {plain.counts()}")
    print(f"plain run: {plain.wall:.1f}s wall, {plain.cpu:.1f}s CPU")
    rows = [_row(plain, plain)]
    status = 0
    for spec in args.backend:
        backend, *more = spec.split()
        extra = [*load, "--compile-parity=all", f"--compile-backend={backend}", *parity, *more]
        run = _run(spec, args, tests, extra, "--compile-report")
        changed = _changed(plain, run)
        print(f"\n--compile-backend={spec}: {run.wall:.1f}s wall, {run.cpu:.1f}s CPU", end="")
        print(f" ({run.wall / plain.wall:.2f}x the plain run's wall){' TIMED OUT' * run.timed_out}")
        print(
            f"  verdicts changed: {len(changed)}" + "".join(f"\n    {c}" for c in changed)
            if run.reported
            else f"  {NO_RESULT}"
        )
        print("\n".join(f"  {line}" for line in _summary(run.output)))
        rows.append(_row(run, plain))
        status |= bool(changed) or run.timed_out
    for spec in args.planted:
        planted, *more = spec.split()
        run = _run(
            f"planted:{spec}",
            args,
            tests,
            [*load, "--compile-parity=all", f"--compile-backend=planted:{planted}", *parity, *more],
            "--compile-report",
        )
        newly = _newly_failing(plain, run)
        failing = f"{len(newly)} passing tests now fail" if run.reported else NO_RESULT
        print(f"\nplanted:{planted}: {failing} ({run.wall:.1f}s)")
        named = sorted(
            set(
                re.findall(
                    r"(?:module|function) call \d+ \(([^)]+)\), differing at ([^:\n]+)", run.output
                )
            )
        )
        print(
            "\n".join(f"  {module}: {leaf}" for module, leaf in named) or "  (no divergence named)"
        )
        print("\n".join(f"  {line}" for line in _summary(run.output)))
        rows.append(_row(run, plain))
    for backend in [*args.peer, *(f"planted:{name}" for name in args.peer_planted)]:
        run = _peer(backend, args, tests, plain_args)
        _print_peer(run, plain)
        rows.append(_row(run, plain, peer=True))
    table = [
        "| run | tests | verdicts | changed | of them compile failures of the test body "
        "| passing now failing | calls checked / diverged / skipped "
        "| tests with a call checked + checked earlier / intercepted | compile | wall | CPU "
        "| wall vs plain |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
        *rows,
    ]
    print("\n" + "\n".join(table))
    if args.out:
        Path(args.out, "table.md").write_text("\n".join(table) + "\n")
    return status


if __name__ == "__main__":
    raise SystemExit(main())
