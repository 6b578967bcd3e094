"""Whether a natural test's 100 examples hold the input its bug needs, without compiling.

A pytest plugin that stands in for pytest-torchcompile: its `compile_parity` runs the call
eagerly, rejects the example where eager raises (as the plugin does where compiled raises alike),
and fails the test where the example holds its bug's input, saying which valid example that was.
Run with the same seed and profile, Hypothesis draws the same examples as the real run up to the
first failure (the local modules whose literals it collects are the same: the plugin's are
imported here first), so this says on which seeds the real run can catch the bug, in seconds
instead of an Inductor compile per example:

    python3 benchmarks/edge_bugs/drawn.py --seeds 0 1 2 3 4 5 6 7 8 9

Hypothesis collects literals from the modules loaded, so this file holds no float but the
margins ranking.py holds anyway, and no integer of 100 or more.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import os
import re
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
import torch
from hypothesis import HealthCheck, reject, settings

import pytest_torchcompile

# The plugin's modules, as a real run imports them (Hypothesis collects their literals too).
for _module in ("fixtures", "runner"):
    importlib.import_module(f"pytest_torchcompile.{_module}")

HERE = Path(__file__).resolve().parent
TEST_FILES = [HERE / "test_draw_bugs.py", HERE / "test_edge_bugs.py"]
BYTES = (torch.int8, torch.uint8)


def _order(t: torch.Tensor) -> tuple[int, ...]:
    """The order of a tensor's dimensions of size > 1 in memory (as parity compares strides)."""
    dims = [d for d, size in enumerate(t.shape) if size > 1]
    return tuple(sorted(dims, key=lambda d: (-t.stride(d), -d)))


def _layouts_differ(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Where eager's copysign stores its output in another order than Inductor's: Inductor's
    follows the second operand's layout (row-major where that one is broadcast, but the first's
    where it is 0-d, under the dynamic shapes a property test's compiles soon have), eager's
    mostly the first's (measured on seventeen layout pairs, torch 2.13)."""
    if b.dim() == 0:
        return False
    out = torch.copysign(a, b)
    dims = tuple(d for d, size in enumerate(out.shape) if size > 1)
    second = b.expand(out.shape)
    compiled = dims if any(second.stride(d) == 0 for d in dims) else _order(second)
    return out.numel() > 1 and _order(out) != compiled


def _inner_run(t: torch.Tensor) -> int:
    """How many elements lie one after the other in memory from the innermost dimension out:
    Inductor's amin of int8/uint8 is vectorized (and wrong) over 16 or more (torch 2.13)."""
    run = 1
    for d in sorted((d for d in range(t.dim()) if t.shape[d] > 1 and t.stride(d)), key=t.stride):
        if t.stride(d) != run:
            break
        run *= t.shape[d]
    return run


def _on_the_margin(margin: float) -> Callable[..., bool]:
    def holds(x1: torch.Tensor, x2: torch.Tensor) -> bool:
        rounded = torch.tensor(margin, dtype=torch.bfloat16)
        return x1.dtype == torch.bfloat16 and bool(((x1 - x2) == rounded).any())

    return holds


TRIGGERS: dict[str, Callable[..., bool]] = {
    "test_copysign": _layouts_differ,
    "test_amin": lambda x: (
        x.dtype in BYTES and x.numel() >= 16 and _inner_run(x) >= 16 and bool((x > 0).all())
    ),
    "test_ceil": lambda x: x.dtype == torch.bool,
    "test_margin_2_9": _on_the_margin(2.9),
    "test_margin_1_1": _on_the_margin(1.1),
    "test_margin_1_3": _on_the_margin(1.3),
    "test_margin_ranking_loss": _on_the_margin(0.1),  # test_edge_bugs.py: the README's
}
"""Each test's bug input, read off the example's tensors."""


class Drawn(AssertionError):
    pass


class _Checker:
    def __init__(self, name: str) -> None:
        self.trigger = TRIGGERS[name]
        self.valid = 0

    def __call__(self, fn: Callable[..., Any], *args: torch.Tensor) -> None:
        if self.trigger(*args):
            raise Drawn(f"DRAWN at valid example {self.valid}")
        try:
            out = fn(*args)
            if any(a.requires_grad for a in args):
                out.sum().backward()
        except Exception:
            reject()
        self.valid += 1


@pytest.fixture
def compile_parity(request: pytest.FixtureRequest) -> _Checker:
    return _Checker(request.node.name)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "compile_parity: stand-in for pytest-torchcompile's")
    before = os.environ.get("DRAWN_STRATEGIES")
    if before:  # another version's strategies.py, in place of this one's
        spec = importlib.util.spec_from_file_location("pytest_torchcompile.strategies", before)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
        pytest_torchcompile.strategies = module


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The settings the plugin gives @given parity tests: no deadline, and neither the
    function-scoped-fixture nor the too-slow health check."""
    for item in items:
        inner: Any = getattr(item, "obj", None)
        parent = getattr(inner, "_hypothesis_internal_use_settings", None) or settings()
        inner._hypothesis_internal_use_settings = settings(
            parent,
            deadline=None,
            suppress_health_check=[
                *parent.suppress_health_check,
                HealthCheck.function_scoped_fixture,
                HealthCheck.too_slow,
            ],
        )


def _run(seed: int, tests: Sequence[str], before: Path | None) -> dict[str, str]:
    """'drawn at k' or 'not drawn' per test, from one pytest process at `seed`."""
    path = os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")])
    env = {**os.environ, "PYTHONPATH": path, "COLUMNS": "1000"}  # whole summary lines
    if before is not None:
        env["DRAWN_STRATEGIES"] = str(before.resolve())
    command = [
        sys.executable, "-m", "pytest", *map(str, TEST_FILES), "-p", "no:torchcompile", "-p", "drawn",
        "-p", "no:cacheprovider", f"--hypothesis-seed={seed}", "--hypothesis-profile=noshrink",
        "-q", "-rf", "--tb=no", "-k", " or ".join(tests),
    ]  # fmt: skip
    out = subprocess.run(command, env=env, capture_output=True, text=True).stdout
    found = dict(re.findall(r"FAILED \S+::(\w+) - .*?DRAWN at valid example (\d+)", out))
    return {test: f"drawn at {found[test]}" if test in found else "not drawn" for test in tests}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=list(range(10)))
    parser.add_argument("--tests", nargs="+", default=list(TRIGGERS))
    parser.add_argument("--before", type=Path, help="another version's strategies.py to draw with")
    args = parser.parse_args(argv)
    results = {seed: _run(seed, args.tests, args.before) for seed in args.seeds}
    print("| test | " + " | ".join(f"seed {s}" for s in args.seeds) + " | seeds drawn |")
    print("| --- |" + " --- |" * (len(args.seeds) + 1))
    for test in args.tests:
        cells = [results[s][test].removeprefix("drawn at ") for s in args.seeds]
        drawn = sum(cell != "not drawn" for cell in cells)
        cells = ["-" if cell == "not drawn" else f"#{cell}" for cell in cells]
        print(f"| {test} | " + " | ".join(cells) + f" | {drawn} of {len(args.seeds)} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
