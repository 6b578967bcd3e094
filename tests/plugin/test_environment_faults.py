"""Faults of the environment are named as such: a truncated Inductor cache artifact is bypassed,
a missing compiler is an EnvironmentFault, and neither is reported as a miscompile."""

from __future__ import annotations

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
"""


def test_a_truncated_inductor_cache_artifact_is_bypassed(pytester, monkeypatch, tmp_path):
    """The real thing: a kernel's .so in Inductor's on-disk cache cut short, as a run killed while
    writing it leaves it; every later run loads it from the FX graph cache and fails."""
    cache = tmp_path / "inductor-cache"
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(cache))
    monkeypatch.delenv("TORCHINDUCTOR_FORCE_DISABLE_CACHES", raising=False)
    pytester.makepyfile(TEST)
    first = pytester.runpytest_subprocess("--compile-backend=inductor")
    first.assert_outcomes(passed=1)
    kernels = sorted(cache.rglob("*.main.so"))
    assert kernels, sorted(cache.rglob("*"))
    for kernel in kernels:
        kernel.write_bytes(b"")
    second = pytester.runpytest_subprocess("--compile-backend=inductor", "-rA")
    second.assert_outcomes(passed=1)
    second.stdout.fnmatch_lines(
        [
            "*a truncated Inductor cache artifact at *.main.so was bypassed (the compiled run "
            "was retried once with a fresh Inductor cache, after: ImportError: *file too short)"
            f": clear it with: rm -r {cache}"
        ]
    )
    assert "ParityError" not in second.stdout.str()


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
