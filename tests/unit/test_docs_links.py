"""Every relative link of the project's markdown pages points somewhere real.

A link's file must exist (relative to the page that links it), and a `#anchor` must be the slug
of a heading of the page it names, as GitHub makes them. The pages also name no issue numbers or
sprint names of this project: they are read by users who never saw either.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FENCE = re.compile(r"^\s*(```+|~~~+)")
HEADING = re.compile(r"^#{1,6}\s+(?P<text>.+?)\s*#*\s*$")
CODE_SPAN = re.compile(r"`[^`]*`")
# [text](target) or [text](target "title"); the text may be empty once code spans are removed.
LINK = re.compile(r"\[[^\]]*\]\((?P<target>[^)\s]+)(?:\s+\"[^\"]*\")?\)")
EXTERNAL = re.compile(r"^[a-z][a-z0-9+.-]*:", re.IGNORECASE)
# "issue 10", "issue-10", "sprint 4", "last sprint", and a bare "#17" that names no repository.
PROJECT_TRACKER = re.compile(r"\bissues?[ -]#?\d+|\bsprints?\b|(?<![\w/.-])#\d+\b", re.IGNORECASE)


def docs() -> list[Path]:
    return sorted((ROOT / "docs").glob("**/*.md"))


def pages() -> list[Path]:
    """README.md, BENCHMARKS.md, docs/ and the notes beside the examples."""
    examples = sorted((ROOT / "examples").glob("**/*.md"))
    return [ROOT / "README.md", ROOT / "BENCHMARKS.md", *docs(), *examples]


def prose(path: Path) -> list[tuple[int, str]]:
    """The page's lines outside fenced code blocks, with their 1-based numbers."""
    found: list[tuple[int, str]] = []
    fence: str | None = None
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        opening = FENCE.match(line)
        if opening and fence is None:
            fence = opening[1]
        elif fence is not None and line.strip().startswith(fence):
            fence = None
        elif fence is None:
            found.append((number, line))
    return found


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: its text lower-cased, punctuation dropped, spaces to '-'."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link shows its text
    return re.sub(r"[^\w\- ]", "", text.lower()).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """The anchors of a page's headings; a repeated heading gets -1, -2, ... as on GitHub."""
    seen: Counter[str] = Counter()
    found = set()
    for _, line in prose(path):
        match = HEADING.match(line)
        if match:
            base = slug(match["text"])
            found.add(f"{base}-{seen[base]}" if seen[base] else base)
            seen[base] += 1
    return found


def links(path: Path) -> list[tuple[int, str]]:
    return [
        (number, match["target"])
        for number, line in prose(path)
        for match in LINK.finditer(CODE_SPAN.sub("", line))
        if not EXTERNAL.match(match["target"])
    ]


def broken(path: Path, target: str) -> str | None:
    """Why a relative link of `path` leads nowhere, or None."""
    file, _, anchor = target.partition("#")
    linked = (path.parent / file).resolve() if file else path
    if not linked.exists():
        return f"no file {shown(linked)}"
    if anchor and anchor not in anchors(linked):
        return f"no heading #{anchor} in {shown(linked)}"
    return None


def shown(path: Path) -> str:
    return path.relative_to(ROOT).as_posix() if path.is_relative_to(ROOT) else path.name


@pytest.mark.parametrize("path", pages(), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_relative_link_resolves(path: Path) -> None:
    problems = [
        f"{shown(path)}:{number}: ({target}): {why}"
        for number, target in links(path)
        if (why := broken(path, target))
    ]
    assert not problems, "links that lead nowhere:\n" + "\n".join(problems)


@pytest.mark.parametrize("path", pages(), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_no_issue_numbers_or_sprint_names(path: Path) -> None:
    text = path.read_text(encoding="utf-8").splitlines()
    found = [
        f"{shown(path)}:{number}: {match[0]!r}"
        for number, line in enumerate(text, start=1)
        for match in PROJECT_TRACKER.finditer(line)
    ]
    assert not found, "name the behaviour, not the issue or sprint:\n" + "\n".join(found)


def test_the_docs_pages_are_linked_from_the_readme() -> None:
    linked = {
        (ROOT / target.partition("#")[0]).resolve() for _, target in links(ROOT / "README.md")
    }
    orphans = [p.relative_to(ROOT).as_posix() for p in docs() if p.resolve() not in linked]
    assert not orphans, f"docs pages nothing in README.md links to: {orphans}"


def test_slugs_and_anchors_follow_github(tmp_path: Path) -> None:
    assert slug("What the plugin does under `@given`") == "what-the-plugin-does-under-given"
    assert slug("1. Record today's counts") == "1-record-todays-counts"
    assert slug("The stage, the repro and the compiler's artifacts") == (
        "the-stage-the-repro-and-the-compilers-artifacts"
    )
    page = tmp_path / "page.md"
    page.write_text("# A\n\n```python\n# not a heading\n```\n\n## A\n[x](#a-1) [y](#b)\n")
    assert anchors(page) == {"a", "a-1"}
    assert [broken(page, target) for _, target in links(page)] == [None, "no heading #b in page.md"]
    assert broken(page, "gone.md") == "no file gone.md"


def test_the_tracker_pattern_spares_upstream_references() -> None:
    assert not PROJECT_TRACKER.search("pytorch/pytorch#194547, a pytorch/pytorch issue")
    assert PROJECT_TRACKER.findall("issue 10, issue-12, sprint 4, #17") == [
        "issue 10",
        "issue-12",
        "sprint",
        "#17",
    ]
