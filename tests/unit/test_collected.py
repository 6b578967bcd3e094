"""Whether sessions together collected the whole suite: the fact that lets an update remove entries."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_torchcompile.counting.budgets import Collected, Scope, joined, relative_paths


def whole(suite: tuple[str, ...], *scopes: Scope) -> bool:
    return Collected(suite=suite, scopes=scopes).whole


@pytest.mark.parametrize(
    ("suite", "scopes", "expected"),
    [
        ((".",), [Scope((".",))], True),  # a plain pytest in the rootdir
        (("tests",), [Scope(("tests",))], True),  # testpaths, or `pytest tests` beside them
        (("tests",), [Scope((".",))], True),  # more than the suite
        (("tests",), [Scope((".",), ("docs",))], True),  # an --ignore outside the suite
        (("tests",), [], False),  # no session could vouch for its collection
        (("tests",), [Scope(("tests/a",))], False),  # one directory
        (("tests",), [Scope(("tests",), ("tests/a",))], False),  # all but one
        ((".",), [Scope(("tests",))], False),  # pytest run from a subdirectory
        (("tests", "examples"), [Scope(("tests",))], False),  # one of two testpaths
        # Directory shards: every directory, but not the rest of tests/ (a test_top.py there).
        (("tests",), [Scope(("tests/a",)), Scope(("tests/b",))], False),
        # ... with a shard for the rest, they cover it.
        (
            ("tests",),
            [Scope(("tests/a",)), Scope(("tests/b",)), Scope(("tests",), ("tests/a", "tests/b"))],
            True,
        ),
        # tests/a does not hold tests/ab: paths are compared by whole names.
        (
            ("tests",),
            [Scope(("tests/a",)), Scope(("tests",), ("tests/ab",))],
            False,
        ),
        # Files work as directories do.
        (("t",), [Scope(("t/test_x.py",)), Scope(("t",), ("t/test_x.py",))], True),
    ],
)
def test_whole_when_every_path_of_the_suite_lies_in_some_scope(
    suite: tuple[str, ...], scopes: list[Scope], expected: bool
) -> None:
    assert whole(suite, *scopes) is expected


NAMES = ("a", "ab")
# Every path of up to three levels over two names, one the prefix of the other: paths nest, sit
# beside each other and share leading characters.
PATHS = [".", *(f"{x}" for x in NAMES)]
PATHS += [f"{x}/{y}" for x in NAMES for y in NAMES]
PATHS += [f"{x}/{y}/{z}" for x in NAMES for y in NAMES for z in NAMES]
paths = st.lists(st.sampled_from(PATHS), min_size=1, max_size=2).map(tuple)
scopes = st.builds(Scope, paths, st.lists(st.sampled_from(PATHS), max_size=2).map(tuple))


def inside(path: str, root: str) -> bool:
    return root == "." or path == root or path.startswith(root + "/")


@given(suite=paths, scopes=st.lists(scopes, max_size=3))
def test_whole_is_the_same_as_trying_every_path(
    suite: tuple[str, ...], scopes: list[Scope]
) -> None:
    """The check tries only the paths it is told; here every path of a small tree is tried."""
    by_brute_force = all(
        any(
            any(inside(path, p) for p in s.paths) and not any(inside(path, i) for i in s.ignored)
            for s in scopes
        )
        for path in PATHS
        if any(inside(path, root) for root in suite)
    )
    assert whole(suite, *scopes) is by_brute_force


def test_joined_shards_keep_every_scope_node_id_and_skipped_collector() -> None:
    one = Collected(("tests",), (Scope(("tests/a",)),), frozenset({"t::x"}), frozenset({"m"}))
    two = Collected(("tests",), (Scope(("tests",), ("tests/a",)),), frozenset({"t::y"}))
    both = joined([one, two])
    assert both == Collected(
        ("tests",), (*one.scopes, *two.scopes), frozenset({"t::x", "t::y"}), frozenset({"m"})
    )
    assert both.whole and not one.whole and not two.whole


def test_relative_paths_are_posix_under_the_rootdir_and_dot_above_it(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    given_paths = [root / "tests" / "a", root, tmp_path, tmp_path / "elsewhere", root / "t.py"]
    assert relative_paths(root, given_paths) == (".", "t.py", "tests/a")
