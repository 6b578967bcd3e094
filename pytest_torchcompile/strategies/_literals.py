"""The program's own float literals (a margin, a threshold), which the ties lattice offers
beside its common constants."""

from __future__ import annotations

import functools
from collections.abc import Iterable

from hypothesis import strategies as st

from pytest_torchcompile import _compat
from pytest_torchcompile.judging import edges

# The program's own constants (a margin, a threshold) reach the ties lattice through Hypothesis:
# it collects the literals of the code under test (local modules other than test files) and
# returns one now and then where a strategy draws a float. Where this Hypothesis shows that
# collection, each ties draw puts all its short decimals on the lattice (there is nothing to
# draw: a margin written once in the model is on every ties lattice); elsewhere it draws this
# many floats and keeps the short decimals among them (about one float in fourteen is a local
# literal, so a program with a dozen float literals has any one of them in about half).
_LITERAL_DRAWS = 160
_LITERAL_LOW, _LITERAL_HIGH = 2.0**-10, 2.0**10  # the magnitudes of literals the lattice takes
_LITERAL_FLOATS = st.floats(min_value=_LITERAL_LOW, max_value=_LITERAL_HIGH)


def _literals(drawn: Iterable[float]) -> tuple[float, ...]:
    """The short decimals of `drawn` (three significant digits, not whole: the lattice of 1
    holds those) that are not lattice steps yet, as magnitudes within the literals' bounds."""
    magnitudes = {abs(x) for x in drawn if _LITERAL_LOW <= abs(x) <= _LITERAL_HIGH}
    short = {x for x in magnitudes if float(f"{x:.3g}") == x and x != round(x)}
    return tuple(sorted(short - set(edges.STEPS)))


@functools.lru_cache(maxsize=8)
def _collected_literals(collected: tuple[float, ...]) -> tuple[float, ...]:
    return _literals(collected)


_DRAWN_LITERALS = st.lists(_LITERAL_FLOATS, min_size=_LITERAL_DRAWS, max_size=_LITERAL_DRAWS).map(
    _literals
)


def program_literals() -> st.SearchStrategy[tuple[float, ...]]:
    """The program's short decimals: those Hypothesis has collected so far (modules load as the
    tests run, so this is asked at each draw), or drawn as floats where it does not say."""
    collected = _compat.hypothesis_local_floats()
    return _DRAWN_LITERALS if collected is None else st.just(_collected_literals(collected))
