"""Faults of the environment are named as such: a truncated Inductor cache artifact, or any
failure inside the backend compiler that a fresh cache cures, is bypassed; a missing compiler is
an EnvironmentFault; and none is reported as a miscompile."""

from __future__ import annotations

import json

import pytest

TEST = """
import pytest, torch

@pytest.mark.compile_parity
def test_sin(compile_parity):
    compile_parity(lambda t: torch.sin(t) * 2 + t.cos(), torch.randn(8))
"""

BACKENDS = """
import errno, os

def no_compiler(gm, example_inputs):
    raise FileNotFoundError(errno.ENOENT, "No such file or directory", "g++")

def truncated(gm, example_inputs):
    where = os.path.join(os.environ["TORCHINDUCTOR_CACHE_DIR"], "42", "c42z.main.so")
    raise ImportError(f"{where}: file too short")

def broken_cache(gm, example_inputs):
    # fails to compile in the test's cache only (not in a fresh one), as a damaged one makes
    # Inductor fail
    if os.path.basename(os.environ["TORCHINDUCTOR_CACHE_DIR"]) == "cache":
        raise RuntimeError("c42z.cpp:23:21: error: 'at::vec' has not been declared")
    return gm.forward

def wrong_code(gm, example_inputs):
    raise RuntimeError("c42z.cpp:23:21: error: 'at::vec' has not been declared")
"""

DAMAGED = """
import pytest, torch

class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(16, 32)
        self.norm = torch.nn.LayerNorm(32)

    def forward(self, x):
        return torch.softmax(torch.nn.functional.gelu(self.norm(self.lin(x))), -1)

@pytest.mark.compile_parity
def test_net(compile_parity):
    compile_parity(Net(), torch.randn(8, 16))
"""


@pytest.mark.parametrize(
    ("backend", "lines"),
    [
        (
            "no_compiler",
            [
                "*EnvironmentFault: The compiled run failed because of its environment (the "
                "C++/Triton toolchain), not because of what the compiler made of the program: "
                "the tool g++ was not found: g++",
                "E * What to do: install the missing tool*",
                "E * Original exception: FileNotFoundError: *No such file or directory*",
            ],
        ),
        (
            "truncated",
            [
                "*EnvironmentFault: The compiled run failed because of its environment (the "
                "Inductor cache)*: a truncated Inductor cache artifact: */42/c42z.main.so",
                "E * What to do: clear it with: rm -r */cache",
                "E * It came back in a fresh, empty Inductor cache, after: a truncated Inductor "
                "cache artifact at */cache/42/c42z.main.so; so check the disk*",
            ],
        ),
    ],
)
def test_a_fault_of_the_environment_is_no_miscompile(pytester, monkeypatch, backend, lines):
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(pytester.path / "cache"))
    pytester.makepyfile(envfaults=BACKENDS, test_env=TEST)
    pytester.syspathinsert()
    result = pytester.runpytest(f"--compile-backend=envfaults:{backend}", "--compile-artifacts=out")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([*lines, "E * No parity was shown, and no stage bisect or repro*"])
    text = result.stdout.str()
    assert "ParityError" not in text and "stage:" not in text and "repro:" not in text
    assert not (pytester.path / "out").exists()


@pytest.mark.parametrize(
    ("source", "damaged", "note"),
    [
        (
            TEST,
            "*.main.so",
            "*a truncated Inductor cache artifact at *.main.so was bypassed (the compiled run "
            "was retried once with a fresh Inductor cache, after: ImportError: *file too short)",
        ),
        (
            DAMAGED,
            "*.so",
            "*a failure inside the backend compiler (which a damaged cache causes too) was "
            "bypassed (the compiled run was retried once with a fresh Inductor cache, after: "
            "CppCompileError: *)",
        ),
    ],
    ids=["kernels-truncated", "every-so-emptied"],
)
def test_a_damaged_inductor_cache_is_bypassed(
    pytester, monkeypatch, tmp_path, source, damaged, note
):
    """The real thing, as a run killed while Inductor writes its cache leaves it. Kernels' .so
    cut short: every later run loads them from the FX graph cache and fails ("file too short").
    Every .so emptied, the CPU ISA probes' included: Inductor takes this CPU for one without
    vector units, but compiles the vectorized kernels its FX graph cache kept without ATen's
    vector headers, and g++ fails ("'at::vec' has not been declared", inside
    BackendCompilerFailed). A fresh cache (where the probes run again) compiles either."""
    cache = tmp_path / "inductor-cache"
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(cache))
    monkeypatch.delenv("TORCHINDUCTOR_FORCE_DISABLE_CACHES", raising=False)
    pytester.makepyfile(source)
    first = pytester.runpytest_subprocess("--compile-backend=inductor")
    first.assert_outcomes(passed=1)
    artifacts = sorted(cache.rglob(damaged))
    assert artifacts, sorted(cache.rglob("*"))
    for artifact in artifacts:
        artifact.write_bytes(b"")
    second = pytester.runpytest_subprocess("--compile-backend=inductor", "-rA")
    second.assert_outcomes(passed=1)
    second.stdout.fnmatch_lines([f"{note}: clear it with: rm -r {cache}"])
    assert "ParityError" not in second.stdout.str()


def test_a_backend_failure_is_retried_once_in_a_fresh_cache_and_counted_once(pytester, monkeypatch):
    cache = pytester.path / "cache"
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(cache))
    pytester.makepyfile(envfaults=BACKENDS, test_env=TEST)
    pytester.syspathinsert()
    cured = pytester.runpytest(
        "--compile-backend=envfaults:broken_cache", "-rA", "--compile-report=report.json"
    )
    cured.assert_outcomes(passed=1)
    cured.stdout.fnmatch_lines(
        [
            "*a failure inside the backend compiler (which a damaged cache causes too) was "
            "bypassed (the compiled run was retried once with a fresh Inductor cache, after: "
            f"RuntimeError: *'at::vec' has not been declared): clear it with: rm -r {cache}"
        ]
    )
    report = json.loads((pytester.path / "report.json").read_text())
    counts = report["tests"]["test_env.py::test_sin"]["counts"]
    assert (counts["graphs"], counts["recompiles"]) == (1, 0)
    again = pytester.runpytest("--compile-backend=envfaults:wrong_code", "--compile-bisect=off")
    again.assert_outcomes(failed=1)
    again.stdout.fnmatch_lines(
        ["*ParityError*", "*compiled raised RuntimeError: *'at::vec' has not been declared*"]
    )
    assert "EnvironmentFault" not in again.stdout.str()
