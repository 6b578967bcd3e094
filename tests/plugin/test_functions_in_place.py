"""--compile-parity-functions never changes a verdict: a suite's functions are intercepted in place.

Each case once failed on `none` only because its functions were intercepted: what the library
made at import still holds the function itself (pickled by name, a registry keyed by it), a
generator function is still one, and a cache keyed by objects, kept in a dict subclass that lists
its keys, is copied as it is.
"""

from __future__ import annotations

import pytest

LIBRARY = """
import torch

def available():
    return False

def double(x):
    return x * 2

def halves(x):
    yield from x.chunk(2)

REGISTRY = {double: "double"}

class Holder:
    def __init__(self):
        self.fn = available

class LRU(dict):
    '''Evicts the least recently set key, as torchsde's Brownian interval cache does.'''

    def __init__(self, size):
        super().__init__()
        self.size = size
        self.order = []

    def __setitem__(self, key, value):
        if key in self:
            self.order.remove(key)
        elif len(self) >= self.size:
            del self[self.order.pop(0)]
        super().__setitem__(key, value)
        self.order.append(key)

class Node:
    pass

class Path:
    def __init__(self, size, nodes):
        self.cache = LRU(size)
        self.nodes = [Node() for _ in range(nodes)]

def walk(path, x):
    '''Each node's value, cached by the node object.'''
    total = x
    for i, node in enumerate(path.nodes):
        if node not in path.cache:
            path.cache[node] = x * (i + 1)
        total = total + path.cache[node]
    return total
"""

SUITE = """
import inspect, pickle, torch
import plib

HELD = plib.Holder()  # made at collection, holding the function itself

def test_what_import_made_still_holds_the_function():
    assert plib.double(torch.ones(2)).tolist() == [2.0, 2.0]
    assert pickle.loads(pickle.dumps(HELD)).fn is plib.available
    assert plib.REGISTRY[plib.double] == "double"
    assert inspect.isgeneratorfunction(plib.halves) and len(list(plib.halves(torch.ones(2)))) == 2

def test_a_cache_keyed_by_objects():
    path = plib.Path(size=2, nodes=3)
    plib.walk(path, torch.ones(2))
    assert plib.walk(path, torch.ones(2)).tolist() == [7.0, 7.0]
    assert len(path.cache.order) == 2 and set(path.cache.order) == set(path.cache)
"""


@pytest.fixture
def suite(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makepyfile(**{"plib/__init__.py": LIBRARY, "test_suite": SUITE})
    return pytester


def _run(pytester: pytest.Pytester, backend: str, *args: str) -> pytest.RunResult:
    return pytester.runpytest(
        "--compile-parity=all",
        "--compile-parity-functions=plib",
        f"--compile-backend={backend}",
        "-p",
        "no:cacheprovider",
        *args,
    )


@pytest.mark.parametrize("backend", ["none", "aot_eager"])
def test_a_correct_backend_passes_with_every_call_checked(suite, backend):
    result = _run(suite, backend)
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(
        [
            "*intercepted function calls in 2 test(s): 3 checked, 0 diverged, 0 checked partly*",
            "*plib.halves: not wrapped: a generator or coroutine function (its calls return*",
        ]
    )


@pytest.mark.parametrize(
    ("test", "function"),
    [("import_made", "plib.double"), ("cache_keyed", "plib.walk")],
)
def test_a_wrong_backend_still_fails_the_functions_output(suite, test, function):
    result = _run(suite, "planted:corrupt_output", "-k", test)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([f"*function call 1 ({function}), differing at output*"])
