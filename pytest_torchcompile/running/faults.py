"""Faults of the environment: a compiled run that failed for reasons that are not the compiler's.

A run killed while Inductor wrote its on-disk cache leaves a truncated artifact, and every later
run that loads it raises `ImportError: .../main.so: file too short`; a machine without a C++
compiler, or out of memory or disk, fails every compile. Reported as "compiled raised", each of
these would read as a miscompile. `classify` recognises them from the compiled side's exception
(under Dynamo's and Inductor's wrappers), and `recover` retries a cache fault once with a fresh
cache, or raises `EnvironmentFault`, which names the fault and what to do about it.

Only causes that are clearly the environment's are named outright. Any other failure inside the
backend compiler may be the cache's too (an emptied ISA probe `.so` makes Inductor emit code g++
rejects: "'at::vec' has not been declared"), so it is retried once in a fresh cache: passing there,
it was the cache's, and a note names the directory; failing again, it is the compiler's and stays a
parity failure.
"""

from __future__ import annotations

import errno
import os
import pickle
import re
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import PurePath
from typing import Literal, TypeVar

import torch

from pytest_torchcompile import _compat
from pytest_torchcompile.errors import EnvironmentFault, first_line

Kind = Literal["cache", "toolchain", "resources", "runtime"]
T = TypeVar("T")

# What a loader says about a truncated or corrupt file: the dynamic loader (.so), marshal and
# pickle (cached graphs), zip (saved archives).
_CORRUPT = re.compile(
    r"file too short|invalid ELF header|cannot read file data|ELF load command|"
    r"not a dynamic executable|bad marshal data|pickle data was truncated|Ran out of input|"
    r"EOF read where object expected|unexpected end of data|File is not a zip file|"
    r"failed finding central directory"
)
_NO_SPACE = re.compile(r"No space left on device|Disk quota exceeded")
_NO_MEMORY = re.compile(
    r"out of memory|Cannot allocate memory|can't allocate memory|virtual memory exhausted|"
    r"Killed signal terminated program"
)
_COMPILERS = {
    "cc", "c++", "gcc", "g++", "clang", "clang++", "icx", "icpx", "icc", "icpc", "cl", "ld",
    "nvcc", "ptxas", "hipcc", "cc1", "cc1plus", "as",
}  # fmt: skip
# Compiler output that blames the machine, not the program: (pattern, what, only when the named
# thing is a compiler). The first two are raised by Inductor and Triton themselves.
_TOOLCHAIN: list[tuple[re.Pattern[str], str, bool]] = [
    (re.compile(r"No working C\+\+ compiler found"), "no working C++ compiler was found", False),
    (re.compile(r"Failed to find C compiler"), "Triton found no C compiler", False),
    (
        re.compile(r"(?:error trying to exec|cannot execute) '?([\w+.-]+)'?"),
        "the compiler driver cannot run {0}",
        False,
    ),
    (re.compile(r"cannot find -l([\w+.-]+)"), "the linker cannot find the library lib{0}", False),
    (
        re.compile(r"fatal error: ([\w/+.-]+\.h(?:pp)?): No such file or directory"),
        "the header {0} is not installed",
        False,
    ),
    (re.compile(r"([\w/+.-]+): (?:command )?not found"), "the tool {0} was not found", True),
]
_BUILDERS = ("cpp_builder", "triton/runtime/build", "triton/backends")
_CACHE_FRAMES = ("codecache", "autograd_cache", "cache_dir_utils", "triton/runtime/cache")


@dataclass(frozen=True)
class Fault:
    """What went wrong in the environment, and what a user does about it."""

    kind: Kind
    what: str  # in words: "a truncated Inductor cache artifact"
    path: str  # the artifact, tool or header ("" when none)
    clear: str  # the directory to remove ("" when none)
    exception: BaseException  # the original exception, unwrapped
    sure: bool = True  # False: the signature may also be a compiler bug (source it wrote)

    def advice(self) -> str:
        if self.kind == "cache":
            return f"clear it with: rm -r {self.clear}" if self.clear else "clear the cache"
        if self.kind == "toolchain":
            return (
                "install the missing tool, or point Inductor at a working one (CXX for C++, CC "
                "for Triton's launcher)"
            )
        if self.kind == "resources":
            return "free memory or disk, or run fewer tests at once (pytest -n)"
        return (
            "the loader crashes without the plugin too (the command below): use a torch build "
            "whose AOTInductor loads packages on this machine, or another backend"
        )

    def note(self) -> str:
        """For the report, after a retry with a fresh cache passed."""
        where = f" at {self.path}" if self.path else ""
        return (
            f"{self.what}{where} was bypassed (the compiled run was retried once with a fresh "
            f"Inductor cache, after: {first_line(self.exception)}): {self.advice()}"
        )

    def error(self, context: str, *, after: Fault | None = None) -> EnvironmentFault:
        """The EnvironmentFault that reports this fault instead of a parity verdict."""
        lines = [
            f"The compiled run failed because of its environment ({_KIND_NAMES[self.kind]}), "
            f"not because of what the compiler made of the program: {self.what}"
            + (f": {self.path}" if self.path else ""),
        ]
        if after is None:
            lines.append(f"  What to do: {self.advice()}")
        else:  # the first fault's cache is the one to clear; the fresh one is gone already
            lines.append(f"  What to do: {after.advice()}")
            lines.append(
                f"  It came back in a fresh, empty Inductor cache, after: {after.what}"
                + (f" at {after.path}" if after.path else "")
                + (
                    "; so check the disk and filesystem that hold the cache and temporary files"
                    if self.kind == "cache"
                    else ""
                )
            )
        lines += [
            f"  Original exception: {first_line(self.exception)}",
            "  No parity was shown, and no stage bisect or repro was made.",
            context,
        ]
        fault = EnvironmentFault("\n".join(lines))
        fault.__cause__ = self.exception
        return fault


_KIND_NAMES: dict[Kind, str] = {
    "cache": "the Inductor cache",
    "toolchain": "the C++/Triton toolchain",
    "resources": "resources",
    "runtime": "torch's runtime on this machine",
}


def classify(exc: BaseException | None, *, cached: bool = True) -> Fault | None:
    """The environment fault behind a compiled run's exception, or None (the compiler's own).

    With `cached` False (a backend that writes no Inductor cache: eager, aot_eager), a failure
    inside the backend compiler is the compiler's: no cache could have caused it, and a retry
    in a fresh one would only compile it twice."""
    if exc is None:
        return None
    original = _compat.user_exception(exc)
    chain = list(_chain(original))
    for find in (_resources, _toolchain, _cache, _runtime):
        for current in chain:
            fault = find(current, original)
            if fault is not None:
                return fault
    return _backend([exc, *chain], original) if cached else None


def recover(
    fault: Fault,
    run: Callable[[], T],
    exception_of: Callable[[T], BaseException | None],
    notes: list[str],
    context: str,
    *,
    before_retry: Callable[[], None] = lambda: None,
) -> T:
    """After a compiled run failed with `fault`: retry a cache fault once (`run`) with a fresh
    cache and return the retry's result, noting the bypass in `notes`; raise EnvironmentFault for
    any other fault, and for a cache fault that a fresh cache does not cure. `before_retry`
    runs first (the checker drops the failed run's counts there).

    A signature that may be the compiler's own (a cached source that does not parse, any other
    failure inside the backend compiler) and that a fresh cache reproduces is the compiler's: the
    retry's result is returned as it is.
    """
    __tracebackhide__ = True
    if fault.kind != "cache":
        raise fault.error(context)
    before_retry()
    with _compat.fresh_inductor_cache():  # classified inside: its paths lie in the fresh cache
        result = run()
        again = classify(exception_of(result))
    if again is not None and (again.kind != "cache" or again.sure):
        raise again.error(context, after=fault)
    if again is None:
        notes.append(fault.note())
    return result


# --- the four kinds -------------------------------------------------------------------------------


def _runtime(exc: BaseException, original: BaseException) -> Fault | None:
    if not isinstance(exc, _compat.LoaderCrash):
        return None
    what = "AOTInductor's package loader crashed the process that loaded the package"
    return Fault("runtime", what, exc.package, "", original)


def _resources(exc: BaseException, original: BaseException) -> Fault | None:
    text = str(exc)
    if isinstance(exc, torch.OutOfMemoryError | MemoryError) or _NO_MEMORY.search(text):
        return Fault("resources", "out of memory", "", "", original)
    if _errno(exc) == errno.ENOSPC or _NO_SPACE.search(text):
        path = getattr(exc, "filename", None) or ""
        return Fault("resources", "no space left on the device", str(path), "", original)
    return None


def _toolchain(exc: BaseException, original: BaseException) -> Fault | None:
    filename = getattr(exc, "filename", None)
    missing = isinstance(exc, FileNotFoundError | PermissionError) and isinstance(filename, str)
    if missing and (_is_compiler(str(filename)) or _raised_in(exc, _BUILDERS)):
        return Fault("toolchain", f"the tool {filename} was not found", str(filename), "", original)
    text = str(exc)
    compiler_output = _compat.is_cpp_compile_error(exc) or _raised_in(exc, _BUILDERS)
    for pattern, what, tools_only in _TOOLCHAIN:
        found = pattern.search(text)
        # Patterns naming something read only a compiler's output; the others are torch's own.
        if found is None or (found.groups() and not compiler_output):
            continue
        named = found.group(1) if found.groups() else ""
        if tools_only and not _is_compiler(named):
            continue
        return Fault("toolchain", what.format(named), named, "", original)
    return None


def _cache(exc: BaseException, original: BaseException) -> Fault | None:
    text = str(exc)
    cached = [path for path in _paths(exc) if _cache_root(path)]
    if isinstance(exc, SyntaxError) and cached:
        what = "a cached Inductor source file that does not parse"
        return Fault("cache", what, cached[0], _cache_root(cached[0]), original, sure=False)
    corrupt = _CORRUPT.search(text) or isinstance(exc, EOFError | pickle.UnpicklingError)
    if not corrupt:
        return None
    if cached:
        what = "a truncated Inductor cache artifact"
        return Fault("cache", what, cached[0], _cache_root(cached[0]), original)
    if _raised_in(exc, _CACHE_FRAMES):
        root = _compat.inductor_cache_dirs()[0]
        return Fault("cache", "a corrupt Inductor cache entry", "", root, original)
    return None


def _backend(raised: list[BaseException], original: BaseException) -> Fault | None:
    """Any other failure inside the backend compiler (`raised`: the compiled run's exception and
    what caused it): perhaps the cache's, perhaps the compiler's; the retry tells."""
    if not any(_compat.is_backend_compile_failure(exc) for exc in raised):
        return None
    root = _compat.inductor_cache_dirs()[0]
    what = "a failure inside the backend compiler (which a damaged cache causes too)"
    return Fault("cache", what, "", root, original, sure=False)


# --- helpers ----------------------------------------------------------------------------------


def _chain(exc: BaseException) -> Iterator[BaseException]:
    """`exc` and what caused it (__cause__, __context__), each once."""
    seen: set[int] = set()
    pending = [exc]
    while pending and len(seen) < 20:
        current = pending.pop(0)
        if id(current) in seen:
            continue
        seen.add(id(current))
        yield current
        pending += [e for e in (current.__cause__, current.__context__) if e is not None]


def _errno(exc: BaseException) -> int | None:
    return exc.errno if isinstance(exc, OSError) else None


def _paths(exc: BaseException) -> list[str]:
    """Absolute paths the exception names: its filename attributes, then its message."""
    named = [getattr(exc, key, None) for key in ("filename", "filename2", "path")]
    found = [p for p in named if isinstance(p, str) and os.path.isabs(p)]
    return found + re.findall(r"(/[^\s:'\"]+)", str(exc))


def _cache_root(path: str) -> str:
    """The cache directory `path` lies in ("" when none): one this process uses, or any
    `torchinductor_<user>` directory (another process's default)."""
    for root in _compat.inductor_cache_dirs():
        if path == root or path.startswith(root.rstrip("/") + "/"):
            return root
    parts = PurePath(path).parts
    for index, part in enumerate(parts):
        if part.startswith("torchinductor_"):
            return str(PurePath(*parts[: index + 1]))
    return ""


def _raised_in(exc: BaseException, marks: tuple[str, ...]) -> bool:
    """Whether a frame of the exception's traceback is in a torch or Triton file named by `marks`."""
    return any(
        ("torch" in frame.filename or "triton" in frame.filename)
        and any(mark in frame.filename for mark in marks)
        for frame in traceback.extract_tb(exc.__traceback__)
    )


def _is_compiler(path: str) -> bool:
    """A compiler, assembler or linker executable, versioned or not (`g++-13`, `/usr/bin/cc`)."""
    name = re.sub(r"-[\d.]+$", "", os.path.basename(path))
    return name in _COMPILERS or path in (os.environ.get("CXX"), os.environ.get("CC"))


__all__ = ["Fault", "classify", "recover"]
