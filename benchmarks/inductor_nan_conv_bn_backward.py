"""Inductor drops NaN from a bfloat16 Conv + BatchNorm + ReLU backward (torch 2.13, CPU).

    python benchmarks/inductor_nan_conv_bn_backward.py    # exits 1 while the bug is present

Found by the benchmark zoo's `test_conv_bn_any_image` on `inductor` (Hypothesis seeds 2 and 3:
a bfloat16 image holding a NaN): "grad of parameter 'conv.weight': NaN/inf in different
places ... eager nan, compiled 0.0" at 144 of 216 elements, the float64 reference NaN at all
216, stage TorchInductor. Here without the plugin: one NaN in a bfloat16 image in a row in
memory makes BatchNorm's batch mean NaN in every channel, so the convolution's weight gradient
is NaN everywhere in eager, in `aot_eager` and in float64; Inductor's is NaN only where the
NaN pixel itself enters (72 of 216) and 0.0 elsewhere. float32 keeps NaN everywhere on every
backend.
"""

from __future__ import annotations

import sys

import torch
from torch import nn


class ConvBN(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, kernel_size=3, padding=1)
        self.bn = nn.BatchNorm2d(8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.bn(self.conv(x)))


def weight_grad_nans(
    state: dict[str, torch.Tensor], x: torch.Tensor, dtype: torch.dtype, backend: str | None
) -> int:
    """How many elements of the convolution's weight gradient are NaN after `sum().backward()`."""
    torch._dynamo.reset()
    model = ConvBN()
    model.load_state_dict(state)
    model.to(dtype)
    run = torch.compile(model, backend=backend) if backend else model
    run(x.to(dtype)).sum().backward()
    grad = model.conv.weight.grad
    assert grad is not None
    return int(grad.isnan().sum())


def main() -> int:
    torch.manual_seed(0)
    state = ConvBN().state_dict()
    x = torch.randn(1, 3, 1, 255)
    x[0, 0, 0, 7] = float("nan")
    reference = weight_grad_nans(state, x, torch.float64, None)
    print(
        f"torch {torch.__version__}: NaN elements of grad conv.weight (of 216), float64 {reference}"
    )
    wrong = False
    for dtype in (torch.float32, torch.bfloat16):
        counts = {b: weight_grad_nans(state, x, dtype, b) for b in (None, "aot_eager", "inductor")}
        print(
            f"{dtype}: eager {counts[None]}, aot_eager {counts['aot_eager']}, "
            f"inductor {counts['inductor']}"
        )
        wrong = wrong or counts["inductor"] != counts[None]
    print("the bug is present" if wrong else "the bug is gone")
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
