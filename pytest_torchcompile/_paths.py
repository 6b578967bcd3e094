"""Which source files are the user's: torch and the standard library are not, by their paths."""

from __future__ import annotations

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
    return os.path.realpath(filename).startswith(dirs)
