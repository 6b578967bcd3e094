"""pytest-xdist: which GPU each worker runs CUDA tests on, and what workers tell the controller.

Registered only where pytest-xdist is installed (plugin.py). No torch at import.
"""

from __future__ import annotations

import sys
from typing import Any

import pytest

from pytest_torchcompile import caches
from pytest_torchcompile.stash import SESSION_KEY, Run

COLLECTED_OUTPUT = "torchcompile_collected"  # workeroutput key: the node ids a worker collected
GPU_OUTPUT = "torchcompile_gpu"  # workeroutput key: the GPU a worker ran its CUDA tests on
CACHE_OUTPUT = "torchcompile_cache"  # workeroutput key: a worker's compile cache hits and misses


def worker_gpu(config: pytest.Config) -> int | None:
    """The GPU this pytest-xdist worker runs CUDA tests on; None outside xdist or when off.

    Round-robin by worker id by default, so `-n N` on a host with N GPUs uses all of them, one
    worker each; --compile-worker-gpus=0,0,1,1 maps workers explicitly, =off turns pinning off.
    """
    workerinput = getattr(config, "workerinput", None)
    plan = config.stash[SESSION_KEY].worker_gpus
    if workerinput is None or plan == "off":
        return None
    import torch

    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if count == 0:
        return None
    worker = int(str(workerinput["workerid"]).removeprefix("gw"))
    if plan == "round-robin":
        return worker % count
    choices = [int(index) for index in plan.split(",")]
    return choices[worker % len(choices)] % count


def is_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


def tell_controller(config: pytest.Config, key: str, value: Any) -> None:
    """Put `value` in this worker's output under `key`, for the controller's node-down hook."""
    output: dict[str, Any] = config.workeroutput  # type: ignore[attr-defined]
    output[key] = value


def tell_controller_the_gpu(config: pytest.Config) -> None:
    """A worker that ran CUDA tests tells the controller which GPU it used."""
    if "torch" not in sys.modules:
        return
    import torch

    if torch.cuda.is_available() and torch.cuda.is_initialized():  # type: ignore[no-untyped-call]
        index = torch.cuda.current_device()
        tell_controller(config, GPU_OUTPUT, f"cuda:{index} ({torch.cuda.get_device_name(index)})")


class XdistHooks:
    """The xdist controller's hooks, registered only where pytest-xdist is installed."""

    def __init__(self, run: Run) -> None:
        self._run = run

    def pytest_testnodedown(self, node: Any, error: object | None) -> None:
        output = getattr(node, "workeroutput", {})
        if GPU_OUTPUT in output:
            self._run.worker_gpus[str(node.gateway.id)] = output[GPU_OUTPUT]
        caches.add_counts(self._run.cache_counts, output.get(CACHE_OUTPUT, {}))
        collected = output.get(COLLECTED_OUTPUT)
        if error is not None or collected is None:
            self._run.worker_lost = True
        else:
            self._run.workers_collected += 1
            self._run.collected.update(collected)
