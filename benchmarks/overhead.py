"""What a parity check costs next to the check a careful user writes by hand.

    python benchmarks/overhead.py --backend aot_eager --clock cpu      # CPU, on a busy machine
    python benchmarks/overhead.py --backend inductor --clock cpu
    python benchmarks/overhead.py --device cuda --backend inductor --profile   # GPU, all four
    python benchmarks/overhead.py --cprofile --only MLP                # cProfile per plugin function
    python benchmarks/overhead.py --startup                            # plugin start-up only
    python benchmarks/overhead.py --backend inductor --hand-tolerances # at the hand check's rtol/atol

The hand-written check deep-copies the model once and compiles the copy; each call then runs
eager forward + backward on the model, compiled forward + backward on the copy with the same
cotangent, and `assert_close`s the output and every parameter's gradient. The plugin's check is
one warm `compile_parity(model, x)` call (its checker, as the fixture hands it to a test), as
shipped: nothing of it is patched while it is timed. Both are timed interleaved, call by call, in
one process, so a noisy machine slows both alike; the figure is the median of `--repeats` warm
calls, in wall time or (`--clock cpu`) this process's CPU time. The 1024-wide transformer runs
on CUDA only (or when `--only` names it): one CPU thread takes seconds per call.

Per model also: memory, on CUDA the peak allocated during one warm call above what was allocated
before it (torch.cuda.max_memory_allocated); on CPU, where tracemalloc cannot see torch's
allocator, the same peak and the bytes allocated, read from torch.profiler's allocation events.
Launches: CUDA kernels and copies of one call (torch.profiler), on CPU the ATen ops called from
Python. Extra runs: sides a plugin call runs beyond eager and compiled (an eager re-run or the
float64 reference for a rule; the callable compiled as the user compiles it, where a graph draws
random numbers), counted over 5 untimed calls.
Under the table: leaves where the hand-written assert_close failed on this correct backend.
`--profile` adds torch.profiler's top ops of one warm plugin check by self CPU time (and self
CUDA time). Results and what they mean: BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import copy
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Case:
    name: str
    make: Callable[[], nn.Module]
    shape: tuple[int, ...]
    cuda_only: bool = False


def _cases() -> list[Case]:
    sys.path.insert(0, str(ROOT / "examples"))
    from models import ConvBN

    def encoder(width: int, heads: int) -> Callable[[], nn.Module]:
        return lambda: nn.TransformerEncoderLayer(width, heads, dropout=0.0, batch_first=True)

    return [
        Case(
            "MLP 64-256-64, batch 8",
            lambda: nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 64)),
            (8, 64),
        ),
        Case("Conv+BN+ReLU, 4x3x16x16", lambda: ConvBN().train(), (4, 3, 16, 16)),
        Case("TransformerEncoderLayer 256, 8x64 tokens", encoder(256, 8), (8, 64, 256)),
        Case(
            "TransformerEncoderLayer 1024, 16x256 tokens",
            encoder(1024, 16),
            (16, 256, 1024),
            cuda_only=True,
        ),
    ]


@dataclass
class Result:
    hand_ms: float
    plugin_ms: float
    hand_peak: int  # bytes above the allocation before the call
    plugin_peak: int
    hand_allocated: int  # bytes allocated during the call (CPU only; -1 when not measured)
    plugin_allocated: int
    hand_launches: int  # CUDA kernels (and copies) launched in one call; on CPU, ATen ops
    plugin_launches: int
    alarms: list[str]  # leaves where the hand-written assert_close failed
    reruns: float  # sides per plugin call beyond eager and compiled


TOLERANCE = 1e-2
"""rtol and atol of the hand-written check's assert_close, as a careful user sets them."""


def _hand_written(
    model: nn.Module, x: torch.Tensor, backend: str, alarms: list[str]
) -> Callable[[], None]:
    """The check without the plugin: one copy up front, then eager vs compiled per call.

    Where assert_close fails on a correct backend, the check goes on and the leaf is added to
    `alarms`, so its cost is still measured and its false alarm shown.
    """
    compiled_model = copy.deepcopy(model)
    compiled = torch.compile(compiled_model, backend=backend)
    eager_params = [p for p in model.parameters() if p.requires_grad]
    compiled_params = [p for p in compiled_model.parameters() if p.requires_grad]
    cotangent: list[torch.Tensor] = []

    def check() -> None:
        expected = model(x)
        if not cotangent:
            cotangent.append(torch.randn_like(expected))
        expected_grads = torch.autograd.grad(expected, eager_params, cotangent[0])
        actual = compiled(x)
        actual_grads = torch.autograd.grad(actual, compiled_params, cotangent[0])
        names = ["output", *(f"grad {i}" for i in range(len(eager_params)))]
        pairs = zip(names, (actual, *actual_grads), (expected, *expected_grads), strict=True)
        for name, got, want in pairs:
            try:
                torch.testing.assert_close(got, want, rtol=TOLERANCE, atol=TOLERANCE)
            except AssertionError:
                if name not in alarms:
                    alarms.append(name)

    return check


def _timed(call: Callable[[], object], cuda: bool, clock: Callable[[], float]) -> float:
    if cuda:
        torch.cuda.synchronize()
    started = clock()
    call()
    if cuda:
        torch.cuda.synchronize()
    return clock() - started


def _profiled(call: Callable[[], object], cuda: bool, memory: bool = False) -> Any:
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    with profile(activities=activities, profile_memory=memory) as prof:
        call()
        if cuda:
            torch.cuda.synchronize()
    return prof


def _launches(prof: Any, cuda: bool) -> int:
    """Kernels and copies run on the GPU; on the CPU, ATen ops called from Python (not from
    inside another op): what a check costs in dispatches, independent of the clock."""
    from torch.autograd import DeviceType

    events = prof.events()
    if cuda:
        return sum(1 for e in events if e.device_type == DeviceType.CUDA)
    return sum(
        1
        for e in events
        if e.name.startswith("aten::")
        and (e.cpu_parent is None or not e.cpu_parent.name.startswith("aten::"))
    )


def _memory(call: Callable[[], object], cuda: bool) -> tuple[int, int]:
    """(peak bytes above the start, bytes allocated) during one call."""
    if cuda:
        torch.cuda.synchronize()
        before = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        call()
        torch.cuda.synchronize()
        return torch.cuda.max_memory_allocated() - before, -1
    # Each op's own allocations net of its own frees, in start order: a timeline of the
    # allocator that is exact at op granularity.
    events = sorted(_profiled(call, cuda, memory=True).events(), key=lambda e: e.time_range.start)
    live = peak = allocated = 0
    for event in events:
        change = event.self_cpu_memory_usage
        live += change
        peak = max(peak, live)
        allocated += max(change, 0)
    return peak, allocated


def _count_reruns(plugin: Callable[[], None], calls: int) -> float:
    """Sides per plugin call beyond eager and compiled, over `calls` untimed calls: re-runs
    for a rule, the compiled run as the user compiles it. Counted by wrapping `run_side` where the plugin calls it, outside the timed
    calls, so the timings are of the check as shipped."""
    from pytest_torchcompile.running import calls as calls_module
    from pytest_torchcompile.running import compiled

    sides = [0]
    run_side = calls_module.run_side

    def counted(*args: Any, **kwargs: Any) -> Any:
        sides[0] += 1
        return run_side(*args, **kwargs)

    calls_module.run_side = compiled.run_side = counted  # type: ignore[attr-defined]
    try:
        for _ in range(calls):
            plugin()
    finally:
        calls_module.run_side = compiled.run_side = run_side  # type: ignore[attr-defined]
    return (sides[0] - 2 * calls) / calls


def _pair(
    case: Case, backend: str, device: str, alarms: list[str], hand_tolerances: bool = False
) -> tuple[Callable[[], None], Callable[[], None]]:
    """The hand-written check and the plugin's on two copies of one model, not yet compiled;
    `hand_tolerances`: the plugin's at the hand-written check's tolerances, not its defaults."""
    from pytest_torchcompile.runner import Checker
    from pytest_torchcompile.settings import Settings

    torch.manual_seed(0)
    hand_model = case.make().to(device)
    plugin_model = copy.deepcopy(hand_model)
    x = torch.randn(case.shape, device=device)
    tolerances = {"rtol": TOLERANCE, "atol": TOLERANCE} if hand_tolerances else {}
    checker = Checker(Settings(backend=backend, **tolerances))
    hand = _hand_written(hand_model, x, backend, alarms)

    def plugin() -> None:
        checker(plugin_model, x)

    return hand, plugin


def measure(
    case: Case,
    backend: str,
    device: str,
    repeats: int,
    clock: Callable[[], float],
    hand_tolerances: bool = False,
) -> Result:
    from pytest_torchcompile.counting.accounting import Accountant
    from pytest_torchcompile.runner import isolated

    cuda = device == "cuda"
    alarms: list[str] = []
    with isolated(Accountant()):
        hand, plugin = _pair(case, backend, device, alarms, hand_tolerances)
        for _ in range(3):  # compile, then warm both
            hand()
            plugin()
        hand_times, plugin_times = [], []
        for _ in range(repeats):
            hand_times.append(_timed(hand, cuda, clock))
            plugin_times.append(_timed(plugin, cuda, clock))
        hand_peak, hand_allocated = _memory(hand, cuda)
        plugin_peak, plugin_allocated = _memory(plugin, cuda)
        hand_launches = _launches(_profiled(hand, cuda), cuda)
        plugin_launches = _launches(_profiled(plugin, cuda), cuda)
        reruns = _count_reruns(plugin, min(repeats, 5))
    return Result(
        statistics.median(hand_times) * 1e3,
        statistics.median(plugin_times) * 1e3,
        hand_peak,
        plugin_peak,
        hand_allocated,
        plugin_allocated,
        hand_launches,
        plugin_launches,
        alarms,
        reruns,
    )


def _mib(n: int) -> str:
    return "-" if n < 0 else f"{n / 2**20:.2f} MiB"


def _selected(options: argparse.Namespace) -> list[Case]:
    cuda = options.device == "cuda"
    return [
        case
        for case in _cases()
        if (cuda or not case.cuda_only or options.only) and options.only in case.name
    ]


def run_overhead(options: argparse.Namespace) -> None:
    import pytest_torchcompile

    cuda = options.device == "cuda"
    where = torch.cuda.get_device_name() if cuda else f"{os.cpu_count()} CPU cores"
    print(
        f"torch {torch.__version__}, Python {sys.version.split()[0]}, {options.device} ({where}), "
        f"backend {options.backend}, {torch.get_num_threads()} torch thread(s), plugin from "
        f"{Path(pytest_torchcompile.__file__).parent}, {options.clock} time, median of "
        f"{options.repeats} warm calls, interleaved"
        + (f"; the plugin at rtol=atol={TOLERANCE:g}" if options.hand_tolerances else "")
    )
    memory = "peak CUDA memory" if cuda else "peak / allocated CPU memory (profiler)"
    launches = "CUDA kernels per call" if cuda else "ATen ops per call"
    print(
        f"| model | hand-written | plugin | ratio | fixed cost | {memory}: hand-written | plugin "
        f"| {launches}: hand-written | plugin | extra runs per call |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    notes: list[str] = []
    for case in _selected(options):
        clock = time.process_time if options.clock == "cpu" else time.perf_counter
        r = measure(
            case, options.backend, options.device, options.repeats, clock, options.hand_tolerances
        )
        if cuda:
            hand_mem, plugin_mem = _mib(r.hand_peak), _mib(r.plugin_peak)
        else:
            hand_mem = f"{_mib(r.hand_peak)} / {_mib(r.hand_allocated)}"
            plugin_mem = f"{_mib(r.plugin_peak)} / {_mib(r.plugin_allocated)}"
        print(
            f"| {case.name} | {r.hand_ms:.2f} ms | {r.plugin_ms:.2f} ms | "
            f"{r.plugin_ms / r.hand_ms:.2f}x | {r.plugin_ms - r.hand_ms:+.2f} ms | "
            f"{hand_mem} | {plugin_mem} | {r.hand_launches} | {r.plugin_launches} | "
            f"{r.reruns:g} |",
            flush=True,
        )
        if r.alarms:
            notes.append(
                f"{case.name}: the hand-written assert_close(rtol=atol={TOLERANCE:g}) failed on "
                f"{', '.join(r.alarms)}"
            )
    for note in notes:
        print(note)
    if options.profile:
        for case in _selected(options):
            run_profile(case, options)


# --- where a plugin call's time goes ------------------------------------------------------------


def run_profile(case: Case, options: argparse.Namespace) -> None:
    """torch.profiler over one warm plugin check: its top ops by self CPU (and self CUDA) time."""
    from pytest_torchcompile.counting.accounting import Accountant
    from pytest_torchcompile.runner import isolated

    cuda = options.device == "cuda"
    with isolated(Accountant()):
        _, plugin = _pair(case, options.backend, options.device, [])
        for _ in range(3):
            plugin()
        prof = _profiled(plugin, cuda)
    print(f"\n{case.name}, {options.backend}, {options.device}: one warm plugin check")
    averages = prof.key_averages()
    for key in ["self_cpu_time_total"] + (["self_device_time_total"] if cuda else []):
        print(f"\nby {key}:")
        print(averages.table(sort_by=key, row_limit=options.top, max_name_column_width=60))


def run_cprofile(options: argparse.Namespace) -> None:
    """cProfile over warm plugin calls: each of the plugin's functions, by cumulative time."""
    import cProfile
    import pstats

    from pytest_torchcompile.counting.accounting import Accountant
    from pytest_torchcompile.runner import isolated

    package = str(ROOT / "pytest_torchcompile")
    for case in _selected(options):
        with isolated(Accountant()):
            _, plugin = _pair(case, options.backend, options.device, [])
            for _ in range(3):
                plugin()
            profiler = cProfile.Profile()
            profiler.enable()
            for _ in range(options.repeats):
                plugin()
            profiler.disable()
        stats = pstats.Stats(profiler).stats  # type: ignore[attr-defined]
        rows = []
        for (filename, line, name), (_, calls, own, cumulative, _) in stats.items():
            if filename.startswith(package) or ("torch" in name and name.startswith("<")):
                where = f"{Path(filename).stem}.{name}:{line}" if line else name
                rows.append((cumulative, own, calls, where))
        total = max(row[0] for row in rows)
        n = options.repeats
        print(f"\n{case.name}, {options.backend}, {options.device}: {total / n * 1e3:.2f} ms/call")
        print("| function | cumulative ms/call | % | own ms/call | calls/call |")
        print("| --- | --- | --- | --- | --- |")
        for cumulative, own, calls, where in sorted(rows, reverse=True)[: options.top]:
            print(
                f"| {where} | {cumulative / n * 1e3:.3f} | {cumulative / total:.0%} | "
                f"{own / n * 1e3:.3f} | {calls / n:g} |"
            )


# --- start-up ---------------------------------------------------------------------------------

_NO_PARITY_TEST = "def test_nothing():\n    assert 1 + 1 == 2\n"
_NO_TORCH = (
    "import sys\n\n\ndef pytest_collection_finish(session):\n"
    "    assert 'torch' not in sys.modules, 'the plugin imported torch'\n"
)


def _pytest_run(command: list[str], cwd: str, env: dict[str, str]) -> tuple[float, float, str]:
    """(wall s, CPU s of the child, its stderr) of one pytest process that must pass."""
    with tempfile.TemporaryFile("w+") as err:
        started = time.perf_counter()
        child = subprocess.Popen(command, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=err)
        _, status, usage = os.wait4(child.pid, 0)
        wall = time.perf_counter() - started
        child.returncode = os.waitstatus_to_exitcode(status)
        err.seek(0)
        text = err.read()
    if child.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed:\n{text}")
    return wall, usage.ru_utime + usage.ru_stime, text


def _imported(importtime: str) -> dict[str, int]:
    """Module -> its own import time in microseconds, from `python -X importtime` output."""
    found = {}
    for line in importtime.splitlines():
        if line.startswith("import time:") and "|" in line and "self [us]" not in line:
            own, _, name = line.removeprefix("import time:").split("|")
            found[name.strip()] = int(own)
    return found


def run_startup(repeats: int) -> None:
    """`pytest --collect-only` on a suite with no parity test, with and without the plugin.

    Wall time on a busy machine varies by more than the plugin costs, so this also reports the
    processes' CPU time and, exactly, the modules the plugin adds to the session and their own
    import times (`python -X importtime`).
    """
    with tempfile.TemporaryDirectory() as tmp:
        Path(tmp, "test_plain.py").write_text(_NO_PARITY_TEST)
        Path(tmp, "conftest.py").write_text(_NO_TORCH)
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        base = [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider"]
        variants = {"without the plugin": ["-p", "no:torchcompile"], "with the plugin": []}
        walls: dict[str, list[float]] = {name: [] for name in variants}
        cpus: dict[str, list[float]] = {name: [] for name in variants}
        for _ in range(repeats):  # interleaved, like the calls above
            for name, extra in variants.items():
                wall, cpu, _ = _pytest_run([*base, *extra], tmp, env)
                walls[name].append(wall)
                cpus[name].append(cpu)
        modules = {
            name: _imported(
                _pytest_run([*base[:1], "-X", "importtime", *base[1:], *extra], tmp, env)[2]
            )
            for name, extra in variants.items()
        }
    for name in variants:
        print(
            f"pytest --collect-only {name}: wall {statistics.median(walls[name]) * 1e3:.0f} ms, "
            f"CPU {statistics.median(cpus[name]) * 1e3:.0f} ms (medians of {repeats})"
        )
    wall = statistics.median(walls["with the plugin"]) - statistics.median(
        walls["without the plugin"]
    )
    cpu = statistics.median(cpus["with the plugin"]) - statistics.median(cpus["without the plugin"])
    added = {
        module: own
        for module, own in modules["with the plugin"].items()
        if module not in modules["without the plugin"]
    }
    print(f"added by the plugin: wall {wall * 1e3:+.0f} ms, CPU {cpu * 1e3:+.0f} ms")
    print(
        f"modules the plugin adds: {len(added)}, own import time {sum(added.values()) / 1e3:.1f} ms: "
        + ", ".join(sorted(added))
    )
    print("torch imported: no (asserted by the suite's conftest after collection)")


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--backend", choices=("aot_eager", "inductor"), default="aot_eager")
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument(
        "--threads",
        type=int,
        default=1,
        help="torch CPU threads (1: on a shared machine, spinning OpenMP threads dwarf the work)",
    )
    parser.add_argument(
        "--clock",
        choices=("wall", "cpu"),
        default="wall",
        help="cpu: this process's CPU time, steadier than wall time on a busy machine (CPU only)",
    )
    parser.add_argument("--only", default="", help="run the models whose name contains this")
    parser.add_argument("--startup", action="store_true", help="measure plugin start-up only")
    parser.add_argument(
        "--profile",
        action="store_true",
        help="after the table, torch.profiler's top ops of one warm plugin check per model",
    )
    parser.add_argument(
        "--cprofile",
        action="store_true",
        help="only cProfile the plugin's functions over warm calls",
    )
    parser.add_argument("--top", type=int, default=25, help="rows of each profile table")
    parser.add_argument(
        "--hand-tolerances",
        action="store_true",
        help="the plugin at the hand-written check's rtol and atol, not assert_close's defaults "
        "(what the float64 reference of a leaf outside the defaults costs)",
    )
    options = parser.parse_args()
    torch.set_num_threads(options.threads)
    if options.startup:
        run_startup(options.repeats)
    elif options.cprofile:
        run_cprofile(options)
    else:
        run_overhead(options)


if __name__ == "__main__":
    main()
