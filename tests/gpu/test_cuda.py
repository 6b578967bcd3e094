"""The checker on CUDA: Triton kernels, CUDA graphs, RNG and layouts. Skipped without a GPU.

Run on a GPU machine by scripts/gpu_suite.py; CI has no GPU, so these skip there with a reason.
"""

from __future__ import annotations

import pytest
import torch

pytestmark = pytest.mark.skipif(
    not torch.cuda.is_available(), reason="needs a CUDA device (run scripts/gpu_suite.py on one)"
)


def test_a_cuda_only_miscompile_is_caught_and_the_report_names_the_device(pytester):
    pytester.makepyfile(
        """
        import pytest, torch

        @pytest.mark.compile_parity(devices=["cpu", "cuda:0"])
        def test_gelu(compile_parity, device):
            compile_parity(torch.nn.functional.gelu, torch.randn(64, 64, device=device))
        """
    )
    result = pytester.runpytest("--compile-backend=planted:corrupt_output_on_cuda", "-v")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*test_gelu?cpu? PASSED*",
            "*test_gelu?cuda:0? FAILED*",
            "*ParityError*",
            "*device=cuda:0*",
        ]
    )


INDUCTOR_ON_CUDA = """
import pytest, torch

class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(64, 64)
        self.norm = torch.nn.LayerNorm(64)
        self.drop = torch.nn.Dropout(0.2)
    def forward(self, x):
        return self.drop(torch.nn.functional.gelu(self.norm(self.lin(x))))

@pytest.mark.compile_parity(devices=["cuda:0"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=str)
def test_block(compile_parity, device, dtype):
    torch.manual_seed(0)
    model = Block().to(device=device, dtype=dtype).train()   # dropout: CUDA RNG must match
    for batch in (8, 8, 16):
        compile_parity(model, torch.randn(batch, 64, device=device, dtype=dtype))

@pytest.mark.compile_parity(devices=["cuda:0"])
def test_strided_input_keeps_its_layout(compile_parity, device):
    base = torch.randn(40, 70, device=device)
    x = base[3:, 5::2].t()                       # offset, step, transposed
    result = compile_parity(lambda t: (t.sin() * 2).sum(0), x)
    assert result.errors["output"]["max_abs"] < 1e-4
"""


@pytest.mark.parametrize(
    ("backend", "mode"),
    [
        ("inductor", "default"),
        ("inductor", "reduce-overhead"),
        ("inductor", "max-autotune-no-cudagraphs"),
        ("cudagraphs", "default"),
    ],
)
def test_inductor_modes_pass_on_cuda(pytester, backend, mode):
    pytester.makepyfile(INDUCTOR_ON_CUDA)
    result = pytester.runpytest(f"--compile-backend={backend}", f"--compile-mode={mode}")
    result.assert_outcomes(passed=4)


def test_reduce_overhead_outputs_are_kept_before_the_next_replay(pytester):
    pytester.makepyfile(
        """
        import pytest, torch

        @pytest.mark.compile_parity(devices=["cuda:0"], mode="reduce-overhead", backward=False)
        def test_it(compile_parity, device):
            first = compile_parity(lambda t: t * 2, torch.ones(8, device=device))
            compile_parity(lambda t: t * 2, torch.full((8,), 5.0, device=device))
            assert float(first.compiled[0]) == 2.0   # not overwritten by the second replay
        """
    )
    pytester.runpytest("--compile-backend=inductor").assert_outcomes(passed=1)


def test_cuda_graphs_recorded_again_and_skipped_are_reported(pytester):
    pytester.makepyfile(
        """
        import pytest, torch

        def scale(t):
            return t * 2

        def bump(t):
            t.add_(1)  # a mutated input: Inductor runs this graph without CUDA graphs
            return t * 2

        @pytest.mark.compile_parity(
            devices=["cuda:0"], mode="reduce-overhead", dynamic=True, backward=False
        )
        def test_sizes(compile_parity, device):
            for size in (8, 9, 10, 11):  # one graph; a CUDA graph per size, on its 2nd call
                for _ in range(2):
                    compile_parity(scale, torch.ones(size, device=device))
            rerecords = compile_parity.accountant.counts()["cudagraph_rerecords"]
            assert len(rerecords) == 3, rerecords
            assert "recorded again for inputs of sizes [9]" in rerecords[0]

        @pytest.mark.compile_parity(devices=["cuda:0"], mode="reduce-overhead", backward=False)
        def test_mutation(compile_parity, device):
            for _ in range(2):
                compile_parity(bump, torch.ones(8, device=device))
            skips = compile_parity.accountant.counts()["cudagraph_skips"]
            assert skips and "mutated inputs" in skips[0], skips

        @pytest.mark.compile_parity(devices=["cuda:0"], mode="reduce-overhead", dynamic=True)
        def test_module(compile_parity, device):
            # A graph's forward and backward are each recorded once per size; on torch 2.11
            # Inductor names both partition_0, and neither first recording is a re-record.
            model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU()).to(device)
            for batch in (4, 5):
                for _ in range(2):
                    compile_parity(model, torch.randn(batch, 8, device=device))
            rerecords = compile_parity.accountant.counts()["cudagraph_rerecords"]
            assert len(rerecords) == 2, rerecords
            assert rerecords[0].startswith("partition_0 of Sequential.forward (")
            assert rerecords[1].startswith("partition_0 (backward) of Sequential.forward (")
        """
    )
    result = pytester.runpytest("--compile-backend=inductor", "-rA")
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(
        [
            "*cudagraph re-records (3):",
            "*1. partition_0 of scale (*) [[]*]: recorded again for inputs of sizes [[]9]",
        ]
    )
    result.stdout.fnmatch_lines(["*cudagraphs skipped (1):", "*1. mutated inputs*"])


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two CUDA devices")
def test_xdist_workers_each_take_their_own_gpu(pytester):
    pytester.makepyfile(
        """
        import pytest, torch

        @pytest.mark.compile_parity(devices=["cuda"])
        @pytest.mark.parametrize("n", range(8))
        def test_it(compile_parity, device, n):
            result = compile_parity(lambda t: t.cos() + n, torch.ones(4, device=device))
            assert result.compiled.device == device
        """
    )
    result = pytester.runpytest_subprocess("-n", "2", "--compile-backend=inductor", "-p", "xdist")
    result.assert_outcomes(passed=8)
    result.stdout.fnmatch_lines(["*GPUs per worker: gw0 -> cuda:0 (*), gw1 -> cuda:1 (*)"])
    swapped = pytester.runpytest_subprocess(
        "-n", "2", "--compile-backend=inductor", "--compile-worker-gpus=1,0"
    )
    swapped.stdout.fnmatch_lines(["*GPUs per worker: gw0 -> cuda:1 (*), gw1 -> cuda:0 (*)"])


@pytest.mark.parametrize("wrong", [False, True], ids=["rounding", "planted error"])
def test_a_small_leaf_the_rules_judge_gets_the_same_verdict_and_message_on_cuda(wrong):
    """A small leaf outside the plain tolerance is judged on the CPU (its few dozen float64 ops
    cost a launch and a sync each on the GPU): the report is the one the CPU gives."""
    from pytest_torchcompile.judging.parity import CompareOptions, compare
    from pytest_torchcompile.running.sides import SideResult
    from tests.unit.test_parity import float16_sums

    eager, compiled, exact = float16_sums()
    if wrong:
        compiled[7] += 0.25
    reports = []
    for device in ("cpu", "cuda"):

        def side(t: torch.Tensor, device: str = device) -> SideResult:
            return SideResult(t.to(device), None, {}, {})

        reports.append(
            compare(
                side(eager),
                side(compiled),
                CompareOptions(),
                reference=lambda: side(exact),
                eager_again=lambda: side(eager),
            )
        )
    on_cpu, on_cuda = reports
    assert on_cpu.ok == on_cuda.ok == (not wrong)
    assert on_cpu.failure_message() == on_cuda.failure_message()
    assert [leaf.note for leaf in on_cpu.leaves] == [leaf.note for leaf in on_cuda.leaves]


def test_the_stopwatch_counts_the_devices_time_not_only_the_time_it_took_to_queue_the_work():
    """The sides do not wait for the device; the re-run bound is measured from their time."""
    import time

    from pytest_torchcompile.running.sides import Stopwatch

    a = torch.randn(8192, 8192, device="cuda")
    torch.cuda.synchronize()
    watch = Stopwatch()
    started = time.perf_counter()
    with watch.timing():
        for _ in range(40):
            a = torch.tanh(a @ a)
    queued = time.perf_counter() - started
    torch.cuda.synchronize()
    finished = time.perf_counter() - started
    assert finished > 4 * queued  # the work really ran after the block had queued it
    assert 0.8 * finished <= watch.seconds <= finished
