"""The README's settings tables say what the option list says: names, flags, ini keys and defaults.

The option list in settings.py is the one source; the tables are prose around it, so each row's
names and default are compared with it, and a row that differs is named with its line.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from pytest_torchcompile.settings import SESSION_OPTIONS, TEST_OPTIONS, Option

README = Path(__file__).resolve().parents[2] / "README.md"
TEST_HEADER = ("marker key", "option", "ini key", "default")
SESSION_HEADER = ("option", "default")


@dataclass(frozen=True)
class Row:
    line: int  # 1-based, in README.md
    cells: tuple[str, ...]  # stripped, without backticks

    def where(self) -> str:
        return f"README.md:{self.line} (| {self.cells[0]} |)"


def _cells(line: str) -> tuple[str, ...]:
    return tuple(cell.strip().replace("`", "") for cell in line.strip().strip("|").split("|"))


def settings_tables(text: str) -> dict[tuple[str, ...], list[Row]]:
    """The tables of the "## Settings" section, keyed by their header less "meaning"."""
    lines = text.splitlines()
    start = lines.index("## Settings")
    end = next(i for i in range(start + 1, len(lines)) if lines[i].startswith("## "))
    tables: dict[tuple[str, ...], list[Row]] = {}
    rows: list[Row] | None = None
    for index in range(start + 1, end):
        line = lines[index]
        if not line.startswith("|"):
            rows = None  # a table ends at its first line that is not a row, a blank one included
        elif rows is None:
            rows = tables.setdefault(_cells(line)[:-1], [])
        elif not set(line) <= set("|-: "):  # not the --- separator
            rows.append(Row(index + 1, _cells(line)))
    return tables


def _test_row(option: Option) -> tuple[str, ...]:
    return (option.flag or "", option.ini or "", option.shown_default)


def _session_row(option: Option) -> tuple[str, ...]:
    return (option.shown_default,)


def table_problems(
    rows: list[Row],
    options: tuple[Option, ...],
    key: Callable[[Option], str],
    expected: Callable[[Option], tuple[str, ...]],
) -> list[str]:
    """What differs between a table and the options: a row naming no option, a row whose columns
    differ from its option's, an option in two rows or in none. `key` is what the first column
    names an option by; `expected` gives the other columns (less "meaning")."""
    by_key = {key(option): option for option in options}
    problems = []
    seen: set[str] = set()
    for row in rows:
        # "--compile-budgets PATH" names a flag (and its value); "rtol, atol" two options alike.
        first = row.cells[0]
        names = [first.split()[0]] if first.startswith("--") else first.replace(",", " ").split()
        columns = row.cells[1:-1]
        for name in names:
            option = by_key.get(name)
            if option is None:
                problems.append(f"{row.where()}: {name} is not in the option list")
                continue
            if name in seen:
                problems.append(f"{row.where()}: {name} has a row already")
            seen.add(name)
            if columns != expected(option):
                problems.append(
                    f"{row.where()}: {name} reads {' | '.join(columns)!r}, the option list says "
                    f"{' | '.join(expected(option))!r}"
                )
    problems += [f"no row for {name}" for name in by_key if name not in seen]
    return problems


@pytest.fixture(scope="module")
def tables() -> dict[tuple[str, ...], list[Row]]:
    return settings_tables(README.read_text(encoding="utf-8"))


def test_readme_marker_table_matches_the_option_list(tables):
    problems = table_problems(tables.pop(TEST_HEADER, []), TEST_OPTIONS, _name, _test_row)
    assert not problems, "README settings table differs from TEST_OPTIONS:\n" + "\n".join(problems)


def test_readme_session_table_matches_the_option_list(tables):
    problems = table_problems(tables.pop(SESSION_HEADER, []), SESSION_OPTIONS, _flag, _session_row)
    assert not problems, "README session settings table differs from SESSION_OPTIONS:\n" + (
        "\n".join(problems)
    )


def test_the_settings_section_has_just_these_two_tables():
    """A stray blank line splits a table: the rows after it render as raw text."""
    tables = settings_tables(README.read_text(encoding="utf-8"))
    assert set(tables) == {TEST_HEADER, SESSION_HEADER}, (
        f"expected the tables {TEST_HEADER} and {SESSION_HEADER} in README's Settings section, "
        f"found headers {sorted(tables)} (a blank line inside a table starts a new one)"
    )


def test_the_comparison_names_the_row_that_differs():
    text = "\n".join(
        [
            "## Settings",
            "| option | default | meaning |",
            "| --- | --- | --- |",
            "| `--compile-budgets PATH` | `yes` | budget file |",
            "| `--compile-nonsense` | none | ? |",
            "## Next",
        ]
    )
    rows = settings_tables(text)[SESSION_HEADER]
    problems = table_problems(rows, SESSION_OPTIONS[:2], _flag, _session_row)
    assert problems == [
        "README.md:4 (| --compile-budgets PATH |): --compile-budgets reads 'yes', "
        "the option list says 'none'",
        "README.md:5 (| --compile-nonsense |): --compile-nonsense is not in the option list",
        "no row for --compile-budgets-update",
    ]


def _name(option: Option) -> str:
    return option.name


def _flag(option: Option) -> str:
    return option.flag or option.name
