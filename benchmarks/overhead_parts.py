"""Where a warm check's time goes: the check as shipped against the same check with one cost
patched out, next to the hand-written check, interleaved call by call in one process.

    python benchmarks/overhead_parts.py --device cuda                 # every model, inductor
    python benchmarks/overhead_parts.py --device cuda --only 1024 --repeats 10

Variants: `no wait` (the check's wait for the device patched out), `no compare` (the
comparison, with its re-runs, replaced by an empty report), `neither`, and `gc off` (Python's
garbage collector disabled during the call). Each variant checks its own copy of the model with
its own compile cache. Patching changes what a check proves, so these are measurements of cost
only; benchmarks/overhead.py measures the check as shipped. Results: BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import gc
import statistics
import time
from collections.abc import Callable, Iterator
from typing import Any

import torch
from overhead import _cases, _hand_written, _timed

from pytest_torchcompile.counting.accounting import Accountant
from pytest_torchcompile.judging import parity
from pytest_torchcompile.runner import Checker, isolated
from pytest_torchcompile.running import sides
from pytest_torchcompile.settings import Settings

VARIANTS: dict[str, dict[str, bool]] = {
    "shipped": {},
    "no wait": {"no_wait": True},
    "no compare": {"no_compare": True},
    "neither": {"no_wait": True, "no_compare": True},
    "gc off": {"no_gc": True},
}


@contextlib.contextmanager
def _patched(
    no_wait: bool = False, no_compare: bool = False, no_gc: bool = False
) -> Iterator[None]:
    real_sync, real_compare = sides.synchronize, parity.compare

    def empty(_e: Any, _c: Any, options: parity.CompareOptions, **_: Any) -> parity.ParityReport:
        return parity.ParityReport([], "", options.context)

    if no_gc:
        gc.disable()
    if no_wait:
        sides.synchronize = lambda: None
    if no_compare:
        parity.compare = empty  # type: ignore[assignment]
    try:
        yield
    finally:
        sides.synchronize, parity.compare = real_sync, real_compare  # type: ignore[assignment]
        gc.enable()


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--backend", default="inductor")
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--only", default="", help="run the models whose name contains this")
    options = parser.parse_args()
    cuda = options.device == "cuda"
    for case in _cases():
        if options.only not in case.name or (case.cuda_only and not cuda and not options.only):
            continue
        with isolated(Accountant()):
            torch.manual_seed(0)
            base = case.make().to(options.device)
            x = torch.randn(case.shape, device=options.device)
            hand = _hand_written(copy.deepcopy(base), x, options.backend, [])
            checks: dict[str, Callable[[], object]] = {}
            for name in VARIANTS:
                checker, model = Checker(Settings(backend=options.backend)), copy.deepcopy(base)
                checks[name] = lambda checker=checker, model=model, x=x: checker(model, x)
            times: dict[str, list[float]] = {"hand-written": [], **{name: [] for name in VARIANTS}}
            for round_ in range(3 + options.repeats):  # 3 to compile and warm, then timed
                timed = round_ >= 3
                seconds = _timed(hand, cuda, time.perf_counter)
                if timed:
                    times["hand-written"].append(seconds)
                for name, check in checks.items():
                    with _patched(**VARIANTS[name]):
                        seconds = _timed(check, cuda, time.perf_counter)
                    if timed:
                        times[name].append(seconds)
        medians = {name: statistics.median(values) * 1e3 for name, values in times.items()}
        hand_ms = medians["hand-written"]
        print(
            f"{case.name}: "
            + ", ".join(
                f"{name} {ms:.2f} ms ({ms / hand_ms:.2f}x)" for name, ms in medians.items()
            ),
            flush=True,
        )


if __name__ == "__main__":
    main()
