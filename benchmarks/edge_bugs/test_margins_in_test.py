"""The margin tests as users write them: the margin in the test module, not in code under test.

Hypothesis collects no literal from a test file, so these margins reach the ties lattice only
because `tcst` reads the running test's own literals. Each margin rounds up in bfloat16 and
float16, where Inductor (torch 2.13, CPU) gets the gradient at ``x1 - x2 == margin`` wrong (see
ranking.py). Run this file alone: test_draw_bugs.py imports ranking.py, whose 2.9 Hypothesis
would collect as code under test.

    python3 -m pytest benchmarks/edge_bugs/test_margins_in_test.py --compile-backend=inductor \
        --hypothesis-seed=1 --hypothesis-profile=noshrink --compile-bisect=off -p no:cacheprovider
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings

from pytest_torchcompile import strategies as tcst

RANKED = tcst.tensor_groups(2, broadcast=False, requires_grad=True)


@pytest.mark.compile_parity
@settings(max_examples=100)
@given(xs=RANKED)
def test_margin_1_7(compile_parity, xs):
    compile_parity(lambda a, b: F.margin_ranking_loss(a, b, torch.ones_like(a), margin=1.7), *xs)


@pytest.mark.compile_parity
@settings(max_examples=100)
@given(xs=RANKED)
def test_margin_2_9(compile_parity, xs):
    compile_parity(lambda a, b: F.margin_ranking_loss(a, b, torch.ones_like(a), margin=2.9), *xs)


@pytest.mark.compile_parity
@settings(max_examples=100)
@given(xs=RANKED)
def test_margin_4_3(compile_parity, xs):
    compile_parity(lambda a, b: F.margin_ranking_loss(a, b, torch.ones_like(a), margin=4.3), *xs)
