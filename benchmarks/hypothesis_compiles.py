"""How many compiles a 100-example Hypothesis test costs through the plugin, and how long it takes.

    python benchmarks/hypothesis_compiles.py                       # aot_eager
    python benchmarks/hypothesis_compiles.py --backend inductor

One property test, float32 tensors of rank 2 and any shape (`tcst.shapes(min_dims=2,
max_dims=2)`, which draws sides of 0 and 1 and sizes around vector widths), checked with
`compile_parity` twice in one pytest run with the same Hypothesis seed: as the plugin runs it
(all examples share one compile cache, so automatic dynamic shapes turn the second shape into a
dynamic graph), and with `torch._dynamo.reset()` at the start of every example (every example
compiles from scratch, as a test that compiles per example does). Each test records the shapes
it drew, so the script checks that both saw the same examples. Compiles are the graphs handed to
the backend, read from the plugin's JSON report; times are pytest's call durations.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

SUITE = """
import json
import pytest
import torch
from hypothesis import given, settings, strategies as st
from pytest_torchcompile import strategies as tcst

INPUTS = {{
    "any": tcst.tensors(dtypes=torch.float32, shapes=tcst.shapes(min_dims=2, max_dims=2)),
    "plain": tcst.tensors(
        dtypes=torch.float32,
        shapes=tcst.shapes(min_dims=2, max_dims=2, min_side=2),
        layouts="contiguous",
    ),
}}
EXAMPLES = settings(max_examples={examples}, database=None, deadline=None)


def fn(t):
    return torch.softmax(t * 2.0, dim=-1).sum(dim=0)


def record(name, x):
    with open(name + ".shapes", "a") as f:
        f.write(json.dumps([list(x.shape), list(x.stride()), x.storage_offset()]) + "\\n")


@pytest.mark.parametrize("cache", ["shared", "reset"])
@pytest.mark.parametrize("inputs", INPUTS)
@pytest.mark.compile_parity
@EXAMPLES
@given(data=st.data())
def test_property(compile_parity, inputs, cache, data):
    x = data.draw(INPUTS[inputs])
    record(inputs + "-" + cache, x)
    if cache == "reset":
        torch._dynamo.reset()
    compile_parity(fn, x)
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--backend", default="aot_eager")
    parser.add_argument("--examples", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--keep", help="save the plugin's JSON report here")
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        Path(tmp, "test_property.py").write_text(SUITE.format(examples=options.examples))
        report = Path(tmp, "report.json")
        command = [
            *(sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--durations=0"),
            f"--compile-backend={options.backend}",
            f"--hypothesis-seed={options.seed}",
            f"--compile-report={report}",
        ]
        env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
        done = subprocess.run(command, cwd=tmp, env=env, capture_output=True, text=True)
        if done.returncode != 0:
            raise SystemExit(f"pytest failed:\n{done.stdout}{done.stderr}")
        durations = {
            m["test"]: float(m["seconds"])
            for m in re.finditer(r"(?P<seconds>[\d.]+)s call\s+\S+::(?P<test>\S+)", done.stdout)
        }
        tests = json.loads(report.read_text())["tests"]
        if options.keep:
            Path(options.keep).write_text(report.read_text())
        records = {node.split("::")[-1]: entry for node, entry in tests.items()}
        drawn = {p.stem: p.read_text().splitlines() for p in Path(tmp).glob("*.shapes")}
    print(
        f"{options.examples} examples (Hypothesis seed {options.seed}), backend {options.backend}"
    )
    print("| inputs | cache | distinct shapes | compiles (graphs) | recompiles | test time |")
    print("| --- | --- | --- | --- | --- | --- |")
    for inputs, what in (("any", INPUTS_ANY), ("plain", INPUTS_PLAIN)):
        shared, reset = f"test_property[{inputs}-shared]", f"test_property[{inputs}-reset]"
        if drawn[f"{inputs}-shared"] != drawn[f"{inputs}-reset"]:
            raise SystemExit(f"{inputs}: the two tests drew different examples")
        shapes = len({json.dumps(json.loads(line)[0]) for line in drawn[f"{inputs}-shared"]})
        for test, cache in ((shared, "one per test (the plugin)"), (reset, "reset per example")):
            counts = records[test]["counts"]
            print(
                f"| {what} | {cache} | {shapes} | {counts['graphs']} | {counts['recompiles']} | "
                f"{durations[test]:.2f} s |"
            )
        print(f"speed-up, {inputs}: {durations[reset] / durations[shared]:.1f}x")


INPUTS_ANY = "rank 2, any sides and layout"
INPUTS_PLAIN = "rank 2, sides >= 2, contiguous"


if __name__ == "__main__":
    main()
