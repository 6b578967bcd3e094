"""AOTAutograd drops `requires_grad` from an autograd.Function's output whose backward gives a
gradient only where `needs_input_grad[0]` (torch 2.13, CPU): with the first input constant and
the second a non-leaf that requires grad, eager's output requires grad and its backward runs;
compiled on `aot_eager` or `inductor`, the output does not, and `.backward()` raises "element 0
of tensors does not require grad". The `eager` backend (Dynamo alone) agrees with eager; a leaf
second input shows no difference.

    python benchmarks/aot_function_needs_input_grad.py            # aot_eager; exits 1 while it differs
    python benchmarks/aot_function_needs_input_grad.py inductor

Found by zero-change mode on pytorch-wavelets 1.3.0 (`tests/test_dwt.py::test_commutativity`
on `aot_eager`: DWTInverse's `SFB2D` returns its gradients only when its low-pass input wants
them, and the test's high-pass input is filled by an in-place slice copy)."""

import sys
from typing import Any

import torch


class LowPlusHigh(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, low: torch.Tensor, high: torch.Tensor) -> torch.Tensor:
        return low + high

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        if ctx.needs_input_grad[0]:  # as SFB2D: gradients only where the first input wants them
            return grad, grad
        return None, None


def combine(low: torch.Tensor, high: torch.Tensor) -> torch.Tensor:
    return LowPlusHigh.apply(low, high)


def main() -> int:
    backend = sys.argv[1] if len(sys.argv) > 1 else "aot_eager"
    low = torch.randn(4)
    leaf = torch.randn(4, requires_grad=True)
    eager = combine(low, leaf * 2.0)  # a non-leaf that requires grad, fresh for each side
    compiled = torch.compile(combine, backend=backend)(low, leaf * 2.0)
    print(
        f"backend {backend}: output requires grad: eager {eager.requires_grad}, "
        f"compiled {compiled.requires_grad}"
    )
    for side, out in (("eager", eager), ("compiled", compiled)):
        try:
            out.sum().backward()
            print(f"  {side}: backward ran")
        except RuntimeError as error:
            print(f"  {side}: backward raised: {error}")
    return 1 if eager.requires_grad != compiled.requires_grad else 0


if __name__ == "__main__":
    sys.exit(main())
