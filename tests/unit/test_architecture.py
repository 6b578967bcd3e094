"""The package's import structure: data flows one way, and no module reaches into another's privates.

Parsed with ast, not imported, so imports under ``TYPE_CHECKING`` and inside functions count too:
a cycle hidden behind a lazy import is still two rooms that import each other. Run as a script
(``python tests/unit/test_architecture.py``) it prints the package's import graph.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from pathlib import Path

PACKAGE = "pytest_torchcompile"
ROOT = Path(__file__).resolve().parents[2] / PACKAGE
INIT = "__init__"


def _modules() -> dict[str, ast.Module]:
    """Module name (``__init__`` for the package) -> its parsed source."""
    return {
        path.stem: ast.parse(path.read_text(encoding="utf-8"), str(path))
        for path in sorted(ROOT.glob("*.py"))
    }


def _is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _imports(tree: ast.Module, names: set[str]) -> Iterator[tuple[str, str | None, int]]:
    """(imported module, name taken from it or None, line) for each import of a package module."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                if parts[0] == PACKAGE:
                    yield (parts[1] if len(parts) > 1 else INIT), None, node.lineno
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level == 1:  # from . import x / from .x import y
                module = f"{PACKAGE}.{module}" if module else PACKAGE
            parts = module.split(".")
            if parts[0] != PACKAGE:
                continue
            if len(parts) > 1:
                for alias in node.names:
                    yield parts[1], alias.name, node.lineno
                continue
            for alias in node.names:  # from pytest_torchcompile import X: a module or a name
                if alias.name in names:
                    yield alias.name, None, node.lineno
                else:
                    yield INIT, alias.name, node.lineno


def _module_aliases(tree: ast.Module, names: set[str]) -> dict[str, str]:
    """Local name -> package module, for ``from pytest_torchcompile import parity`` and alike."""
    aliases = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == PACKAGE:
            for alias in node.names:
                if alias.name in names:
                    aliases[alias.asname or alias.name] = alias.name
    return aliases


def import_graph() -> dict[str, set[str]]:
    """Module -> the package modules it imports (anywhere in its source)."""
    trees = _modules()
    names = set(trees) - {INIT}
    return {
        module: {target for target, _, _ in _imports(tree, names) if target != module}
        for module, tree in trees.items()
    }


def _private_names_taken(
    tree: ast.Module, names: set[str], own: str | None = None
) -> Iterator[tuple[int, str]]:
    """(line, what) for each private name of a package module other than `own` that `tree`
    takes: ``from X import _name`` or ``X._name``."""
    for target, name, line in _imports(tree, names):
        if name is not None and _is_private(name) and target != own:
            yield line, f"from {PACKAGE}.{target} import {name}"
    aliases = _module_aliases(tree, names)
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in aliases
            and _is_private(node.attr)
        ):
            yield node.lineno, f"{aliases[node.value.id]}.{node.attr}"


def private_imports() -> list[str]:
    """Every use of another module's private name: ``from X import _name`` or ``X._name``.

    Importing a private *module* (``_compat``, ``_paths``) is how the package shares them; taking
    a private name out of any module is not.
    """
    trees = _modules()
    names = set(trees) - {INIT}
    return [
        f"{module}.py:{line}: {what}"
        for module, tree in trees.items()
        for line, what in _private_names_taken(tree, names, own=module)
    ]


TESTS = ROOT.parent / "tests"


def private_uses_in_tests() -> list[str]:
    """Every private name of a package module the tests take: they test through the seams the
    modules offer, as the modules do with each other (private modules such as ``_compat`` may
    be imported, as the package imports them)."""
    names = set(_modules()) - {INIT}
    found = []
    for path in sorted(TESTS.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        where = path.relative_to(TESTS.parent)
        found += [f"{where}:{line}: {what}" for line, what in _private_names_taken(tree, names)]
    return found


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle per strongly connected group of modules, e.g. ``[budgets, report, budgets]``."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    groups: list[list[str]] = []

    def visit(node: str) -> None:  # Tarjan's algorithm; the package is small enough to recurse
        index[node] = low[node] = len(index)
        stack.append(node)
        for succ in sorted(graph.get(node, ())):
            if succ not in index:
                visit(succ)
                low[node] = min(low[node], low[succ])
            elif succ in stack:
                low[node] = min(low[node], index[succ])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return [_cycle_through(group, graph) for group in sorted(groups)]


def _cycle_through(group: list[str], graph: dict[str, set[str]]) -> list[str]:
    """A shortest path from the group's first module back to itself, inside the group."""
    start, members = group[0], set(group)
    paths = {start: [start]}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for succ in sorted(graph[node] & members):
                if succ == start:
                    return [*paths[node], start]
                if succ not in paths:
                    paths[succ] = [*paths[node], succ]
                    following.append(succ)
        frontier = following
    raise AssertionError(f"no cycle through {group}")  # pragma: no cover


def test_no_import_cycles() -> None:
    cycles = import_cycles(import_graph())
    assert not cycles, "import cycles (including TYPE_CHECKING and function-level imports):\n" + (
        "\n".join("  " + " -> ".join(cycle) for cycle in cycles)
    )


def test_no_module_imports_another_modules_private_names() -> None:
    found = private_imports()
    assert not found, "private names used across modules:\n" + "\n".join(f"  {f}" for f in found)


def test_no_test_takes_a_private_name_of_the_package() -> None:
    found = private_uses_in_tests()
    assert not found, "private names the tests take:\n" + "\n".join(f"  {f}" for f in found)


def test_the_checks_see_cycles_and_private_imports() -> None:
    """The checks themselves: a planted cycle and private import are found."""
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": {"e"}}
    assert import_cycles(graph) == [["a", "b", "c", "a"]]
    tree = ast.parse(f"from {PACKAGE}.report import _numbered, summary_lines\n")
    assert [(t, n) for t, n, _ in _imports(tree, {"report"})] == [
        ("report", "_numbered"),
        ("report", "summary_lines"),
    ]


if __name__ == "__main__":
    for module, targets in sorted(import_graph().items()):
        print(f"{module}: {', '.join(sorted(targets))}")
    for cycle in import_cycles(import_graph()):
        print("cycle:", " -> ".join(cycle))
    for line in private_imports():
        print("private:", line)
    sys.exit(bool(import_cycles(import_graph()) or private_imports()))
