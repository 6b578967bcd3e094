"""examples/ci/github-actions-sharded.yml, parsed, and its commands run here: each shard as a
process (pytest-split over a durations file), then the merge job's check and re-record."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

from tests.plugin.sharded_suite import BUDGETS, DURATIONS_FILE, write_suite

yaml = pytest.importorskip("yaml")  # the dev extra, like pytest-split
pytest.importorskip("pytest_split")

WORKFLOW = Path(__file__).parents[2] / "examples" / "ci" / "github-actions-sharded.yml"
_EXPRESSION = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")


def _ci_torch() -> str:
    """The torch version .ci/run pins (not the running torch: the GPU host has another)."""
    pinned = re.search(r"torch==([\w.]+)", (Path(__file__).parents[2] / ".ci" / "run").read_text())
    assert pinned is not None, ".ci/run pins no torch"
    return pinned[1]


def load() -> dict[str, Any]:
    workflow: dict[str, Any] = yaml.safe_load(WORKFLOW.read_text())
    # YAML 1.1 reads the key `on` as True.
    workflow["on"] = workflow.pop(True)
    return workflow


def runs(step: dict[str, Any], event: str) -> bool:
    """Whether a step runs on `event` (a job that was not cancelled): the workflow's conditions."""
    condition = _EXPRESSION.sub(r"\1", step.get("if", "true")).strip()
    known = {
        "true": True,
        "!cancelled()": True,
        "github.event_name == 'workflow_dispatch'": event == "workflow_dispatch",
        "github.event_name != 'workflow_dispatch'": event != "workflow_dispatch",
    }
    return known[condition]


def commands(job: dict[str, Any], event: str, context: dict[str, str]) -> list[str]:
    """The job's shell commands for `event`, expressions filled in; install steps left out (they
    reach a package index, and this checkout is already installed)."""
    found = []
    for step in job["steps"]:
        if "run" not in step or "install" in step["run"] or not runs(step, event):
            continue
        found.append(_EXPRESSION.sub(lambda m: context[m.group(1)], step["run"]).strip())
    return found


def shell(command: str, where: Path) -> subprocess.CompletedProcess[str]:
    """A step's command with this Python first on the PATH (the workflow calls `python`)."""
    path = os.pathsep.join([str(Path(sys.executable).parent), os.environ["PATH"]])
    return subprocess.run(
        ["bash", "-c", command],
        cwd=where,
        env={**os.environ, "PATH": path},
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_the_workflow_shards_with_pytest_split_and_merges_in_one_job() -> None:
    workflow = load()
    assert {"pull_request", "workflow_dispatch"} <= set(workflow["on"])
    shard, merge = workflow["jobs"]["shard"], workflow["jobs"]["merge"]
    assert merge["needs"] == "shard" and merge["if"] == "${{ !cancelled() }}"
    install = next(s["run"] for s in shard["steps"] if "install" in s.get("run", ""))
    assert '"torch==${TORCH_VERSION}"' in install and "pytest-split" in install
    assert workflow["env"]["TORCH_VERSION"] == _ci_torch()  # the torch CI tests against
    names = [s.get("name", "") for s in merge["steps"]]
    assert "Upload the merged report and the shards' JUnit XML" in names


@pytest.mark.skipif(torch.cuda.is_available(), reason="the suite's [cuda] case is CPU-only here")
def test_the_workflows_commands_run_the_shards_then_check_and_re_record(tmp_path: Path) -> None:
    write_suite(tmp_path)
    old = json.loads((tmp_path / BUDGETS).read_text())
    workflow = load()
    shard, merge = workflow["jobs"]["shard"], workflow["jobs"]["merge"]
    groups = shard["strategy"]["matrix"]["group"]
    assert len(groups) == 3
    for group in groups:
        context = {"matrix.group": str(group), "strategy.job-total": str(len(groups))}
        [command] = commands(shard, "pull_request", context)
        assert f"--durations-path {DURATIONS_FILE}" in command
        done = shell(command, tmp_path)
        assert done.returncode == 0, done.stdout + done.stderr
        assert f"[pytest-split] Running group {group}/3" in done.stdout
    assert sorted(p.name for p in (tmp_path / "reports").iterdir()) == [
        *(f"junit-{g}.xml" for g in groups),
        *(f"shard-{g}.json" for g in groups),
    ]

    # A pull request: the counts are within the budgets (one fell), so the check passes...
    [check] = commands(merge, "pull_request", {})
    done = shell(check, tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "IMPROVED tests/c/test_c.py::test_lowered - graph_breaks 3 -> 0" in done.stdout
    assert (tmp_path / "reports" / "compile-report.json").is_file()
    # ... until a budget is below its test's count.
    lowered = json.loads(json.dumps(old))
    lowered["tests"]["tests/a/test_a.py::test_breaks[cpu]"]["cpu"]["graph_breaks"] = 0
    (tmp_path / BUDGETS).write_text(json.dumps(lowered))
    done = shell(check, tmp_path)
    assert done.returncode == 1
    assert "REGRESSED tests/a/test_a.py::test_breaks[cpu] - graph_breaks 0 -> 1" in done.stdout

    # A manual run re-records the file from all shards: the whole suite, so the deleted test goes.
    (tmp_path / BUDGETS).write_text(json.dumps(old))
    [update] = commands(merge, "workflow_dispatch", {})
    done = shell(update, tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 lowered, 3 added, 1 removed (the whole suite was collected" in done.stdout
    tests = json.loads((tmp_path / BUDGETS).read_text())["tests"]
    assert "tests/a/test_a.py::test_deleted" not in tests
    assert (
        tests["tests/a/test_a.py::test_breaks[cuda:0]"]
        == old["tests"]["tests/a/test_a.py::test_breaks[cuda:0]"]
    )
    assert tests["tests/c/test_c.py::test_lowered"]["cpu"]["graph_breaks"] == 0
