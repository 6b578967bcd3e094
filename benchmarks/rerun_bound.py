"""What the re-runs of one ill-conditioned call cost, bounded and unbounded (issue 42, decision 4).

    python benchmarks/rerun_bound.py                        # CPU, the correct planted backend
    python benchmarks/rerun_bound.py --device cuda --backend inductor

The call is tests/plugin/test_rerun_bound.py's: 24 element-wise steps, then each of 10000 rows of
1000 normalised by a standard deviation 1e-4 of its mean, so that summing in another order moves
the 10M-element output by 2% of its values (`planted:sums_in_one_lane`, a correct backend that
sums in one lane, is farther from float64 than eager at 6% of the elements). It is checked once
as shipped (re-runs bounded: the leaf judged on a sample of its rows) and once with the bound
lifted (`samples.RERUN_FLOOR_S` patched to infinity: every re-run on the whole call), each in
its own pytest process; printed: the breakdown of each, re-runs / eager side, the verdict and
the leaf's note. Results: BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

TEST = """
import pytest, torch

def settle_and_normalise(x):
    for _ in range(24):
        x = x + 0.01 * torch.tanh(x)
    centred = x - x.mean(dim=1, keepdim=True)
    return centred / centred.pow(2).mean(dim=1, keepdim=True).sqrt()

@pytest.mark.compile_parity
def test_ill_conditioned(compile_parity):
    torch.manual_seed(0)
    x = (100 * torch.rand(10000, 1) + 50) + 1e-2 * torch.randn(10000, 1000)
    compile_parity(settle_and_normalise, x.to("{device}"))
"""

UNBOUNDED = """
import sys, pytest
from pytest_torchcompile.judging import samples
samples.RERUN_FLOOR_S = float("inf")
sys.exit(pytest.main(sys.argv[1:]))
"""


def _run(folder: Path, backend: str, bounded: bool) -> dict[str, object]:
    report = folder / f"report-{'bounded' if bounded else 'unbounded'}.json"
    args = [str(folder / "test_ill.py"), f"--compile-backend={backend}", "-rA", "-q"]
    args += ["-p", "no:cacheprovider", f"--compile-report={report}"]
    command = [sys.executable, "-m", "pytest", *args] if bounded else [sys.executable, "-c"]
    if not bounded:
        command += [UNBOUNDED, *args]
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT / "tests"), os.environ.get("PYTHONPATH", "")]),
        "TORCHINDUCTOR_CACHE_DIR": str(folder / "inductor-cache"),
    }
    done = subprocess.run(command, capture_output=True, text=True, env=env, cwd=folder)
    test = next(iter(json.loads(report.read_text())["tests"].values()))
    note = next((line.strip() for line in done.stdout.splitlines() if "excused by" in line), "")
    return {"test": test, "note": note, "tail": done.stdout.splitlines()[-1]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--backend", default="planted:sums_in_one_lane")
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        (folder / "test_ill.py").write_text(TEST.format(device=options.device))
        for bounded in (True, False):
            found = _run(folder, options.backend, bounded)
            seconds = found["test"]["costs"]["seconds"]  # type: ignore[index]
            eager, reruns = seconds["eager side"], seconds["re-runs"]
            print(f"{'bounded' if bounded else 'unbounded'} ({options.backend}, {options.device}):")
            parts = ", ".join(f"{part} {value:.2f}s" for part, value in seconds.items())
            print(f"  {parts}; re-runs / eager side {reruns / eager:.1f}x; {found['tail']}")
            print(f"  {found['note'][:700]}")


if __name__ == "__main__":
    main()
