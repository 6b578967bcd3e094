"""A repro for every failure: callables pickle refuses are rebuilt from source and import path,
and one that cannot be rebuilt gets a repro.py that says which line to fill in."""

from __future__ import annotations

import pytest

from tests.plugin.test_triage import ALL_STAGES, run_copied

CASES = '''
import contextlib
import pytest, torch


@contextlib.contextmanager
def _guard():
    yield


class Entry:
    """Like an OpInfo entry: an operator, a sample generator wrapped in torch.no_grad() (which
    makes it a function local to torch's _wrap_generator) and a generator-based context manager
    (which holds an open generator)."""

    def __init__(self, op):
        self.op = op
        self.sample_inputs = torch.no_grad()(self._samples)
        self.guard = _guard()

    def _samples(self):
        yield torch.randn(4)


ENTRIES = [Entry(torch.sin)]  # like op_db


@pytest.mark.compile_parity
@pytest.mark.parametrize("entry", ENTRIES)
def test_table_entry(compile_parity, entry):
    compile_parity(lambda t: entry.op(t) * 2, torch.randn(4))


@pytest.mark.compile_parity
def test_local_entry(compile_parity):
    entry = Entry(torch.cos)
    compile_parity(lambda t: entry.op(t) + 1, torch.randn(4))


@pytest.mark.compile_parity
def test_local_function(compile_parity):
    def helper(t):
        return torch.tanh(t)

    def fn(t):
        return helper(t) * 3

    compile_parity(fn, torch.randn(4))


class TestScaled:
    def setup_method(self):
        self.scale = 2.0
        self.samples = torch.no_grad()(self._samples)

    def _samples(self):
        yield torch.ones(1)

    def scaled(self, t):
        return torch.sin(t) * self.scale

    @pytest.mark.compile_parity
    def test_bound_method(self, compile_parity):
        compile_parity(self.scaled, torch.randn(4))


@pytest.mark.compile_parity
def test_local_callable(compile_parity):
    class Doubler:
        def __call__(self, t):
            return t * 2

    compile_parity(Doubler(), torch.randn(4))
'''

REBUILT = [
    "test_table_entry[entry0]",
    "test_local_entry",
    "test_local_function",
    "test_bound_method",
]


@pytest.mark.parametrize("name", REBUILT)
def test_an_unpicklable_callable_gets_a_repro_that_reproduces(pytester, tmp_path, name):
    pytester.makepyfile(test_cases=CASES)
    result = pytester.runpytest(
        f"test_cases.py::{name.replace('test_bound_method', 'TestScaled::test_bound_method')}",
        "--compile-backend=planted:corrupt_output",
        "--compile-artifacts=out",
    )
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [f"E * {ALL_STAGES}planted:corrupt_output diverges", "E * repro: python *repro.py*"]
    )
    assert "could not be written" not in result.stdout.str()
    done = run_copied(next((pytester.path / "out").glob("*/repro.py")).parent, tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "the bug is present" in done.stdout


def test_the_placeholder_of_an_open_generator_is_named(pytester):
    pytester.makepyfile(test_cases=CASES)
    result = pytester.runpytest(
        "test_cases.py::test_local_entry",
        "--compile-backend=planted:corrupt_output",
        "--compile-artifacts=out",
    )
    result.stdout.fnmatch_lines(
        [
            "E * repro: test_local_entry.<locals>.<lambda>: entry.guard.gen could not be saved (a "
            "generator: TypeError: cannot pickle 'generator' object); repro.py holds a "
            "placeholder for it that raises if the replay uses it"
        ]
    )


def test_a_callable_that_cannot_be_rebuilt_gets_a_line_to_fill_in(pytester, tmp_path):
    pytester.makepyfile(test_cases=CASES)
    result = pytester.runpytest(
        "test_cases.py::test_local_callable",
        "--compile-backend=planted:corrupt_output",
        "--compile-artifacts=out",
    )
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "E * repro: python *repro.py*",
            "E * repro: a test_local_callable.<locals>.Doubler that cannot be constructed again: "
            "the class test_local_callable.<locals>.Doubler cannot be imported; "
            "repro.py saves the inputs: fill in its line `fn_0 = ...` (an instance of "
            "test_local_callable.<locals>.Doubler defined at *test_cases.py:*)",
        ]
    )
    repro = next((pytester.path / "out").glob("*/repro.py"))
    line = next(line for line in repro.read_text().splitlines() if line.startswith("fn_0 = ..."))
    assert "# FILL IN: the callable of checker call(s) 1 of test_cases.py::test_local_callable" in (
        line
    )
    unfilled = run_copied(repro.parent, tmp_path)
    assert unfilled.returncode == 2, unfilled.stdout + unfilled.stderr
    assert "fill in the line(s) `fn_0 = ...`" in unfilled.stdout
    repro.write_text(repro.read_text().replace(line, "fn_0 = lambda t: t * 2"))
    filled = run_copied(repro.parent, tmp_path)
    assert filled.returncode == 1, filled.stdout + filled.stderr
    assert "the bug is present" in filled.stdout
