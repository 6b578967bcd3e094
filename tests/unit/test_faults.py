"""faults.classify over the exceptions a broken environment really raises, and what it leaves alone."""

from __future__ import annotations

import errno
import pickle
import subprocess
from pathlib import Path

import pytest
import torch
from torch._inductor.exc import CppCompileError

from pytest_torchcompile import CompileParityFailure, EnvironmentFault, _compat
from pytest_torchcompile.running import exported, faults
from pytest_torchcompile.running.faults import classify, recover

SO = "/tmp/torchinductor_me/42/c42zkizxuorbb7dvu3bwps3vhavkmavfelvpudeisykttdgt6jop.main.so"
GXX = ["g++", "/tmp/torchinductor_me/bm/cbm7.main.cpp", "-shared", "-fPIC", "-o", "main.so"]


def compiled_raising(exc: BaseException) -> BaseException:
    """What torch.compile raises when its backend raises `exc` (Dynamo's wrapper around it)."""

    def backend(gm, example_inputs):
        raise exc

    with pytest.raises(Exception) as raised:
        torch.compile(lambda t: t.sin(), backend=backend)(torch.ones(2))
    torch._dynamo.reset()
    return raised.value


@pytest.fixture(autouse=True)
def cache_dir(monkeypatch, tmp_path):
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_a_truncated_shared_object_in_the_cache_is_a_cache_fault():
    wrapped = compiled_raising(ImportError(f"{SO}: file too short"))
    assert type(wrapped).__name__ == "BackendCompilerFailed"
    fault = classify(wrapped)
    assert fault is not None and fault.kind == "cache" and fault.sure
    assert (fault.path, fault.clear) == (SO, "/tmp/torchinductor_me")
    assert isinstance(fault.exception, ImportError)
    assert "rm -r /tmp/torchinductor_me" in fault.note()
    assert f"a truncated Inductor cache artifact at {SO} was bypassed" in fault.note()


@pytest.mark.parametrize(
    "message",
    ["invalid ELF header", "cannot read file data", "file too short"],
)
def test_corrupt_artifacts_under_the_configured_cache_dir(cache_dir, message):
    path = cache_dir / "ab" / "cabc.so"
    fault = classify(OSError(f"{path}: {message}"))
    assert fault is not None and fault.kind == "cache"
    assert (fault.path, fault.clear) == (str(path), str(cache_dir))


def test_a_cached_source_that_does_not_parse_is_a_cache_fault_the_retry_decides(cache_dir):
    error = SyntaxError("'(' was never closed", (str(cache_dir / "g2" / "cg2.py"), 64, 1, "f("))
    fault = classify(error)
    assert fault is not None and fault.kind == "cache" and not fault.sure


def test_missing_toolchain_pieces_are_named():
    missing = FileNotFoundError(errno.ENOENT, "No such file or directory", "g++")
    fault = classify(compiled_raising(missing))
    assert fault is not None and fault.kind == "toolchain" and fault.path == "g++"
    header = CppCompileError(
        GXX,
        "/tmp/x.cpp:1:10: fatal error: omp.h: No such file or directory\ncompilation terminated.",
    )
    fault = classify(header)
    assert (
        fault is not None
        and fault.kind == "toolchain"
        and fault.what == ("the header omp.h is not installed")
    )
    linker = CppCompileError(GXX, "/usr/bin/ld: cannot find -lgomp: No such file or directory")
    assert classify(linker).what == "the linker cannot find the library libgomp"
    triton = RuntimeError("Failed to find C compiler. Please specify via CC environment variable.")
    assert classify(triton).kind == "toolchain"


def test_resources():
    assert classify(
        torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
    ).kind == ("resources")
    assert classify(compiled_raising(MemoryError())).kind == "resources"
    full = CppCompileError(GXX, "/usr/bin/ld: final link failed: No space left on device")
    assert classify(full).what == "no space left on the device"
    killed = CppCompileError(GXX, "g++: fatal error: Killed signal terminated program cc1plus")
    assert classify(killed).kind == "resources"


PROGRAMS_OWN = [
    RuntimeError("planted: the compiled kernel failed"),
    EOFError("Ran out of input"),  # the program's own unpickling, nowhere near a cache
    pickle.UnpicklingError("invalid load key, 'x'."),
    ImportError("No module named 'scipy'"),
    FileNotFoundError(errno.ENOENT, "No such file or directory", "data.csv"),
    subprocess.CalledProcessError(1, ["python", "tool.py"]),
    AssertionError("expected size 3==3, stride 1==2 at dim=0"),
]
WRONG_CODE = CppCompileError(
    GXX, "/tmp/torchinductor_me/bm/cbm7.main.cpp:14:37: error: 'at::vec' has not been declared"
)


@pytest.mark.parametrize("exc", [*PROGRAMS_OWN, None], ids=lambda exc: type(exc).__name__)
def test_the_programs_own_failures_are_left_alone(exc):
    assert classify(exc) is None


@pytest.mark.parametrize(
    ("exc", "wrapped"),
    [(WRONG_CODE, False), *((exc, True) for exc in [WRONG_CODE, *PROGRAMS_OWN])],
    ids=lambda value: type(value).__name__ if isinstance(value, BaseException) else str(value),
)
def test_any_failure_inside_the_backend_compiler_is_one_the_retry_decides(cache_dir, exc, wrapped):
    """A damaged cache makes the compiler fail too (an emptied ISA probe: 'at::vec' has not been
    declared), so it is retried in a fresh cache: not sure, it is the compiler's if it comes
    back there, and the cache's (named in the note) if it does not."""
    raised = compiled_raising(exc) if wrapped else exc
    fault = classify(raised)
    assert fault is not None and fault.kind == "cache" and not fault.sure
    assert fault.clear == str(cache_dir) and fault.exception is _compat.user_exception(raised)
    assert f"clear it with: rm -r {cache_dir}" in fault.note()


def test_a_backend_that_writes_no_cache_owns_its_failures(cache_dir):
    """Under eager or aot_eager no Inductor cache exists to blame: a failure inside the backend
    compiler is the compiler's, not retried."""
    assert classify(compiled_raising(WRONG_CODE), cached=False) is None
    assert classify(compiled_raising(WRONG_CODE)) is not None  # Inductor's: the retry decides


def test_recover_retries_a_cache_fault_once_and_raises_what_a_fresh_cache_does_not_cure():
    fault = classify(ImportError(f"{SO}: file too short"))
    notes: list[str] = []
    assert recover(fault, lambda: None, lambda r: None, notes, "context") is None
    assert notes == [fault.note()]
    with pytest.raises(EnvironmentFault) as raised:
        recover(fault, lambda: fault.exception, lambda r: r, [], "backend=inductor")
    text = str(raised.value)
    assert "the Inductor cache" in text and "rm -r /tmp/torchinductor_me" in text
    assert "It came back in a fresh, empty Inductor cache" in text
    assert "ImportError" in text and text.endswith("backend=inductor")
    assert not isinstance(raised.value, CompileParityFailure)  # no verdict on the compiler
    oom = classify(MemoryError())
    runs: list[int] = []
    with pytest.raises(EnvironmentFault, match=r"\(resources\)"):
        recover(oom, lambda: runs.append(1), lambda r: None, [], "")
    assert not runs  # only the cache is retried


def test_recover_keeps_a_backend_failure_that_comes_back_as_the_compilers():
    fault = classify(WRONG_CODE)
    notes: list[str] = []
    retried: list[str] = []
    again = recover(
        fault, lambda: WRONG_CODE, lambda r: r, notes, "", before_retry=lambda: retried.append("x")
    )
    assert again is WRONG_CODE and notes == [] and retried == ["x"]
    assert recover(fault, lambda: None, lambda r: None, notes, "") is None
    assert notes == [fault.note()]


def test_a_crashing_aoti_loader_is_the_environments_fault(monkeypatch: pytest.MonkeyPatch) -> None:
    """torch 2.11's loader segfaulted on the GPU machine for any package: the first package is
    loaded in a separate process, and its crash is named, not taken for a miscompile."""
    monkeypatch.setattr(exported, "_LOADERS_TRIED", set())
    monkeypatch.setattr(_compat, "aoti_load_crash", lambda package: "signal SIGSEGV")
    with pytest.raises(_compat.LoaderCrash) as caught:
        exported.check_loader("/tmp/program0.pt2")
    fault = faults.classify(caught.value)
    assert fault is not None and fault.kind == "runtime"
    text = str(fault.error("context"))
    assert "environment (torch's runtime on this machine)" in text
    assert "crashed (signal SIGSEGV)" in text
    assert "aoti_load_package('/tmp/program0.pt2')" in text


def test_a_loader_that_raises_is_left_to_the_in_process_load(tmp_path: Path) -> None:
    assert _compat.aoti_load_crash(str(tmp_path / "missing.pt2")) is None


def test_a_loader_that_never_answers_is_a_crash_with_its_wait_named(tmp_path: Path) -> None:
    """The GPU machine's loader test printed nothing for 200 s: a child that does not answer in
    time is a crash of the loader's, named with the wait, never a hang of the session."""
    assert _compat.aoti_load_crash(str(tmp_path / "program.pt2"), timeout_s=0.01) == (
        "no answer within 0 s"
    )
