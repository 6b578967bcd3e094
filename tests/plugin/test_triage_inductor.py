"""Real TorchInductor bugs of torch 2.13 on the CPU: the stage bisect blames Inductor and the repro,
copied to an empty directory, still fails. Slow (Inductor compiles), so only two."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.plugin.test_triage import ALL_STAGES, run_copied

REAL_BUGS = """
import pytest, torch
import torch.nn.functional as F

def rms_norm(x, s):
    return F.rms_norm(x * s, (4,), eps=s + 1e-3)

@pytest.mark.compile_parity(backend="inductor")
def test_min_of_uint8(compile_parity):
    # Inductor's vectorized min over 16+ uint8 elements returns a wrong value.
    compile_parity(torch.min, torch.arange(20, dtype=torch.uint8).flip(0) + 3)

@pytest.mark.compile_parity(backend="inductor")
def test_stale_float(compile_parity):
    # pytorch/pytorch#197889: a Python float that changes between calls goes stale once
    # Dynamo makes it dynamic; only the sequence of calls shows it.
    x = torch.randn(4, 4)
    for s in (0.5, 1.5, 2.5, 3.5):
        compile_parity(rms_norm, x, s)
"""


@pytest.mark.parametrize(("test", "calls"), [("test_min_of_uint8", 1), ("test_stale_float", 3)])
def test_a_real_inductor_bug_is_blamed_on_inductor_and_its_repro_reproduces(
    pytester, tmp_path, test, calls
):
    pytester.makepyfile(test_real_bugs=REAL_BUGS)
    result = pytester.runpytest(
        f"test_real_bugs.py::{test}", "--compile-artifacts=out", "--compile-report=r.json"
    )
    result.assert_outcomes(failed=1)
    entry = json.loads((pytester.path / "r.json").read_text())["tests"][
        f"test_real_bugs.py::{test}"
    ]
    assert entry["stage"] == f"{ALL_STAGES}TorchInductor diverges"
    result.stdout.fnmatch_lines([f"E * repro: python *repro.py  (replays {calls} checker call(s))"])
    assert sorted(Path(entry["artifacts"]).glob("*_inductor_output_code.py"))
    done = run_copied(Path(entry["repro"]).parent, tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "the bug is present" in done.stdout


def test_deep_bisect_names_the_inductor_pass(pytester):
    pytester.makepyfile(test_real_bugs=REAL_BUGS)
    result = pytester.runpytest(
        "test_real_bugs.py::test_min_of_uint8", "--compile-bisect=deep", "--compile-artifacts=out"
    )
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            f"E * {ALL_STAGES}TorchInductor diverges",
            "E * compiler_bisector: backend inductor, subsystem lowerings, *(min*)",
        ]
    )
