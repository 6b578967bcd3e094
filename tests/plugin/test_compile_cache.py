"""--compile-cache: a warm run hits the caches a cold run filled, shared by xdist workers, and
reaches the cold run's verdicts and counts; automatic-dynamic profiles stay out of it."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

SUITE = """
import pytest, torch

def step(x):
    y = torch.sin(x) * 2
    torch._dynamo.graph_break()
    return y + x.cos()

@pytest.mark.compile_parity
def test_break_and_recompile(compile_parity):
    compile_parity(step, torch.randn(8))
    compile_parity(step, torch.randn(16))

@pytest.mark.compile_parity
def test_module(compile_parity):
    compile_parity(torch.nn.Linear(4, 3), torch.randn(2, 4))
"""

SUMMARY = re.compile(
    r"compile cache: (?P<where>.*): AOTAutograd (?P<aot_hits>\d+) hits, (?P<aot_misses>\d+) "
    r"misses(, \d+ bypassed)?; Inductor FX graphs (?P<fx_hits>\d+) hits, (?P<fx_misses>\d+) "
    r"misses(, \d+ bypassed)?; the directory holds (?P<files>\d+) files"
)


def _verdicts(pytester: pytest.Pytester, name: str) -> dict[str, Any]:
    """Each test's outcome and counts, compile time left out."""
    tests = json.loads((pytester.path / name).read_text())["tests"]
    return {
        nodeid: (
            test["verdict"],
            {key: value for key, value in test["counts"].items() if key != "compile_time_s"},
        )
        for nodeid, test in tests.items()
    }


def _summary(result: pytest.RunResult) -> dict[str, str]:
    found = SUMMARY.search(result.stdout.str())
    assert found, result.stdout.str()
    return found.groupdict()


def test_a_warm_run_hits_what_a_cold_run_under_xdist_left_and_counts_alike(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Cold: two xdist workers fill the ini key's directory (their hits and misses summed).
    Warm: the option names it over a TORCHINDUCTOR_CACHE_DIR of the environment, nothing
    compiles again, and the verdicts and counts are the cold run's."""
    monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR", raising=False)
    monkeypatch.delenv("TRITON_CACHE_DIR", raising=False)
    pytester.makeini("[pytest]\ncompile_cache = cache\n")
    pytester.makepyfile(test_cached=SUITE)
    cold = pytester.runpytest_subprocess("-n", "2", "--compile-report=cold.json")
    cold.assert_outcomes(passed=2)
    filled = _summary(cold)
    assert filled["where"] == f"{pytester.path / 'cache'} (ini compile_cache)"
    assert int(filled["aot_misses"]) > 0 and int(filled["fx_misses"]) > 0

    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(pytester.path / "elsewhere"))
    warm = pytester.runpytest_subprocess(
        "-p", "no:xdist", "--compile-cache=cache", "--compile-report=warm.json"
    )
    warm.assert_outcomes(passed=2)
    used = _summary(warm)
    assert used["where"] == f"{pytester.path / 'cache'} (--compile-cache)"
    assert (used["aot_misses"], used["fx_misses"]) == ("0", "0")
    assert int(used["aot_hits"]) >= int(filled["aot_misses"])
    assert used["files"] == filled["files"]
    assert not (pytester.path / "elsewhere").exists()
    cold_verdicts = _verdicts(pytester, "cold.json")
    assert cold_verdicts == _verdicts(pytester, "warm.json")
    counts = cold_verdicts["test_cached.py::test_break_and_recompile"][1]
    assert (counts["graph_breaks"], counts["recompiles"]) == (1, 1)


RECOMPILES = """
import pytest, torch

def double(t):
    return t * 2

@pytest.mark.compile_parity(backend="eager")
def test_sizes(compile_parity):
    compile_parity(double, torch.randn(4))
    compile_parity(double, torch.randn(8))
"""


@pytest.mark.parametrize("conftest", ["", "import torch._dynamo\n"], ids=["", "dynamo-loaded"])
def test_a_job_ids_automatic_dynamic_profile_does_not_make_a_warm_run_count_fewer_recompiles(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, conftest: str
) -> None:
    """With a job id, Dynamo's local PGO would save that the size varies, and a warm run would
    compile it dynamic from the first call: one recompile fewer than the cold run counted. A
    conftest that loads Dynamo reads its config before the plugin sets the variable."""
    monkeypatch.setenv("TORCH_COMPILE_JOB_ID", "suite")
    pytester.makeconftest(conftest)
    pytester.makepyfile(test_sizes=RECOMPILES)
    for name in ("cold.json", "warm.json"):
        result = pytester.runpytest_subprocess("--compile-cache=cache", f"--compile-report={name}")
        result.assert_outcomes(passed=1)
    assert _verdicts(pytester, "cold.json") == _verdicts(pytester, "warm.json")
    assert _verdicts(pytester, "warm.json")["test_sizes.py::test_sizes"][1]["recompiles"] == 1
    assert not list((pytester.path / "cache").rglob("code_state_*"))


def test_a_directory_that_cannot_be_made_is_a_usage_error(pytester: pytest.Pytester) -> None:
    (pytester.path / "file").write_text("")
    result = pytester.runpytest("--compile-cache=file/cache")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*Invalid --compile-cache='file/cache': *"])


def test_a_session_with_no_parity_test_imports_no_torch(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("import sys\n\ndef test_plain():\n    assert 'torch' not in sys.modules\n")
    result = pytester.runpytest_subprocess("--compile-cache=cache", "-p", "no:xdist")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*compile cache: *: AOTAutograd 0 hits, 0 misses;*"])
    assert Path(pytester.path / "cache").is_dir()


WORKFLOWS = sorted((Path(__file__).parents[2] / "examples" / "ci").glob("*.yml"))


@pytest.mark.parametrize("workflow", WORKFLOWS, ids=lambda path: path.name)
def test_the_example_workflows_restore_and_save_the_cache_keyed_by_torch(workflow: Path) -> None:
    """Each job that runs pytest restores the directory it passes as --compile-cache before the
    tests and saves it after them, under a key that names the pinned torch."""
    yaml = pytest.importorskip("yaml")
    jobs = yaml.safe_load(workflow.read_text())["jobs"].values()
    testing = [job for job in jobs if any("-m pytest " in s.get("run", "") for s in job["steps"])]
    assert testing
    for job in testing:
        steps = job["steps"]
        uses = [step.get("uses", "") for step in steps]
        restore = steps[uses.index("actions/cache/restore@v4")]
        save = steps[uses.index("actions/cache/save@v4")]
        path = restore["with"]["path"]
        assert save["with"]["path"] == path
        assert "torch${{ env.TORCH_VERSION }}" in restore["with"]["key"]
        assert restore["with"]["restore-keys"] in restore["with"]["key"]
        assert save["with"]["key"] == f"${{{{ steps.{restore['id']}.outputs.cache-primary-key }}}}"
        runs = [
            (i, step["run"]) for i, step in enumerate(steps) if "-m pytest " in step.get("run", "")
        ]
        for index, command in runs:
            assert re.search(rf"--compile-cache[ =]{re.escape(path)}\s", command), command
            assert steps.index(restore) < index < steps.index(save)
