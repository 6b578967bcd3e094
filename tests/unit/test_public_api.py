"""The public API's documentation: what each entry point takes, raises and how it is used.

Docstrings are the reference a user reads (``help()``, ``pytest --fixtures``, an IDE), so each
public entry point says what it raises and shows an example, the strategies' examples run, the
list of keys assert_compile_parity documents is the marker's, and every note the plugin adds
to an error starts with the one prefix.
"""

from __future__ import annotations

import ast
import functools
import inspect
import re
import textwrap
from pathlib import Path
from typing import Any

import pytest
import torch
from hypothesis import given, settings

from pytest_torchcompile import errors, fixtures
from pytest_torchcompile import strategies as tcst
from pytest_torchcompile.runner import Checker, assert_compile_parity
from pytest_torchcompile.settings import MARKER_KEYS

PACKAGE = Path(__file__).resolve().parents[2] / "pytest_torchcompile"
STRATEGY_FUNCTIONS = [
    getattr(tcst, name) for name in tcst.__all__ if inspect.isfunction(getattr(tcst, name))
]
ENTRY_POINTS = [assert_compile_parity, Checker.__call__, fixtures.compile_parity]


def _doc(obj: Any) -> str:
    return inspect.getdoc(getattr(obj, "__wrapped__", obj)) or ""


def test_assert_compile_parity_names_every_marker_key():
    documented = set(re.findall(r"``(\w+)``", _doc(assert_compile_parity)))
    missing = [key for key in MARKER_KEYS if key not in documented]
    assert not missing, f"assert_compile_parity's docstring does not name {missing}"
    assert "MARKER_KEYS" in _doc(assert_compile_parity)


@pytest.mark.parametrize("entry", ENTRY_POINTS, ids=lambda f: f.__qualname__)
def test_entry_points_say_what_they_raise_and_show_an_example(entry):
    doc = _doc(entry)
    assert "ParityError" in doc and "Example::" in doc, doc


@pytest.mark.parametrize("function", STRATEGY_FUNCTIONS, ids=lambda f: f.__name__)
def test_each_strategy_says_what_it_raises_and_its_example_runs(function):
    doc = _doc(function)
    assert ":raises" in doc or "raises nothing" in doc.lower(), f"{function.__name__}: {doc}"
    example = _example(doc)
    assert example, f"{function.__name__} shows no example"
    namespace: dict[str, Any] = {
        "torch": torch,
        "tcst": tcst,
        "functools": functools,
        "pytest": pytest,
        "given": _quick_given,
    }
    exec(compile(example, f"<{function.__name__} example>", "exec"), namespace)
    for name, test in namespace.items():
        if name.startswith("test_"):
            test(compile_parity=_eager_only)


def _example(doc: str) -> str:
    """The indented block after the docstring's ``Example...::`` line."""
    lines = doc.splitlines()
    start = next((i for i, line in enumerate(lines) if line.rstrip().endswith("::")), None)
    if start is None:
        return ""
    block = []
    for line in lines[start + 1 :]:
        if line.strip() and not line.startswith(" "):
            break
        block.append(line)
    return textwrap.dedent("\n".join(block)).strip()


def _quick_given(*args: Any, **kwargs: Any) -> Any:
    def decorate(test: Any) -> Any:
        quick = settings(max_examples=5, derandomize=True, database=None, deadline=None)
        return quick(given(*args, **kwargs)(test))

    return decorate


def _eager_only(fn: Any, *args: Any, **kwargs: Any) -> Any:
    """Stands in for the fixture: the examples are about what the strategies draw."""
    return fn(*args, **kwargs)


def test_every_note_starts_with_the_one_prefix():
    """No module spells out a prefix of its own: notes and warnings use errors.NOTE_PREFIX."""
    prefixes = ("pytest-torchcompile:", "pytest_torchcompile:", "torchcompile:", "compile_parity:")
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):  # the stages' subpackages too
        tree = ast.parse(path.read_text(encoding="utf-8"))
        docstrings = {
            id(node.body[0].value)
            for node in ast.walk(tree)
            if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
            and node.body
            and isinstance(node.body[0], ast.Expr)
            and isinstance(node.body[0].value, ast.Constant)
        }
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Constant)
                and isinstance(node.value, str)
                and id(node) not in docstrings
                and node.value.lstrip().startswith(prefixes)
                and not (path == PACKAGE / "errors.py" and node.value == errors.NOTE_PREFIX)
            ):
                found.append(f"{path.relative_to(PACKAGE)}:{node.lineno}: {node.value[:60]!r}")
    assert not found, "notes that spell out their own prefix (use errors.NOTE_PREFIX):\n" + (
        "\n".join(found)
    )


def test_every_exception_a_user_can_meet_is_importable_from_the_package():
    """A user catches what the checker raises from the package itself, not from its modules."""
    import pytest_torchcompile

    raised = {
        name
        for name, value in vars(errors).items()
        if isinstance(value, type)
        and issubclass(value, BaseException)
        and value.__module__ == errors.__name__
    }
    assert raised <= set(pytest_torchcompile.__all__)
    assert all(getattr(pytest_torchcompile, name) is getattr(errors, name) for name in raised)
