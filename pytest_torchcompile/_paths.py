"""Whose source files are whose: the user's, libraries', and the infrastructure's (torch, the
standard library and the test runner), by their paths."""

from __future__ import annotations

import functools
import importlib.util
import os
import site
import sys
import sysconfig

import torch


def _dirs(*paths: str) -> tuple[str, ...]:
    return tuple(os.path.join(os.path.realpath(path), "") for path in paths if path)


_BASE = {"base": sys.base_prefix, "platbase": sys.base_exec_prefix}
_STDLIB = _dirs(
    sysconfig.get_paths(vars=_BASE)["stdlib"], sysconfig.get_paths(vars=_BASE)["platstdlib"]
)
_TORCH = _dirs(os.path.dirname(torch.__file__))
_SITE = _dirs(
    *site.getsitepackages(),
    sysconfig.get_paths()["purelib"],
    sysconfig.get_paths()["platlib"],
    site.getusersitepackages(),
)
"""Where installed packages live: a virtual environment's, the system's it sees (which lies
inside the standard library's folder), and the user's."""


def _package_dirs(*names: str) -> tuple[str, ...]:
    """Where each of these top-level packages lives, found without importing it."""
    found: list[str] = []
    for name in names:
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            continue
        if spec is not None:
            found += list(spec.submodule_search_locations or [])
            if spec.origin and not spec.submodule_search_locations:
                found.append(spec.origin)
    return tuple(os.path.realpath(path) for path in found)


_RUNNER = _package_dirs(
    "functorch",
    "triton",
    "numpy",
    "sympy",
    "mpmath",
    "pytest",
    "_pytest",
    "pluggy",
    "hypothesis",
    "xdist",
    "execnet",
    "typing_extensions",
    "pytest_torchcompile",
)
"""Packages that are the infrastructure, not the program: torch's own dependencies, the test
runner, and the plugin."""


def is_torch_or_stdlib(filename: str) -> bool:
    """torch's or Python's own source, never the code under test."""
    real = _real(filename)
    return real.startswith(_TORCH) or (real.startswith(_STDLIB) and not real.startswith(_SITE))


def is_user_file(filename: str) -> bool:
    """The user's own code: not torch's, Python's or an installed package's (nor the plugin's)."""
    return not is_torch_or_stdlib(filename) and not _real(filename).startswith(_SITE + _RUNNER)


def is_followed(filename: str) -> bool:
    """The program's code, the user's or a library's: not the infrastructure's."""
    return not is_torch_or_stdlib(filename) and not _real(filename).startswith(_RUNNER)


@functools.lru_cache(maxsize=4096)
def _real(filename: str) -> str:
    """A source file's real path, resolved once: the walks over a callable's code ask for the
    same few files thousands of times in a test (a realpath is a system call per component)."""
    return os.path.realpath(filename)
