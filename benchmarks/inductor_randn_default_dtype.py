"""Inductor ignores the default dtype in `torch.randn(n)` (torch 2.13, CPU): float32, not float64.

    python benchmarks/inductor_randn_default_dtype.py    # exits 1 while the bug is present

Found by zero-change mode on Pyro 1.9's own suite (`tests/nn/test_module.py::
test_torch_serialize_decorators[True]`, `--compile-parity=all --compile-backend=inductor`: Pyro's
tests set the default dtype to float64, and a `PyroParam` initialised by `torch.randn(size)`
came out float32 when compiled as the user compiles it: "parameter 'y_unconstrained': dtype:
eager torch.float64, compiled torch.float32", stage TorchInductor). Here without the plugin: a
function drawing `torch.randn(3)` under `torch.set_default_dtype(torch.float64)`, eagerly and
compiled with each backend; `torch.zeros(3)` beside it keeps float64 everywhere. With
`torch._inductor.config.fallback_random=True` (ATen's own kernel) the dtype is right.
"""

from __future__ import annotations

import sys

import torch


def draw(n: int) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.randn(n), torch.zeros(n)


def main() -> int:
    torch.set_default_dtype(torch.float64)
    eager = [t.dtype for t in draw(3)]
    print(f"torch {torch.__version__}: eager {eager}")
    wrong = False
    for backend, fallback in (("aot_eager", False), ("inductor", False), ("inductor", True)):
        torch._dynamo.reset()
        with torch._inductor.config.patch(fallback_random=fallback):
            compiled = [t.dtype for t in torch.compile(draw, backend=backend)(3)]
        print(f"{backend} (fallback_random={fallback}): {compiled}")
        wrong = wrong or compiled != eager
    print("the bug is present" if wrong else "the bug is gone")
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
