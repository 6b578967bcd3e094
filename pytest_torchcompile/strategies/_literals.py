"""The program's own float literals (a margin, a threshold), which the ties lattice offers
beside its common constants: those Hypothesis collects from the code under test, and those of
the running test, which Hypothesis skips (it collects no test file)."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Iterable, Iterator
from types import CodeType
from typing import Any

from hypothesis import strategies as st

from pytest_torchcompile import _compat
from pytest_torchcompile.strategies import _edges

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
    return tuple(sorted(short - set(_edges.STEPS)))


@functools.lru_cache(maxsize=8)
def _collected_literals(collected: tuple[float, ...]) -> tuple[float, ...]:
    return _literals(collected)


_DRAWN_FLOATS = st.lists(_LITERAL_FLOATS, min_size=_LITERAL_DRAWS, max_size=_LITERAL_DRAWS)

_HELPER_DEPTH = 2  # the test's own helpers, and the helpers those call


def _codes(code: CodeType) -> Iterator[CodeType]:
    """`code` and the code it nests: inner functions, lambdas, closures, comprehensions."""
    yield code
    for const in code.co_consts:
        if isinstance(const, CodeType):
            yield from _codes(const)


def _written(function: object, depth: int, seen: set[CodeType]) -> Iterator[float]:
    """The float literals of `function`'s code, and of the functions and float constants of its
    own module that the code names, `depth` helpers deep."""
    code = getattr(function, "__code__", None)
    if not isinstance(code, CodeType) or code in seen:
        return
    seen.add(code)
    names: dict[str, object] = getattr(function, "__globals__", {})
    for nested in _codes(code):
        yield from (const for const in nested.co_consts if type(const) is float)
        for name in nested.co_names:
            found = names.get(name)
            if type(found) is float:
                yield found
            elif (
                depth
                and inspect.isfunction(found)
                and found.__module__ == getattr(function, "__module__", None)
            ):
                yield from _written(found, depth - 1, seen)


@functools.lru_cache(maxsize=256)
def own_literals(test: Callable[..., Any]) -> tuple[float, ...]:
    """The float literals written in the test `test` (see `_written`): Hypothesis collects none
    from a test file, so a margin a user writes in the test would never reach the lattice."""
    return tuple(_written(inspect.unwrap(test), _HELPER_DEPTH, set()))


def program_literals() -> st.SearchStrategy[tuple[float, ...]]:
    """The program's short decimals: those Hypothesis has collected so far (modules load as the
    tests run, so this is asked at each draw), or drawn as floats where it does not say, and
    those of the test running now, by the same rules."""
    test = _compat.hypothesis_test_function()
    own = own_literals(test) if test is not None else ()
    collected = _compat.hypothesis_local_floats()
    if collected is None:
        return _DRAWN_FLOATS.map(lambda drawn: _literals((*drawn, *own)))
    return st.just(_collected_literals((*collected, *own)))
