"""Which source files are the user's: torch and the standard library are not, by their paths."""

from __future__ import annotations

import functools
import os
import sysconfig

import torch


def _dirs(*paths: str) -> tuple[str, ...]:
    return tuple(os.path.join(os.path.realpath(path), "") for path in paths)


TORCH_AND_STDLIB = _dirs(
    os.path.dirname(torch.__file__),
    sysconfig.get_paths()["stdlib"],
    sysconfig.get_paths()["platstdlib"],
)
"""Frames here are torch's or Python's, never the code under test."""

INSTALLED = _dirs(sysconfig.get_paths()["purelib"], os.path.dirname(__file__))
"""Installed packages and the plugin itself: not the user's own code either."""


def is_under(filename: str, dirs: tuple[str, ...]) -> bool:
    return _real(filename).startswith(dirs)


@functools.lru_cache(maxsize=4096)
def _real(filename: str) -> str:
    """A source file's real path, resolved once: the walks over a callable's code ask for the
    same few files thousands of times in a test (a realpath is a system call per component)."""
    return os.path.realpath(filename)
