"""Before and after: `overhead.py` against two revisions of the plugin, run after run, alternating.

    python benchmarks/ab.py HEAD~1                      # HEAD~1 against the working tree
    python benchmarks/ab.py main HEAD --rounds 3 -- --backend inductor --only MLP
    python benchmarks/ab.py /tmp/before --rounds 1 --show -- --device cuda --backend inductor --profile

Each round runs this checkout's `benchmarks/overhead.py` once per revision, with PYTHONPATH on
that revision's `pytest_torchcompile` (exported with `git archive`; the working tree as it is for
"."); arguments after `--` go to overhead.py. Alternating runs meet the same load on a shared
machine, and each run's ratio is already taken against the hand-written check of the same
process, so the medians over rounds compare the revisions fairly.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tarfile
import tempfile
from io import BytesIO
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_ROW = re.compile(r"^\| (?P<model>[^|]+) \| (?P<hand>[\d.]+) ms \| (?P<plugin>[\d.]+) ms \|")


def _tree(revision: str, into: Path) -> Path:
    """A directory holding `revision`'s pytest_torchcompile package (`revision` may be such a
    directory itself, where there is no git history, e.g. on a machine given a copy)."""
    if revision == ".":
        return ROOT
    if (Path(revision) / "pytest_torchcompile").is_dir():
        return Path(revision)
    archive = subprocess.run(
        ["git", "archive", revision, "pytest_torchcompile"], cwd=ROOT, capture_output=True
    )
    if archive.returncode != 0:
        raise SystemExit(f"git archive {revision}: {archive.stderr.decode()}")
    target = into / revision.replace("/", "_")
    with tarfile.open(fileobj=BytesIO(archive.stdout)) as tar:
        tar.extractall(target, filter="data")
    return target


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("before")
    parser.add_argument("after", nargs="?", default=".")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--show", action="store_true", help="print each run's whole output (tables, profiles)"
    )
    parser.epilog = "Arguments after -- go to overhead.py."
    # Split at "--" here: argparse gives positionals after it to `after` or refuses them.
    argv = sys.argv[1:]
    split = argv.index("--") if "--" in argv else len(argv)
    options = parser.parse_args(argv[:split])
    options.overhead_args = argv[split + 1 :]
    revisions = [options.before, options.after]
    # (revision, model) -> [(hand ms, plugin ms)] over rounds
    rows: dict[tuple[str, str], list[tuple[float, float]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        trees = {revision: _tree(revision, Path(tmp)) for revision in revisions}
        for _ in range(options.rounds):
            for revision in revisions:
                env = dict(os.environ, PYTHONPATH=str(trees[revision]))
                command = [sys.executable, str(ROOT / "benchmarks" / "overhead.py")]
                done = subprocess.run(
                    [*command, *options.overhead_args], env=env, capture_output=True, text=True
                )
                if done.returncode != 0:
                    raise SystemExit(f"overhead.py on {revision} failed:\n{done.stderr}")
                if options.show:
                    print(f"\n## overhead.py on {revision}\n{done.stdout}", flush=True)
                for line in done.stdout.splitlines():
                    if match := _ROW.match(line):
                        key = (revision, match["model"])
                        rows.setdefault(key, []).append(
                            (float(match["hand"]), float(match["plugin"]))
                        )
    print(
        f"medians over {options.rounds} alternating rounds of overhead.py {options.overhead_args}"
    )
    print("| model | revision | hand-written | plugin | ratio | fixed cost |")
    print("| --- | --- | --- | --- | --- | --- |")
    models = dict.fromkeys(model for _, model in rows)
    for model in models:
        for revision in revisions:
            runs = rows[(revision, model)]
            hand = statistics.median(h for h, _ in runs)
            plugin = statistics.median(p for _, p in runs)
            ratio = statistics.median(p / h for h, p in runs)
            fixed = statistics.median(p - h for h, p in runs)
            print(
                f"| {model} | {revision} | {hand:.2f} ms | {plugin:.2f} ms | {ratio:.2f}x | "
                f"{fixed:+.2f} ms |"
            )


if __name__ == "__main__":
    main()
