"""AOTInductor reads a small buffer the program updates in place as the value it had when packaged.

    python benchmarks/aoti_scalar_buffer.py          # exits 1 while the bug is present

Found by `pytest examples --compile-backend=aot_inductor` (examples/test_conv_bn.py: BatchNorm's
`num_batches_tracked` stays at 1 on the second call). Here without the plugin, on public entry
points only: a module counts its calls in a 0-d buffer, a 1-element one and a 4-element one;
eager and the loaded package are called three times each on the same input. On torch 2.13 (CPU)
the package's 4-element counter counts, but its 0-d and 1-element ones, small enough for Inductor
to inline as constants, return 1 on every call: the kernel stores the packaging-time value + 1.
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
        self.register_buffer("one", torch.zeros(1))
        self.register_buffer("four", torch.zeros(4))

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        for counter in (self.scalar, self.one, self.four):
            counter.add_(1)
        return x * self.scalar, x * self.one[0], x * self.four[0]


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
        counts = [(float(e[0]), float(c[0])) for e, c in zip(eager(x), package(x), strict=True)]
        shown = ", ".join(
            f"{name} eager {e:g} AOTInductor {c:g}"
            for name, (e, c) in zip(("0-d", "1-element", "4-element"), counts, strict=True)
        )
        print(f"call {call}: {shown}")
        wrong |= any(e != c for e, c in counts)
    print("AOTInductor diverges from eager" if wrong else "AOTInductor agrees with eager")
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
