"""Miscompiles that only some inputs reveal are caught by property tests written the natural way.

Each planted backend in planted.py is wrong only in one corner (a layout, a size, a dtype, a
value, a recompile, a dynamic-shape graph, a cache hit). The property tests in
hypothesis_properties.py use the strategies' defaults and Hypothesis's default max_examples, as a
user would write them; the defaults must reach every corner, and a failure must shrink to the
simplest input in it.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.plugin.test_hypothesis import HYPOTHESIS_SUMMARY

PROGRAM = (Path(__file__).parent / "hypothesis_properties.py").read_text()
CI = "--hypothesis-profile=parity-ci"  # the same examples every run (see conftest.py)

# planted backend -> (the property test that catches it, the shrunk input as the checker lists it)
CAUGHT = {
    "wrong_for_non_contiguous": (
        "test_softmax",
        "float32[2] strides=(?,) offset=0 cpu non-contig*",
    ),
    "wrong_for_storage_offset": ("test_softmax", "float32[] strides=() offset=1 cpu contiguous"),
    "wrong_for_zero_strides": ("test_softmax", "float32[2] strides=(0,) offset=0 *expanded"),
    "wrong_for_channels_last": ("test_conv_block", "float32[1, 2, 2, 1] *channels_last"),
    "wrong_for_size_one": ("test_softmax", "float32[1] strides=(1,) offset=0 cpu contiguous"),
    "crash_for_empty": ("test_softmax", "float32[0] strides=(1,) offset=0 cpu contiguous"),
    "wrong_tail_unless_multiple_of_16": ("test_softmax", "float32[] strides=() *contiguous"),
    "wrong_for_half_precision": ("test_softmax", "float16[] strides=() *contiguous"),
    "wrong_for_non_finite": ("test_softmax", "float32[] strides=() *contiguous"),
    # The edge-value classes: values, not layouts, so only the falsifying example is checked.
    "wrong_for_exact_differences": ("test_maximum", None),
    "wrong_for_large_offsets": ("test_softmax", None),
    "wrong_for_near_limits": ("test_softmax", None),
    "wrong_for_whole_row_sums": ("test_softmax", None),
    # These wrong results come from graphs or results that earlier examples left in the compile
    # cache they all share: whether an input fails depends on what ran before it, so shrinking
    # ends wherever that history allows, and Hypothesis may call the failure flaky. The test
    # still fails, showing the input that diverged.
    "wrong_after_recompile": ("test_calls_in_sequence", None),
    "wrong_for_dynamic_shapes": ("test_calls_in_sequence", None),
    "stale_cache": ("test_calls_in_sequence", None),
}


@pytest.mark.parametrize(
    "test", ["test_softmax", "test_maximum", "test_calls_in_sequence", "test_conv_block"]
)
def test_the_property_tests_pass_on_aot_eager(hypothesis_pytester, test):
    hypothesis_pytester.makepyfile(PROGRAM)
    result = hypothesis_pytester.runpytest("--compile-backend=aot_eager", CI, "-k", test)
    result.assert_outcomes(passed=1)


def test_the_op_level_property_tests_pass_on_inductor(hypothesis_pytester):
    # A CPU inductor compile takes 1-3 s and nearly every example compiles, so 100 examples take
    # minutes per test: CI runs a few; a bigger machine runs the whole file (see its docstring).
    hypothesis_pytester.makepyfile(PROGRAM)
    result = hypothesis_pytester.runpytest(
        "--compile-backend=inductor",
        "--hypothesis-profile=parity-few",
        "-k",
        "test_softmax or test_calls_in_sequence",
    )
    result.assert_outcomes(passed=2)


@pytest.mark.parametrize(("backend", "caught_by", "shrunk"), [(b, *c) for b, c in CAUGHT.items()])
@pytest.mark.usefixtures("planted_in_subprocesses")
def test_a_planted_miscompile_is_caught_and_shrunk(hypothesis_pytester, backend, caught_by, shrunk):
    hypothesis_pytester.makepyfile(PROGRAM)
    # In a fresh process: Hypothesis now and then draws a constant of the local modules loaded
    # (tensors() puts them on its ties lattice), and in this one those are whichever test modules
    # ran before, so which example is drawn, caught and shrunk to would depend on the run's order.
    # 500 examples: 100 hold a given class on most seeds, not all (a large offset in float32 or
    # float64: 8 of seeds 0-9), 300 on more (whole row sums: 10 of seeds 0-9), and a
    # derandomized run is one seed (Hypothesis 6.155's missed whole row sums in 300).
    result = hypothesis_pytester.runpytest_subprocess(
        f"--compile-backend=planted:{backend}",
        "--hypothesis-profile=parity-ci-500",
        "-k",
        caught_by,
    )
    result.assert_outcomes(failed=1)
    output = result.stdout.str()
    for shown in ("ParityError: Eager and compiled", f"backend=planted:{backend} "):
        assert shown in output
    assert re.search(HYPOTHESIS_SUMMARY, output), "no example reported by Hypothesis"
    if shrunk is not None:  # the simplest input in the corner, listed by the checker and noted
        shown = shrunk.replace("[", "[[]")  # as Hypothesis noted it when drawing it
        # Our lines in our order; where Hypothesis places its own notes varies across versions.
        result.stdout.fnmatch_lines(["*Inputs:", f"E  *input 0: {shown}"])
        result.stdout.fnmatch_lines(
            [f"*tensors() drew {shown}; rebuild it with build_tensor(TensorSpec(*"]
        )
        assert "Flaky" not in output
