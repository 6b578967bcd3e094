"""No leaf outside its tolerance passes without a named excuse, over real suites.

The examples and the planted suites run with a plugin (tests/silent_excuses.py) that re-judges
every leaf verdict independently: a pass must be within the plain tolerance, and an excuse or a
leaf not judged must name its rule in a note. The backends: one that decomposes as Inductor does
(so leaves differ by rounding and the rules excuse some), and planted wrong ones (so the rules
judge real divergences).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _rejudged(tmp_path: Path, *arguments: str) -> list[str]:
    """Run pytest on `arguments` with the re-judging plugin; what it found (first line: how
    many leaves it judged)."""
    found = tmp_path / "found.txt"
    env = {
        **os.environ,
        "SILENT_EXCUSES": str(found),
        "PYTHONPATH": os.pathsep.join([str(ROOT / "tests"), os.environ.get("PYTHONPATH", "")]),
        "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "inductor"),
    }
    command = [
        sys.executable,
        "-m",
        "pytest",
        "-q",
        "-p",
        "silent_excuses",
        "-p",
        "no:cacheprovider",
    ]
    subprocess.run(
        [*command, "--compile-bisect=off", *arguments],
        cwd=ROOT,
        env=env,
        capture_output=True,
        timeout=900,
        check=False,
    )
    return found.read_text(encoding="utf-8").splitlines()


def test_the_examples_pass_no_leaf_without_a_named_rule(tmp_path: Path) -> None:
    judged, *found = _rejudged(
        tmp_path, "examples", "--compile-backend=aot_eager_decomp_partition", "-x"
    )
    assert int(judged.split()[1]) > 300  # the plugin saw the leaves (676 on torch 2.13)
    assert found == []


@pytest.mark.parametrize(
    "backend",
    [
        "corrupt_output",
        "corrupt_gradient",
        "wrong_for_half_precision",
        "wrong_for_exact_differences",
    ],
)
def test_the_planted_suites_pass_no_leaf_without_a_named_rule(tmp_path: Path, backend: str) -> None:
    program = tmp_path / "test_properties.py"
    program.write_text((ROOT / "tests" / "plugin" / "hypothesis_properties.py").read_text())
    judged, *found = _rejudged(
        tmp_path, str(program), f"--compile-backend=planted:{backend}", "--hypothesis-seed=0"
    )
    assert int(judged.split()[1]) > 0
    assert found == []
