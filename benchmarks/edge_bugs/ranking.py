"""The code under test of the margin tests: ranking losses with margins as a program writes them.

This is an ordinary module (not a test file), so Hypothesis collects its literals and, now and
then, returns one where a strategy draws a float; the ties lattice of `tcst.tensor_groups()`
draws its constants that way, so two tensors differ by exactly such a margin. Each margin is one
where Inductor (torch 2.13, CPU) gets bfloat16's gradient wrong: it keeps the margin in float32
where eager rounds it to bfloat16, and these margins round up, so where ``x1 - x2`` is exactly
the rounded margin eager sits on the hinge's kink (its gradient passes) and compiled just below
it (its gradient is 0). Margins that round down (1.3, 0.37) move the loss, not the gradient,
and there compiled is the one nearer the float64 reference.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def ranking_loss_2_9(x1: torch.Tensor, x2: torch.Tensor) -> torch.Tensor:
    return F.margin_ranking_loss(x1, x2, torch.ones_like(x1), margin=2.9)


def ranking_loss_1_1(x1: torch.Tensor, x2: torch.Tensor) -> torch.Tensor:
    return F.margin_ranking_loss(x1, x2, torch.ones_like(x1), margin=1.1)


def ranking_loss_1_3(x1: torch.Tensor, x2: torch.Tensor) -> torch.Tensor:
    return F.margin_ranking_loss(x1, x2, torch.ones_like(x1), margin=1.3)
