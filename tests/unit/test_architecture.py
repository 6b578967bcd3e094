"""The package's shape: data flows one way, no module reaches into another's privates, and no
class runs over 200 lines nor any function over 80 (one job each).

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


def _name(path: Path) -> str:
    """A module's name relative to the package: ``runner``, ``judging.parity``, ``judging`` for
    a stage's ``__init__.py``, and ``__init__`` for the package's own."""
    parts = path.relative_to(ROOT).with_suffix("").parts
    if parts[-1] == INIT and len(parts) > 1:
        parts = parts[:-1]
    return ".".join(parts)


def _modules() -> dict[str, ast.Module]:
    """Module name (see `_name`) -> its parsed source, the stages' subpackages included."""
    return {
        _name(path): ast.parse(path.read_text(encoding="utf-8"), str(path))
        for path in sorted(ROOT.rglob("*.py"))
    }


def _file(module: str) -> str:
    """Where a module's source lives, relative to the package: ``judging/parity.py``."""
    path = ROOT.joinpath(*module.split("."))
    return (
        (path / f"{INIT}.py" if path.is_dir() else path.with_suffix(".py"))
        .relative_to(ROOT)
        .as_posix()
    )


def _is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _target(dotted: str, names: set[str]) -> str:
    """The package module an absolute ``pytest_torchcompile...`` name lies in: the longest
    prefix that is a module (``pytest_torchcompile.judging.parity`` -> ``judging.parity``), the
    package itself (``__init__``) for the bare package name."""
    parts = dotted.split(".")[1:]
    for end in range(len(parts), 0, -1):
        candidate = ".".join(parts[:end])
        if candidate in names:
            return candidate
    return ".".join(parts) or INIT


def _absolute(node: ast.ImportFrom, here: str | None) -> str:
    """The module a ``from ... import`` names, relative imports resolved against `here` (the
    importing module's own package, dotted; None outside the package: they are left as they are)."""
    module = node.module or ""
    if not node.level or here is None:
        return module
    base = here.split(".")[: len(here.split(".")) - node.level + 1]
    return ".".join([*base, module] if module else base)


def _from_imports(node: ast.ImportFrom, here: str | None) -> Iterator[tuple[str, ast.alias, str]]:
    """(module, alias, the package module the alias would be) for each name a ``from ... import``
    of the package takes; nothing for an import from elsewhere."""
    module = _absolute(node, here)
    if module.split(".")[0] != PACKAGE:
        return
    for alias in node.names:
        yield module, alias, ".".join([*module.split(".")[1:], alias.name])


def _imports(
    tree: ast.Module, names: set[str], here: str | None = None
) -> Iterator[tuple[str, str | None, int]]:
    """(imported module, name taken from it or None, line) for each import of a package module.

    `here` is the importing module's package (``pytest_torchcompile.judging``), for relative
    imports; importing a module out of a stage (``from pytest_torchcompile.judging import
    parity``) takes that module, not a name of the stage's ``__init__``.
    """
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == PACKAGE:
                    yield _target(alias.name, names), None, node.lineno
        elif isinstance(node, ast.ImportFrom):
            for module, alias, submodule in _from_imports(node, here):
                if submodule in names:  # from X import module: a module, no name of X's
                    yield submodule, None, node.lineno
                else:
                    yield _target(module, names), alias.name, node.lineno


def _module_aliases(tree: ast.Module, names: set[str], here: str | None = None) -> dict[str, str]:
    """Local name -> package module, for ``from pytest_torchcompile.judging import parity``,
    ``import pytest_torchcompile.judging.parity as parity`` and alike."""
    aliases = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            for _, alias, target in _from_imports(node, here):
                if target in names:
                    aliases[alias.asname or alias.name] = target
        elif isinstance(node, ast.Import):
            for alias in node.names:
                target = ".".join(alias.name.split(".")[1:])
                if alias.name.split(".")[0] == PACKAGE and alias.asname and target in names:
                    aliases[alias.asname] = target
    return aliases


def _package_of(module: str) -> str:
    """The package a module's relative imports start from: ``pytest_torchcompile.judging`` for
    ``judging.parity`` and for the stage ``judging`` itself (an ``__init__.py``)."""
    if module == INIT:
        return PACKAGE
    dotted = f"{PACKAGE}.{module}"
    return dotted if ROOT.joinpath(*module.split(".")).is_dir() else dotted.rpartition(".")[0]


def import_graph() -> dict[str, set[str]]:
    """Module -> the package modules it imports (anywhere in its source)."""
    trees = _modules()
    names = set(trees) - {INIT}
    return {
        module: {
            target
            for target, _, _ in _imports(tree, names, _package_of(module))
            if target != module
        }
        for module, tree in trees.items()
    }


def _private_names_taken(
    tree: ast.Module, names: set[str], own: str | None = None
) -> Iterator[tuple[int, str]]:
    """(line, what) for each private name of a package module other than `own` that `tree`
    takes: ``from X import _name`` or ``X._name``."""
    here = _package_of(own) if own is not None else None
    for target, name, line in _imports(tree, names, here):
        if name is not None and _is_private(name) and target != own:
            yield line, f"from {PACKAGE}.{target} import {name}"
    aliases = _module_aliases(tree, names, here)
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
        f"{_file(module)}:{line}: {what}"
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


def stage_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """Stage -> the stages its modules import: the graph with each subpackage one node."""
    stages: dict[str, set[str]] = {}
    for module, targets in graph.items():
        stage = module.split(".")[0]
        if ROOT.joinpath(stage).is_dir():
            found = {t.split(".")[0] for t in targets} - {stage}
            stages.setdefault(stage, set()).update(s for s in found if ROOT.joinpath(s).is_dir())
    return stages


def test_the_stages_import_each_other_one_way() -> None:
    """A stage (running, judging, ...) that imports another is never imported back by it, so
    the subpackages read as the pipeline's order."""
    stages = stage_graph(import_graph())
    assert len(stages) >= 5
    cycles = import_cycles(stages)
    assert not cycles, "stages that import each other:\n" + (
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
    tree = ast.parse(f"from {PACKAGE}.counting.report import _numbered, summary_lines\n")
    assert [(t, n) for t, n, _ in _imports(tree, {"counting", "counting.report"})] == [
        ("counting.report", "_numbered"),
        ("counting.report", "summary_lines"),
    ]


def test_the_checks_see_modules_through_their_stages() -> None:
    """A module is reached however it is imported: out of its stage, whole, or relatively."""
    names = {"errors", "judging", "judging.parity", "judging.rules"}
    tree = ast.parse(
        f"from {PACKAGE} import errors, ParityError\n"
        f"from {PACKAGE}.judging import parity, _hidden\n"
        f"import {PACKAGE}.judging.rules as rules\n"
        "from . import rules as same\n"
        "from .parity import compare\n"
        "rules._tolerance, same._tolerance\n"
    )
    assert [(t, n) for t, n, _ in _imports(tree, names, f"{PACKAGE}.judging")] == [
        ("errors", None),
        (INIT, "ParityError"),
        ("judging.parity", None),
        ("judging", "_hidden"),
        ("judging.rules", None),
        ("judging.rules", None),
        ("judging.parity", "compare"),
    ]
    taken = [what for _, what in _private_names_taken(tree, names, own="judging.parity")]
    assert taken == [
        f"from {PACKAGE}.judging import _hidden",
        "judging.rules._tolerance",
        "judging.rules._tolerance",
    ]
    assert _file("judging.parity") == "judging/parity.py"
    assert _file("judging") == "judging/__init__.py"
    assert _file(INIT) == "__init__.py"


CLASS_LINES = 200  # the floors issue 52 sets: a longer class or function holds more than one job
FUNCTION_LINES = 80


def _definitions(
    node: ast.AST, prefix: str = ""
) -> Iterator[tuple[str, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef]]:
    """(qualified name, node) for each class and function in `node`, nested ones included."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            name = f"{prefix}{child.name}"
            yield name, child
            yield from _definitions(child, f"{name}.")
        else:
            yield from _definitions(child, prefix)


def oversized(trees: dict[str, ast.Module]) -> list[str]:
    """`file:line: name (N lines, over M)` for each class over CLASS_LINES lines and each
    function or method over FUNCTION_LINES (end_lineno - lineno + 1) in `trees` (see `_modules`)."""
    found = []
    for module, tree in trees.items():
        for name, node in _definitions(tree):
            limit = CLASS_LINES if isinstance(node, ast.ClassDef) else FUNCTION_LINES
            lines = (node.end_lineno or node.lineno) - node.lineno + 1
            if lines > limit:
                found.append(f"{_file(module)}:{node.lineno}: {name} ({lines} lines, over {limit})")
    return found


def test_no_class_over_200_lines_and_no_function_over_80() -> None:
    found = oversized(_modules())
    floors = f"classes over {CLASS_LINES} lines or functions over {FUNCTION_LINES}"
    assert not found, f"{floors} (split by concern, not in halves):\n" + "\n".join(
        f"  {f}" for f in found
    )


def test_the_size_check_sees_classes_and_nested_functions() -> None:
    body = "".join(f"        x{i} = {i}\n" for i in range(FUNCTION_LINES))
    tree = ast.parse(f"class Big:\n    def method(self):\n{body}")
    assert oversized({"judging.parity": tree}) == [
        f"judging/parity.py:2: Big.method ({FUNCTION_LINES + 1} lines, over {FUNCTION_LINES})"
    ]
    tall = ast.parse("class Tall:\n" + "    x = 1\n" * CLASS_LINES)
    assert oversized({"judging.parity": tall}) == [
        f"judging/parity.py:1: Tall ({CLASS_LINES + 1} lines, over {CLASS_LINES})"
    ]
    assert oversized({"judging.parity": ast.parse("def small():\n    pass\n")}) == []


if __name__ == "__main__":
    for module, targets in sorted(import_graph().items()):
        print(f"{module}: {', '.join(sorted(targets))}")
    for cycle in import_cycles(import_graph()):
        print("cycle:", " -> ".join(cycle))
    for line in private_imports():
        print("private:", line)
    sys.exit(bool(import_cycles(import_graph()) or private_imports()))
