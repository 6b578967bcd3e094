"""Real torch 2.13 CPU Inductor bugs that the default draws reach (integers and bools, the
swarm's layouts and value classes, the program's literals), tested as a user writes them: the
strategies at their defaults, no value-specific arguments, 100 examples. Each
fails on Inductor (caught) and passes on aot_eager:

    python3 -m pytest benchmarks/edge_bugs/test_draw_bugs.py --compile-backend=inductor \\
        --hypothesis-seed=0 --hypothesis-profile=noshrink -p no:cacheprovider

`benchmarks/edge_bugs/drawn.py` says, without compiling, which of the 100 examples of each test
holds the input a bug needs (the strategies below are its `TESTS`).
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from ranking import ranking_loss_1_1, ranking_loss_1_3, ranking_loss_2_9

from pytest_torchcompile import strategies as tcst

PAIRS = tcst.tensor_groups(2)
TENSORS = tcst.tensors()
RANKED = tcst.tensor_groups(2, broadcast=False, requires_grad=True)


# Compiled returns other strides than eager where one operand is transposed, permuted or
# channels_last and the other is not (the output follows the other operand's layout).
@pytest.mark.compile_parity
@settings(max_examples=100)
@given(xs=PAIRS)
def test_copysign(compile_parity, xs):
    compile_parity(torch.copysign, *xs)


# int8 and uint8 amin of 16 elements or more whose values are all positive is 0 compiled.
@pytest.mark.compile_parity
@settings(max_examples=100)
@given(x=TENSORS)
def test_amin(compile_parity, x):
    compile_parity(torch.amin, x)


# Eager has no ceil for bool ("ceil_vml_cpu" not implemented for 'Bool'); compiled returns one.
@pytest.mark.compile_parity
@settings(max_examples=100)
@given(x=TENSORS)
def test_ceil(compile_parity, x):
    compile_parity(torch.ceil, x)


# bfloat16 gradients where x1 - x2 is exactly the margin (see ranking.py).
@pytest.mark.compile_parity
@settings(max_examples=100)
@given(xs=RANKED)
def test_margin_2_9(compile_parity, xs):
    compile_parity(ranking_loss_2_9, *xs)


@pytest.mark.compile_parity
@settings(max_examples=100)
@given(xs=RANKED)
def test_margin_1_1(compile_parity, xs):
    compile_parity(ranking_loss_1_1, *xs)


# Margin 1.3 rounds down in bfloat16: compiled's loss differs from eager's, nearer float64.
@pytest.mark.compile_parity
@settings(max_examples=100)
@given(xs=RANKED)
def test_margin_1_3(compile_parity, xs):
    compile_parity(ranking_loss_1_3, *xs)
