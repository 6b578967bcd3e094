"""A small suite to run whole and in shards, and to read the torch.compile section of an output.

Used by test_shards.py (shards run inline, merged by the command) and test_sharded_workflow.py
(the example workflow's own commands, each shard a process).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

# Directories to split by, a test above them, a module skipped at collection, a test on every
# device (its [cuda] case skipped here), a recompile, a graph break, an intercepted module call
# (--compile-parity=all) for the coverage table. Five tests compile: the summary lists the five
# slowest compiles, so all of them, whatever their times.
FILES = {
    "pytest.ini": "[pytest]\ntestpaths = tests\ncompile_backend = aot_eager\ncompile_parity = all\n",
    "tests/a/test_a.py": """
import pytest, torch


def breaking(x):
    x = x + 1
    torch._dynamo.graph_break()
    return x * 2


@pytest.mark.compile_parity
def test_breaks(compile_parity, device):
    compile_parity(breaking, torch.randn(3, device=device))


@pytest.mark.compile_parity(dynamic="false")
def test_recompiles(compile_parity):
    compile_parity(torch.relu, torch.randn(2))
    compile_parity(torch.relu, torch.randn(3))
""",
    "tests/b/test_b.py": """
import pytest, torch


@pytest.mark.compile_parity
def test_steady(compile_parity):
    compile_parity(torch.sin, torch.randn(3))


def test_intercepted():
    torch.nn.Linear(3, 2)(torch.randn(4, 3))
""",
    "tests/c/test_c.py": """
import pytest, torch


@pytest.mark.compile_parity
def test_lowered(compile_parity):
    compile_parity(torch.cos, torch.randn(3))
""",
    "tests/c/test_optional.py": 'import pytest\n\npytest.importorskip("a_module_nobody_installed")\n',
    "tests/test_top.py": "def test_plain():\n    pass\n",
}
# pytest-split's durations: its groups cut across the directories (test_a's tests in group 1
# and 2, test_b's in 2 and 3), and each group has a parity test.
DURATIONS = {
    "tests/a/test_a.py::test_breaks[cpu]": 2.0,
    "tests/a/test_a.py::test_breaks[cuda]": 2.0,
    "tests/a/test_a.py::test_recompiles": 2.0,
    "tests/b/test_b.py::test_steady": 2.0,
    "tests/b/test_b.py::test_intercepted": 1.0,
    "tests/c/test_c.py::test_lowered": 2.0,
    "tests/test_top.py::test_plain": 1.0,
}
BUDGETS = "compile-budgets.json"
# Entries an update leaves (unchanged, another device, a module skipped at collection), lowers,
# and removes (a deleted test: only when the whole suite was collected).
OLD_BUDGETS = {
    "format": 1,
    "tests": {
        node: {device: {"fallbacks": 0, "graph_breaks": breaks, "recompiles": 0}}
        for node, device, breaks in [
            ("tests/a/test_a.py::test_breaks[cpu]", "cpu", 1),
            ("tests/a/test_a.py::test_breaks[cuda:0]", "cuda:0", 1),
            ("tests/a/test_a.py::test_deleted", "cpu", 2),
            ("tests/c/test_c.py::test_lowered", "cpu", 3),
            ("tests/c/test_optional.py::test_needs_it", "cpu", 1),
        ]
    },
}
DURATIONS_FILE = ".test_durations"


def write_suite(root: Path) -> None:
    """The suite, its old budget file and pytest-split's durations file."""
    for name, text in FILES.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text.lstrip())
    (root / BUDGETS).write_text(json.dumps(OLD_BUDGETS, indent=2) + "\n")
    (root / DURATIONS_FILE).write_text(json.dumps(DURATIONS, indent=4))


_SEPARATOR = re.compile(r"^=+ .* =+$")


def compile_section(lines: list[str]) -> list[str]:
    """The lines under the ``= torch.compile =`` separator, with times masked, and the lists of
    the slowest (ordered by time) in node id order: times differ between processes."""
    start = next(i for i, line in enumerate(lines) if re.fullmatch(r"=+ torch.compile =+", line))
    section = []
    for line in lines[start + 1 :]:
        if _SEPARATOR.match(line):
            break
        section.append(re.sub(r"\b\d+\.\d\ds\b", "N.NNs", line))
    for header in [i for i, line in enumerate(section) if line.startswith("slowest ")]:
        end = next(
            (i for i in range(header + 1, len(section)) if not section[i].startswith("  ")),
            len(section),
        )
        section[header + 1 : end] = sorted(section[header + 1 : end])
    return section
