"""A parameter whose `.data` is set inside a compiled forward gets no gradient from
`torch.autograd.grad` (torch 2.13, CPU; AOTAutograd and Inductor, not Dynamo alone).

    python benchmarks/aot_data_setter_grad.py    # exits 1 while the bug is present

Found by zero-change mode on normflows 1.7's own suite (`GlowTest::test_glow`,
`CoreTest::test_multiscale_flow`, `--compile-parity=all --compile-backend=aot_eager`): `ActNorm`
initialises its parameters from the first batch with `self.s.data = ...` and flips a buffer flag;
"grad of parameter 's': compiled computed no gradient (None)". The test itself calls
`.backward()`, which fills `.grad` alike on both sides, so the test passes plainly; a program
that asks `torch.autograd.grad(loss, model.parameters())` (a gradient penalty, a meta-learning
step) gets None for those parameters when compiled. Here without the plugin: the same module,
eager and compiled with each backend, gradients by `.backward()` and by `torch.autograd.grad`.
"""

from __future__ import annotations

import copy
import sys

import torch


class ActNorm(torch.nn.Module):
    """normflows' ActNorm, reduced: data-dependent initialisation on the first call."""

    def __init__(self) -> None:
        super().__init__()
        self.s = torch.nn.Parameter(torch.zeros(3, 1, 1))
        self.t = torch.nn.Parameter(torch.zeros(3, 1, 1))
        self.register_buffer("done", torch.tensor(0.0))

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        if not self.done > 0.0:
            self.s.data = -torch.log(z.std(dim=(0, 2, 3), keepdim=True)[0] + 1e-6)
            self.t.data = (-z.mean(dim=(0, 2, 3), keepdim=True)[0] * torch.exp(self.s)).data
            self.done = torch.tensor(1.0)
        return z * torch.exp(self.s) + self.t


def gradients(module: torch.nn.Module, run: torch.nn.Module, z: torch.Tensor) -> list[bool]:
    """Whether `torch.autograd.grad` finds a gradient for each parameter after one call."""
    params = [module.s, module.t]
    found = torch.autograd.grad(run(z).sum(), params, allow_unused=True)
    return [g is not None for g in found]


def main() -> int:
    torch.manual_seed(0)
    z = torch.rand(2, 3, 4, 4)
    module = ActNorm()
    eager = gradients(module, module, z)
    print(f"torch {torch.__version__}: eager, parameters with a gradient: {eager}")
    wrong = False
    for backend in ("eager", "aot_eager", "inductor"):
        torch._dynamo.reset()
        copied = copy.deepcopy(ActNorm())
        compiled = gradients(copied, torch.compile(copied, backend=backend), z)
        print(f"{backend}: {compiled}")
        wrong = wrong or compiled != eager
    print("the bug is present" if wrong else "the bug is gone")
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
