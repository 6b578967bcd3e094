"""What one check costs beyond the calls it makes: reads of device values (host syncs)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
import torch
from torch import nn

from pytest_torchcompile.errors import ParityError
from pytest_torchcompile.judging import parity, reruns
from pytest_torchcompile.judging.parity import CompareOptions, compare
from pytest_torchcompile.runner import Checker, isolated
from pytest_torchcompile.running.sides import SideResult
from pytest_torchcompile.settings import Settings


@pytest.fixture
def host_reads(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Each read of a tensor's value into Python from now on (a host sync on CUDA), by what
    read it; with the checker treating CPU tensors as it treats GPU ones, whose reads wait
    for the device (on the CPU it reads leaf by leaf: reads are free there)."""
    monkeypatch.setattr(parity, "reads_wait", lambda t: isinstance(t, torch.Tensor))
    reads: list[str] = []

    def counted(name: str, read: Callable[..., Any]) -> Callable[..., Any]:
        def run(*args: Any, **kwargs: Any) -> Any:
            reads.append(name)
            return read(*args, **kwargs)

        return run

    for name in ("item", "tolist", "__bool__", "__float__", "__int__"):
        monkeypatch.setattr(torch.Tensor, name, counted(name, getattr(torch.Tensor, name)))
    monkeypatch.setattr(torch, "equal", counted("torch.equal", torch.equal))
    yield reads


def test_a_passing_comparison_reads_the_device_twice_at_most(host_reads: list[str]) -> None:
    """On CUDA every read of a value (item, tolist, bool, torch.equal) waits for the device: the
    leaves of a call are judged together, two reads in all, not one or more per leaf."""
    gen = torch.Generator().manual_seed(0)
    state = {f"parameter 'w{i}'": torch.randn(8, 8, generator=gen) for i in range(10)}
    grads = {f"grad of parameter 'w{i}'": torch.randn(8, 8, generator=gen) for i in range(10)}
    out = torch.randn(4, 4, generator=gen)
    eager = SideResult((out, out.argmax(1), 0.5), None, state, grads)
    compiled = SideResult(
        (out * (1 + 1e-7), out.argmax(1), 0.5),  # close; exactly equal; an equal Python float
        None,
        {name: t.clone() for name, t in state.items()},  # state the call left alone
        {name: g * (1 + 1e-7) for name, g in grads.items()},
    )
    host_reads.clear()
    report = compare(eager, compiled, CompareOptions())
    assert report.ok and len(report.leaves) == 23
    assert len(host_reads) <= 2, host_reads
    close = [leaf for leaf in report.leaves if leaf.max_abs > 0]
    assert len(close) == 11 and all(leaf.max_rel < 2e-7 for leaf in close)


def test_a_warm_check_reads_the_device_twice_at_most(host_reads: list[str]) -> None:
    """The whole check of a module with state (parameters, buffers, gradients) on a correct
    backend: no read per leaf anywhere on the way (runner or parity)."""
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4), nn.BatchNorm1d(4))
    x = torch.randn(5, 8)
    checker = Checker(Settings(backend="aot_eager"))
    with isolated(checker.accountant):
        checker(model, x)  # cold: compiling reads values as it likes
        host_reads.clear()
        result = checker(model, x)
    assert len(result.errors) >= 12  # output, 6 parameters, 3 buffers, 6 gradients
    assert len(host_reads) <= 2, host_reads


def test_leaves_within_the_reduction_noise_floor_cost_no_more_reads(
    host_reads: list[str],
) -> None:
    """Gradients outside assert_close's tolerance but within the noise floor (Inductor's
    reduction order on a large model) are settled in the same two reads, not four per leaf."""
    gen = torch.Generator().manual_seed(0)
    grads = {f"grad of parameter 'w{i}'": torch.randn(64, 64, generator=gen) for i in range(10)}
    eager = SideResult(None, None, {}, grads)
    compiled = SideResult(None, None, {}, {n: g * (1 + 4e-6) for n, g in grads.items()})
    host_reads.clear()
    report = compare(eager, compiled, CompareOptions())
    assert report.ok and len(report.leaves) == 11
    assert all(leaf.max_rel > 1.3e-6 for leaf in report.leaves if leaf.leaf.startswith("grad"))
    assert len(host_reads) <= 2, host_reads


@pytest.mark.parametrize("backward", [True, False], ids=["with backward", "forward only"])
def test_a_call_waits_for_the_device_once_after_both_sides(
    monkeypatch: pytest.MonkeyPatch, backward: bool
) -> None:
    """A wait inside a side (between its call and its backward, or at its end) kept the host
    from queueing the next work while the device still ran the last: a call waits once."""
    from pytest_torchcompile.running import sides

    waits: list[int] = []
    monkeypatch.setattr(sides, "synchronize", lambda: waits.append(1))
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
    checker = Checker(Settings(backend="aot_eager", backward=backward))
    with isolated(checker.accountant):
        checker(model, torch.randn(5, 8))  # cold
        waits.clear()
        checker(model, torch.randn(5, 8))
    assert len(waits) == 1


def _dead_device() -> None:
    raise torch.AcceleratorError("CUDA error: an illegal memory access was encountered")


def test_a_device_that_fails_during_a_check_is_a_failure_not_a_verdict(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A device fault surfaces at whatever call comes next and leaves the device unusable: the
    check fails saying so (never 'both raised alike', never a rejected example, never a
    traceback from inside the comparison)."""
    from pytest_torchcompile.errors import CompileParityFailure
    from pytest_torchcompile.running import sides

    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
    checker = Checker(Settings(backend="aot_eager"))
    with isolated(checker.accountant):
        checker(model, torch.randn(5, 8))  # cold
        monkeypatch.setattr(sides, "synchronize", _dead_device)
        with pytest.raises(CompileParityFailure) as failure:
            checker(model, torch.randn(5, 8))
    message = str(failure.value)
    assert "illegal memory access" in message and "no parity was shown" in message
    assert "CUDA_LAUNCH_BLOCKING=1" in message and "backend=aot_eager" in message


def test_a_device_error_the_compiled_side_met_is_named_as_its_own() -> None:
    from pytest_torchcompile.running import sides

    raised = torch.AcceleratorError("CUDA error: an illegal memory access")
    failure = sides.device_failure(raised, SideResult(None, raised, {}, {}), "backend=planted")
    message = str(failure)
    assert "The compiled side raised it first" in message and message.endswith("backend=planted")


CORRUPT = [0.0]


def half_in_float32_or_corrupt(gm: torch.fx.GraphModule, example_inputs: Any) -> Any:
    """float16 computed in float32 and rounded back (as Inductor does); with CORRUPT set, every
    output 1 off too, far beyond eager's own rounding error."""
    import planted

    right = planted.compute_half_in_float32(gm, example_inputs)
    return lambda *args: [out + CORRUPT[0] for out in right(*args)]


def test_a_plain_re_run_proves_a_kind_of_call_rebuilt_once_until_a_leaf_would_fail(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The rules rest on re-runs from the call's snapshot, and a plain eager re-run proves the
    snapshot rebuilds the call. Proven once for a callable and input signature, the next calls
    of that kind run no such re-run, unless a leaf would fail (then it is run, and judges)."""
    from pytest_torchcompile.running import calls

    plain_re_runs: list[int] = []
    real = calls.Call.rerun

    def counted(
        self: calls.Call, copier: Any, backward: bool, around: Any = calls.nothing, rows: Any = None
    ) -> Any:
        thunk = real(self, copier, backward, around, rows)
        if around is not calls.nothing or copier is not calls.clone_tree or rows is not None:
            return thunk  # the reference, the noise runs and runs on a sample of rows

        def run() -> Any:
            plain_re_runs.append(1)
            return thunk()

        return run

    def shifted(t: torch.Tensor) -> torch.Tensor:
        return (t + 1000) - 1000  # eager rounds t + 1000 to float16; the reference excuses it

    monkeypatch.setattr(calls.Call, "rerun", counted)
    checker = Checker(Settings(backend=f"{__name__}:half_in_float32_or_corrupt"))
    x = torch.linspace(-3, 3, 64, dtype=torch.float16)
    with isolated(checker.accountant):
        for call in range(3):
            result = checker(shifted, x + call)
            assert result.report.having(parity.Verdict.EXCUSED)
        assert len(plain_re_runs) == 1  # the first call's, which proved the kind rebuilt
        CORRUPT[0] = 1.0
        try:
            with pytest.raises(ParityError):
                checker(shifted, x + 3)
        finally:
            CORRUPT[0] = 0.0
    # A leaf that would fail: judged with a plain re-run again, and with the few more that look
    # for nondeterminism before a leaf fails.
    assert len(plain_re_runs) == 2 + reruns.LATE_SAMPLES


def test_the_stopwatch_without_a_device_is_the_hosts_time():
    import time

    from pytest_torchcompile.running.sides import Stopwatch

    watch = Stopwatch()
    with watch.timing():
        time.sleep(0.05)
    assert 0.05 <= watch.seconds < 1.0
