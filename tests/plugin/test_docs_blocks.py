"""Every fenced code block of README.md and docs/**/*.md is checked, one test case per block.

- ```python blocks are test modules: each runs through pytester with --compile-backend=aot_eager
  and a few derandomized Hypothesis examples, and must pass. A name a block uses without defining
  it that examples/models.py defines (`Attention`, `ConvBN`, ...) is imported from there: that is
  the docs' only preamble.
- ```console blocks: every `pytest` command parses with the plugin's options and configures
  (values validated), and the paths it names exist; `pip install` installs this project, its
  extras and pins that pyproject.toml allows; `python FILE` names a file of the repository, and
  `python -m pytest_torchcompile ...` parses with its command line.
- ```ini blocks configure pytest with no unknown key; ```json blocks are JSON, and a budget file
  is one the plugin reads; ```text blocks are outputs, whose error classes must exist.

A block that is not meant to run is marked in the markdown by `<!-- not run: reason -->` on the
line before its fence; it is reported as skipped with that reason. Case ids are `FILE:LINE` of
the opening fence.
"""

from __future__ import annotations

import ast
import builtins
import importlib
import json
import re
import shlex
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from pytest_torchcompile import cli, errors
from pytest_torchcompile.counting import budgets
from tests.plugin.loader import skip_where_the_loader_crashes

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
KINDS = ("python", "console", "ini", "json", "text")
FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>```+|~~~+)\s*(?P<lang>[\w-]*)")
NOT_RUN = re.compile(r"^\s*<!--\s*not run:\s*(?P<reason>.+?)\s*-->\s*$")
# An exception class at the start of a failure line: `E   pkg.mod.SomeError: ...`.
RAISED = re.compile(r"^E\s+(?P<name>(?:\w+\.)+\w+|[A-Z]\w*(?:Error|Exceed|Exception)\w*):")
# A local path to pip install, with extras: `.`, `".[dev]"`.
LOCAL = re.compile(r"(?P<path>\.[^\[]*)(?:\[(?P<extras>[^\]]*)\])?")
# Shell programs a block may run that these tests do not check, and why.
UNCHECKED_PROGRAMS = {"git": "version control around the plugin's commands"}


@dataclass(frozen=True)
class Block:
    """One fenced code block: where its fence opens, its language tag and its text."""

    path: Path
    line: int
    lang: str
    text: str
    not_run: str | None = None

    @property
    def id(self) -> str:
        return f"{self.path.relative_to(ROOT).as_posix()}:{self.line}"


def blocks_in(path: Path) -> list[Block]:
    """The fenced blocks of one markdown file, indented ones (inside list items) included."""
    lines = path.read_text(encoding="utf-8").splitlines()
    found: list[Block] = []
    i = 0
    while i < len(lines):
        opening = FENCE.match(lines[i])
        if opening is None:
            i += 1
            continue
        indent, fence = opening["indent"], opening["fence"]
        end = next(
            (j for j in range(i + 1, len(lines)) if lines[j].strip().startswith(fence)),
            len(lines),
        )
        body = [line.removeprefix(indent) for line in lines[i + 1 : end]]
        before = next((line for line in reversed(lines[:i]) if line.strip()), "")
        marked = NOT_RUN.match(before)
        text = "\n".join(body) + "\n"
        found.append(
            Block(path, i + 1, opening["lang"], text, marked["reason"] if marked else None)
        )
        i = end + 1
    return found


def doc_files() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("**/*.md"))]


BLOCKS = [block for path in doc_files() for block in blocks_in(path)]


def cases(lang: str) -> list[Any]:
    """The blocks of one language as test parameters; a block marked not run is skipped."""
    return [
        pytest.param(
            block,
            id=block.id,
            marks=[pytest.mark.skip(reason=f"not run: {block.not_run}")] if block.not_run else [],
        )
        for block in BLOCKS
        if block.lang == lang
    ]


def test_every_block_says_what_it_is() -> None:
    """A block without a known language tag would be checked by nothing."""
    unchecked = [f"{b.id} ({b.lang or 'no tag'})" for b in BLOCKS if b.lang not in KINDS]
    assert not unchecked, f"tag these blocks with one of {KINDS}: {unchecked}"


# --- python: test modules that pass ---


def free_names(source: str) -> set[str]:
    """Names the module reads but never binds (an over-approximation of what it binds is fine:
    only names a preamble could supply matter)."""
    tree = ast.parse(source)
    read: set[str] = set()
    bound: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            (read if isinstance(node.ctx, ast.Load) else bound).add(node.id)
        elif isinstance(node, ast.alias):
            bound.add((node.asname or node.name).split(".")[0])
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            bound.add(node.name)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
    return read - bound


def example_models() -> set[str]:
    """The classes and functions examples/models.py defines."""
    tree = ast.parse((EXAMPLES / "models.py").read_text(encoding="utf-8"))
    return {node.name for node in tree.body if isinstance(node, ast.ClassDef | ast.FunctionDef)}


def module_source(block: Block) -> str:
    """The block as a test module: the preamble it needs, then the block on its own line
    numbers, so a traceback points at the markdown's line."""
    needed = sorted(free_names(block.text) & example_models())
    preamble = [f"from models import {', '.join(needed)}  # examples/models.py"] if needed else []
    padding = [""] * max(0, block.line - len(preamble))
    return "\n".join([*preamble, *padding]) + "\n" + block.text


@pytest.mark.parametrize("block", cases("python"))
def test_python_block_passes(hypothesis_pytester: pytest.Pytester, block: Block) -> None:
    hypothesis_pytester.syspathinsert(EXAMPLES)
    name = "test_" + re.sub(r"\W", "_", block.id.lower())
    hypothesis_pytester.makepyfile(**{name: module_source(block)})
    result = hypothesis_pytester.runpytest(
        "--compile-backend=aot_eager", "--hypothesis-profile=parity-few", "-p", "no:cacheprovider"
    )
    skip_where_the_loader_crashes(result.stdout.str())
    assert result.ret == pytest.ExitCode.OK, f"{block.id} failed:\n{result.stdout.str()}"


# --- console: commands that parse ---


def commands(block: Block) -> Iterator[list[str]]:
    """Each command of a console block: the `$ ` lines if it has prompts (the rest is output),
    else every line; `a && b` is two commands."""
    lines = block.text.splitlines()
    prompted = [line[2:] for line in lines if line.startswith("$ ")]
    for line in prompted or [line for line in lines if line.strip()]:
        command: list[str] = []
        for word in [*shlex.split(line, comments=True), "&&"]:
            if word == "&&":
                if command:
                    yield command
                command = []
            else:
                command.append(word)


def check_pytest(pytester: pytest.Pytester, args: list[str]) -> None:
    """Options parse and their values pass the plugin's validation; named paths exist."""
    config = pytester.parseconfigure(*args)
    for arg in config.option.file_or_dir:
        path = ROOT / arg.split("::")[0]
        assert path.exists(), f"`pytest {shlex.join(args)}` names {arg}, which does not exist"


def pyproject() -> dict[str, Any]:
    """The [project] table of pyproject.toml."""
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    project: dict[str, Any] = tomllib.loads(text)["project"]
    return project


def check_pip_install(args: list[str]) -> None:
    """`pip install` of this project (its extras exist) and of pins its dependencies allow."""
    assert args[:1] == ["install"], f"only `pip install` is checked, not `pip {shlex.join(args)}`"
    project = pyproject()
    dependencies = {canonicalize_name(r.name): r for r in map(Requirement, project["dependencies"])}
    for spec in (arg for arg in args[1:] if not arg.startswith("-")):
        local = LOCAL.fullmatch(spec)
        if local:
            assert (ROOT / local["path"]).resolve() == ROOT, f"{spec} is not this project"
            extras = set(filter(None, (local["extras"] or "").split(",")))
            assert extras <= set(project["optional-dependencies"]), f"{spec}: unknown extras"
            continue
        wanted = Requirement(spec)
        if canonicalize_name(wanted.name) == canonicalize_name(project["name"]):
            continue  # this project, from an index or a wheel
        allowed = dependencies.get(canonicalize_name(wanted.name))
        assert allowed is not None, f"{wanted.name} is not a dependency in pyproject.toml"
        pinned = [s.version for s in wanted.specifier if s.operator == "=="]
        assert all(allowed.specifier.contains(v) for v in pinned), f"{spec} outside {allowed}"


@pytest.mark.parametrize("block", cases("console"))
def test_console_block_commands_are_real(pytester: pytest.Pytester, block: Block) -> None:
    for program, *args in commands(block):
        if program == "pytest":
            check_pytest(pytester, args)
        elif program == "pip":
            check_pip_install(args)
        elif program == "python" and args[:2] == ["-m", "pytest_torchcompile"]:
            cli.parser().parse_args(args[2:])  # exits 2 on a command it does not know
        elif program in ("python", "bash"):
            assert (ROOT / args[0]).is_file(), f"{block.id}: no file {args[0]}"
        else:
            assert program in UNCHECKED_PROGRAMS, f"{block.id}: no check for `{program}` commands"


# --- ini, json, text ---


@pytest.mark.parametrize("block", cases("ini"))
def test_ini_block_configures(pytester: pytest.Pytester, block: Block) -> None:
    pytester.makeini(block.text)
    pytester.makepyfile("def test_nothing():\n    pass\n")
    result = pytester.runpytest("--strict-config", "--collect-only", "-q")  # unknown keys fail
    assert result.ret == pytest.ExitCode.OK, f"{block.id}:\n{result.stderr.str()}"


@pytest.mark.parametrize("block", cases("json"))
def test_json_block_parses(tmp_path: Path, block: Block) -> None:
    data = json.loads(block.text)
    if isinstance(data, dict) and set(data) == {"format", "tests"}:  # a budget file
        (tmp_path / "budgets.json").write_text(block.text, encoding="utf-8")
        budgets.load(tmp_path / "budgets.json")


def exception_class(name: str) -> object:
    """The class a failure line names: qualified, or a plugin error, or a builtin."""
    module, _, attr = name.rpartition(".")
    if module:
        return getattr(importlib.import_module(module), attr, None)
    return getattr(errors, name, None) or getattr(builtins, name, None)


@pytest.mark.parametrize("block", cases("text"))
def test_text_block_names_real_errors(block: Block) -> None:
    named = [m["name"] for m in map(RAISED.match, block.text.splitlines()) if m]
    missing = [name for name in named if exception_class(name) is None]
    assert not missing, f"{block.id} shows errors that do not exist: {missing}"


# --- the extractor itself ---


def test_blocks_in_finds_indented_blocks_and_not_run_reasons(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "# t\n\n```python\nx = 1\n```\n\n- item\n  ```text\n  out\n  ```\n\n"
        "<!-- not run: a fragment -->\n```python\ny\n```\n",
        encoding="utf-8",
    )
    found = [(b.line, b.lang, b.text, b.not_run) for b in blocks_in(page)]
    assert found == [
        (3, "python", "x = 1\n", None),
        (8, "text", "out\n", None),
        (13, "python", "y\n", "a fragment"),
    ]


def test_a_block_gets_the_models_it_uses_on_its_own_line_numbers() -> None:
    block = Block(ROOT / "README.md", 3, "python", "import torch\nm = ConvBN(torch.nn)\n")
    source = module_source(block)
    assert source.splitlines()[0] == "from models import ConvBN  # examples/models.py"
    assert source.splitlines()[3] == "import torch"  # line 4: the first line after the fence
