"""What a parity check costs next to the compiled call it checks.

    python benchmarks/overhead.py                       # CPU, aot_eager and inductor
    python benchmarks/overhead.py --device cuda         # on a GPU machine

For each example model it times, in one process and one run (so the ratios are comparable):
  plain    torch.compile(model) called on x, then backward: the first call (compile included)
           and the median of later calls;
  checked  compile_parity(model, x) (the checker the fixture hands a test), first and later.
A passing check runs the compiled side, the eager side and both backwards, and copies inputs
and module state for the next steps; the float64 reference, the one-ulp nudge and a second
eager run happen only when a leaf fails the plain tolerance, which these correct backends never
do. Results and what they mean: BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import copy
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

# Cold compiles each time: Inductor's on-disk caches would let the second compile of a model
# (the checked one) reuse the first (the plain one) and flatter the checker.
os.environ.setdefault("TORCHINDUCTOR_FORCE_DISABLE_CACHES", "1")

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))

from models import MLP, Attention, ConvBN

from pytest_torchcompile.runner import Checker, isolated
from pytest_torchcompile.settings import Settings

MODELS: dict[str, tuple[Callable[[], torch.nn.Module], tuple[int, ...]]] = {
    "attention": (lambda: Attention(64), (4, 16, 64)),
    "mlp": (lambda: MLP().eval(), (64, 32)),
    "conv_bn": (lambda: ConvBN().train(), (8, 3, 16, 16)),
}


def _timed(call: Callable[[], object], device: torch.device) -> float:
    if device.type == "cuda":
        torch.cuda.synchronize()
    started = time.perf_counter()
    call()
    if device.type == "cuda":
        torch.cuda.synchronize()
    return time.perf_counter() - started


def measure(name: str, backend: str, device: torch.device, repeats: int) -> dict[str, float]:
    make, shape = MODELS[name]
    torch.manual_seed(0)
    model = make().to(device)
    x = torch.randn(shape, device=device)
    torch._dynamo.reset()
    compiled = torch.compile(copy.deepcopy(model), backend=backend)

    def plain() -> None:
        out = compiled(x)
        out = out["logits"] if isinstance(out, dict) else out
        out.sum().backward()

    plain_first = _timed(plain, device)
    plain_later = statistics.median(_timed(plain, device) for _ in range(repeats))

    checker = Checker(Settings(backend=backend))
    with isolated(checker.accountant):
        checked_first = _timed(lambda: checker(model, x), device)
        checked_later = statistics.median(
            _timed(lambda: checker(model, x), device) for _ in range(repeats)
        )
    return {
        "plain_first": plain_first,
        "plain_later": plain_later,
        "checked_first": checked_first,
        "checked_later": checked_later,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--backends", default="aot_eager,inductor")
    parser.add_argument("--repeats", type=int, default=20)
    options = parser.parse_args()
    device = torch.device(options.device)
    print(f"torch {torch.__version__}, device {device}, median of {options.repeats} later calls")
    print(
        f"{'model':<10} {'backend':<10} {'plain 1st':>10} {'checked 1st':>12} "
        f"{'plain later':>12} {'checked later':>14} {'ratio later':>12}"
    )
    for backend in options.backends.split(","):
        for name in MODELS:
            t = measure(name, backend, device, options.repeats)
            ratio = t["checked_later"] / t["plain_later"]
            print(
                f"{name:<10} {backend:<10} {t['plain_first']:>9.3f}s {t['checked_first']:>11.3f}s "
                f"{t['plain_later'] * 1e3:>10.2f}ms {t['checked_later'] * 1e3:>12.2f}ms "
                f"{ratio:>11.2f}x"
            )


if __name__ == "__main__":
    main()
