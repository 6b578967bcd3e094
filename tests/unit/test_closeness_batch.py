"""The batched plain verdicts of a call's leaves: the same verdicts as leaf by leaf in float64,
in a number of operations that does not grow with the number of leaves. On the CPU and, where
there is one, on a GPU (where the checker uses them)."""

from __future__ import annotations

import math
from collections.abc import Callable

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile

from pytest_torchcompile.judging import closeness
from pytest_torchcompile.judging.parity import CompareOptions

OPTIONS = CompareOptions()
Pair = tuple[torch.Tensor, torch.Tensor, float, float]
DEVICES = [
    "cpu",
    pytest.param(
        "cuda",
        marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
    ),
]


def _on(pairs: list[Pair], device: str) -> list[Pair]:
    return [(c.to(device), e.to(device), rtol, atol) for c, e, rtol, atol in pairs]


@st.composite
def leaf_pairs(draw: st.DrawFn) -> Pair:
    """An eager leaf and a compiled one: equal, within rounding, right at the tolerance's bound
    (an ulp either side), outside it, or off by a NaN or an infinity."""
    dtype = draw(
        st.sampled_from(
            [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int64, torch.bool]
        )
    )
    size = draw(st.integers(0, 40))
    gen = torch.Generator().manual_seed(draw(st.integers(0, 2**16)))
    scale = draw(st.sampled_from([1e-30, 1e-6, 1.0, 1e4]))
    wide = torch.randn(size, generator=gen, dtype=torch.float64) * scale
    if draw(st.booleans()):
        wide[: size // 2] = 0.0  # zeros: no relative difference there
    e = wide.to(dtype)
    rtol, atol = OPTIONS.tolerances(dtype)
    how = draw(st.sampled_from(["equal", "noise", "bound", "far", "nan", "inf"]))
    if how == "equal" or (not closeness.is_inexact(e) and how != "far"):
        c = e.clone()
    elif how == "far":
        c = (e.to(torch.float64) + 1).to(dtype) if dtype != torch.bool else ~e
    elif how in ("nan", "inf"):
        c = e.clone()
        if size:
            c[draw(st.integers(0, size - 1))] = float(how)
    else:
        factor = {"noise": draw(st.sampled_from([1e-3, 0.5])), "bound": 1.0}[how]
        bound = atol + rtol * e.to(torch.float64).abs()
        c = (e.to(torch.float64) + factor * bound).to(dtype)
        if how == "bound" and size:  # one ulp off the bound, either way
            steps = draw(st.sampled_from([-1, 0, 1]))
            toward = torch.full_like(c, float("inf") if steps > 0 else float("-inf"))
            c = torch.nextafter(c.to(torch.float32), toward.float()).to(dtype) if steps else c
    return c, e, rtol, atol


@pytest.mark.parametrize("device", DEVICES)
@settings(max_examples=200, deadline=None)
@given(pairs=st.lists(leaf_pairs(), min_size=1, max_size=8))
def test_a_batch_judges_every_leaf_as_float64_leaf_by_leaf_does(
    device: str, pairs: list[Pair]
) -> None:
    """Whatever a batch passes, leaf by leaf in float64 passes too, with the same largest errors
    up to the leaves' own rounding; what it cannot settle it leaves to that path, so the
    floor's verdict is always the same, and a plain verdict it leaves open the floor passes."""
    pairs = _on(pairs, device)
    batched = closeness.plainly_close_all(pairs)
    exact = closeness.leaf_by_leaf(pairs)
    for (plain, floor), (exact_plain, exact_floor), pair in zip(batched, exact, pairs, strict=True):
        assert (floor is None) == (exact_floor is None), pair
        if plain is not None:
            assert exact_plain is not None, pair
            assert plain == pytest.approx(exact_plain, rel=2**-20, abs=0), pair
        elif exact_plain is not None:
            assert floor is not None, pair  # the floor rule passes it with the same errors
        if floor is not None and exact_floor is not None:
            assert floor == pytest.approx(exact_floor, rel=2**-20, abs=0), pair


# Ops that only make a view or a tensor's header: no kernel runs for them on a GPU.
_NO_KERNEL = {"aten::reshape", "aten::view", "aten::to", "aten::empty", "aten::unsqueeze"}


def _kernel_calls(run: Callable[[], object], device: str) -> int:
    """On a GPU the kernels `run` launches; on the CPU the ATen ops that compute, called from
    Python (not from within another op): each launches at least one kernel on a GPU."""
    cuda = device == "cuda"
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    with profile(activities=activities) as prof:
        run()
        if cuda:
            torch.cuda.synchronize()
    if cuda:
        return sum(1 for event in prof.events() if event.device_type == DeviceType.CUDA)
    return sum(
        1
        for event in prof.events()
        if event.name.startswith("aten::")
        and event.name not in _NO_KERNEL
        and (event.cpu_parent is None or not event.cpu_parent.name.startswith("aten::"))
    )


@pytest.mark.parametrize("device", DEVICES)
def test_the_kernels_of_a_batch_do_not_grow_with_its_leaves(device: str) -> None:
    """On a GPU every op is a kernel launch (or a few): a call's leaves of one dtype cost a
    fixed number of them (about 25 a batch), where leaf by leaf cost at least 5 per leaf."""
    gen = torch.Generator().manual_seed(0)

    def pairs(n: int) -> list[Pair]:
        eager = [torch.randn(16, generator=gen) for _ in range(n)]
        found = [(e * (1 + 1e-8 * i), e, *OPTIONS.tolerances(e.dtype)) for i, e in enumerate(eager)]
        exact = [(torch.arange(3), torch.arange(3), 0.0, 0.0)] * n
        return _on(found + exact, device)

    few, many = pairs(4), pairs(64)
    closeness.plainly_close_all(few)  # warm: the first CUDA calls load kernels
    assert _kernel_calls(lambda: closeness.plainly_close_all(few), device) == _kernel_calls(
        lambda: closeness.plainly_close_all(many), device
    )
    assert all(plain is not None for plain, _ in closeness.plainly_close_all(many))
    assert _kernel_calls(lambda: closeness.leaf_by_leaf(many), device) > 5 * len(many)


def test_a_leaf_outside_its_bound_is_judged_again_in_float64() -> None:
    """One element off by 1e-3 in one leaf of many: the batch leaves that leaf to the float64
    pass, which fails it, and settles the others."""
    gen = torch.Generator().manual_seed(0)
    eager = [torch.randn(32, generator=gen) for _ in range(6)]
    compiled = [e.clone() for e in eager]
    compiled[3][7] += 1e-3 * (abs(float(compiled[3][7])) + 1)
    verdicts = closeness.plainly_close_all(
        [(c, e, *OPTIONS.tolerances(e.dtype)) for c, e in zip(compiled, eager, strict=True)]
    )
    assert [plain is None for plain, _ in verdicts] == [False, False, False, True, False, False]
    assert verdicts[3] == (None, None)


def test_a_relative_difference_past_float32s_range_is_judged_in_float64() -> None:
    # 1000 over a subnormal reference is 1.7e41, past float32's range: the batch, judged in
    # float32, read inf; the leaf-by-leaf pass reports the float64 figure, as the scan does.
    e = torch.tensor([5.8775e-39, 1.6411e19])
    c = e + torch.tensor([1000.0, 0.0])
    [(_, within_floor)] = closeness.plainly_close_all([(c, e, 1.3e-6, 1e-5)])
    exact = closeness.plainly_close(c, e, 1.3e-6, 1e-5 + closeness.noise_floor(e, e.dtype))
    assert within_floor is not None and exact is not None
    assert math.isfinite(within_floor[1]) and within_floor == pytest.approx(exact, rel=2**-20)
