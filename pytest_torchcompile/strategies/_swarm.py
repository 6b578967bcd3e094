"""Weighted choices and the swarm: which classes of input an example switches on, and how the
choices among them are ordered so that everything shrinks to no class on."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import TypeAlias

from hypothesis import strategies as st

from pytest_torchcompile.strategies._checks import T


def weighted(*choices: tuple[int, T]) -> st.SearchStrategy[T]:
    """Draw `value` with probability proportional to `weight`; the first choice is the shrink target."""
    return st.sampled_from([value for weight, value in choices for _ in range(weight)])


@functools.lru_cache(maxsize=4096)
def coin(on: int, out_of: int) -> st.SearchStrategy[bool]:
    """True in `on` draws of `out_of`; shrinks to False."""
    return weighted((out_of - on, False), (on, True))


Coins: TypeAlias = tuple[tuple[str, int, int], ...]
"""Swarm classes, each switched on in `on` examples `out_of`: (name, on, out_of)."""


@functools.lru_cache(maxsize=4096)
def swarm(coins: Coins) -> st.SearchStrategy[frozenset[str]]:
    """The classes switched on for one example: a swarm (Groce et al., "Swarm Testing", ISSTA
    2012). Drawing every class in every example at a small rate lets each new class dilute the
    others, and a feature that masks another (a NaN over a wrong value) is in nearly every
    example; switching a random subset on per example and drawing only from it keeps every class
    frequent and lets classes meet. Shrinks to no class on."""
    names = tuple(name for name, _, _ in coins)
    return st.tuples(*(coin(on, out_of) for _, on, out_of in coins)).map(
        lambda bits: frozenset(name for name, on in zip(names, bits, strict=True) if on)
    )


def simplest_last(
    classes: Sequence[tuple[int, T]], simplest: tuple[int, T] | None
) -> st.SearchStrategy[T]:
    """The classes a swarm switched on, weighted, and then the `simplest` choice; the simplest
    alone where none is on.

    Hypothesis replays mutated and misaligned choice sequences with each choice out of range
    replaced by the first one, which makes the first choice of a list several times as common
    as its weight says: kept first, the simplest would crowd out the classes switched on. Where
    none is on, it comes first, so shrinking (which switches classes off first) still ends on it.
    """
    if not classes and simplest is not None:
        return st.just(simplest[1])
    return weighted(*classes, *([simplest] if simplest is not None else []))
