"""AOTInductor reads a 0-d buffer the program updates in place as the value it had when packaged.

    python benchmarks/aoti_scalar_buffer.py          # exits 1 while the bug is present

Found by `pytest examples --compile-backend=aot_inductor` (examples/test_conv_bn.py: BatchNorm's
`num_batches_tracked` stays at 1 on the second call). Here without the plugin, on public entry
points only: a module counts its calls in a 0-d buffer and in a 1-element one; eager and the
loaded package are called three times each on the same input. The package's 1-element counter
counts; its 0-d one returns 1 on every call (the kernel stores the packaging-time value + 1).
"""

from __future__ import annotations

import os
import sys
import tempfile

import torch


class Counter(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("scalar", torch.tensor(0))
        self.register_buffer("vector", torch.zeros(1))

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        self.scalar.add_(1)
        self.vector.add_(1)
        return x * self.scalar, x * self.vector


def main() -> int:
    device = "cuda" if torch.cuda.is_available() else "cpu"
    x = torch.ones(2, device=device)
    program = torch.export.export(Counter().to(device), (x,))
    path = os.path.join(tempfile.mkdtemp(), "counter.pt2")
    package = torch._inductor.aoti_load_package(  # type: ignore[attr-defined]
        torch._inductor.aoti_compile_and_package(program, package_path=path)  # type: ignore[attr-defined]
    )
    eager = Counter().to(device)
    wrong = False
    print(f"torch {torch.__version__} on {device}")
    for call in (1, 2, 3):
        (e_scalar, e_vector), (c_scalar, c_vector) = eager(x), package(x)
        print(
            f"call {call}: 0-d counter eager {e_scalar[0]:g}, AOTInductor {c_scalar[0]:g}; "
            f"1-element counter eager {e_vector[0]:g}, AOTInductor {c_vector[0]:g}"
        )
        wrong |= not (torch.equal(e_scalar, c_scalar) and torch.equal(e_vector, c_vector))
    print("AOTInductor diverges from eager" if wrong else "AOTInductor agrees with eager")
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
