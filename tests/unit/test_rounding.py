"""The rounding-noise mode behind the last parity rule: rounding-level, value-determined, sound."""

from __future__ import annotations

import contextlib
import math

import pytest
import torch

from pytest_torchcompile.running.rounding import RoundingNoise


def _under_noise(seed: int, fn, *args):  # type: ignore[no-untyped-def]
    with RoundingNoise(seed):
        return fn(*args)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64])
def test_results_move_to_a_neighbouring_value_up_or_down(dtype: torch.dtype) -> None:
    x = torch.linspace(-3, 3, 4001, dtype=torch.float64).to(dtype)
    plain = torch.exp(x)
    noisy = _under_noise(0, torch.exp, x)
    moved = noisy.double() - plain.double()
    eps_of_value = plain.double().abs() * torch.finfo(dtype).eps  # one to two ulps
    assert bool((moved.abs() <= 2 * eps_of_value).all())
    # exp(0) = 1 is exact: nothing to move (float64 results, which nothing wider checks, move)
    rounded = (plain.double() != torch.exp(x.double())) | (dtype == torch.float64)
    assert bool((moved[rounded] != 0).all()) and bool((moved[~rounded] == 0).all())
    assert 0.3 < float((moved > 0).double().mean()) < 0.7


def test_exact_results_are_left_alone_as_no_rounding_can_change_them() -> None:
    """A difference of two values that is itself representable (x1 - x2 == margin exactly, in
    bfloat16) is the same in any precision and order; a compiler that moves it computes
    something else, and rule 2 must not call that rounding."""
    step = torch.tensor(0.1, dtype=torch.bfloat16)
    x1 = torch.stack([step, 2 * step, torch.tensor(1.3, dtype=torch.bfloat16)])
    x2 = torch.stack([torch.zeros((), dtype=torch.bfloat16), step, step])
    plain = x1 - x2
    noisy = _under_noise(0, torch.sub, x1, x2)
    assert torch.equal(noisy[:2], plain[:2])  # exact: 0.1 - 0 and 0.2 - 0.1
    assert noisy[2] != plain[2]  # 1.3 - 0.1 rounds in bfloat16: moved


def test_a_float32_reduction_moves_by_about_the_square_root_of_its_terms() -> None:
    x = torch.rand(10000, dtype=torch.float32, generator=torch.Generator().manual_seed(0))
    plain, noisy = x.sum(), _under_noise(0, torch.sum, x)
    ulps = float((noisy.double() - plain.double()).abs() / (plain.double() * torch.finfo().eps))
    assert 80 < ulps < 120  # sqrt(10000) = 100


def test_a_sum_whose_terms_cancel_moves_by_the_terms_not_by_what_is_left() -> None:
    """+-1e307 that cancel to leave a few thousand: another summation order leaves another few
    thousand (eager and aot_eager's sums of one float64 tensor differed by 331 of 1471), so
    the noise is ulps of the terms, not of the small result."""
    gen = torch.Generator().manual_seed(0)
    big = torch.full((8,), 1e307, dtype=torch.float64)
    x = torch.cat([big, -big, torch.rand(3000, dtype=torch.float64, generator=gen)])
    order = torch.randperm(x.numel(), generator=gen)
    plain, reordered = x.sum(), x[order].sum()
    moved = float((_under_noise(0, torch.sum, x) - plain).abs())
    assert moved > 10 * abs(float(reordered - plain))  # the other order is well inside the noise
    assert moved <= 1e307 * torch.finfo(torch.float64).eps * 60  # sqrt(3016) ulps of the terms
    overflowed = torch.tensor([1e308, 1e308, -1.0], dtype=torch.float64)
    for opposite in (False, True):  # one of the two moves it down: inf - inf would be NaN
        with RoundingNoise(0, opposite=opposite):
            assert torch.sum(overflowed) == torch.inf
    sin = _under_noise(0, torch.sin, x)  # not a sum: moved by ulps of its own result
    assert float((sin - torch.sin(x)).abs().max()) <= 2 * torch.finfo(torch.float64).eps


def test_a_mean_moves_by_its_sum_s_noise_over_the_count() -> None:
    """A mean is its sum divided by the count, and so is the error another summation order
    leaves in it: sqrt(n) units of its largest term over n, not sqrt(n) units of that term
    (which excused a 2e-3 error in auraloss's STFT loss, a mean of 1.4M terms whose largest is
    9, where eager's own error is 3e-6)."""
    x = torch.randn(1_000_000, generator=torch.Generator().manual_seed(0)).abs()
    x[0] = 50.0
    moved = abs(float(_under_noise(0, torch.mean, x)) - float(x.mean()))
    summed = abs(float(_under_noise(0, torch.sum, x)) - float(x.sum()))
    assert moved <= 50 * torch.finfo().eps * 1000 / 1_000_000 + 2 * float(x.mean()) * 1e-4
    assert moved < summed / 1000  # the sum moves by sqrt(n) units of 50, the mean by 1/n of that
    rows = torch.randn(4, 10_000, generator=torch.Generator().manual_seed(1))
    rows[:, 0] = 1e3  # cancelling terms: the mean is small, its error sqrt(n) units of 1e3 / n
    by_dim = (_under_noise(0, torch.mean, rows, 1) - rows.mean(1)).abs().max()
    assert float(by_dim) <= 1e3 * torch.finfo().eps * 100 / 10_000 * 2


def test_an_exact_sum_moves_where_its_large_terms_absorb_small_ones_in_another_order() -> None:
    """examples' test_ema_update on CUDA (Inductor, torch 2.11, seeds 2 and 4): an average
    holding +-3.4e38 * 0.1 beside small whole numbers sums to exactly 0 in float64 and in
    eager's order, and to -2 in Inductor's (partial sums holding 3.4e37 absorb the ones and
    twos): exact in one order is not exact in every order, so the noise moves it. A sum of
    small whole numbers whose partial sums are all exact stays."""
    x = torch.tensor([1.0, 1.0, -2.0, 3.4e37, -3.4e37])
    assert float(x.sum()) == 0.0 and float(x.double().sum()) == 0.0
    assert float(x[[3, 4, 0, 1, 2]].sum()) != 0.0  # another order: 2 in torch 2.13 on the CPU
    assert abs(float(_under_noise(0, torch.sum, x))) > 1e30
    small = torch.tensor([1.0, 2.0, 3.0, -1.0])
    assert torch.equal(_under_noise(0, torch.sum, small), small.sum())


def test_a_sum_whose_terms_overflow_in_another_order_is_nan_under_the_noise() -> None:
    """examples' test_ema_update on CUDA (Inductor, torch 2.11, seed 2): an EMA of an expanded
    row holding float32's extremes holds +-3.4e37 sixteen times each; eager's order sums it to
    17.5, Inductor's adds one sign's sixteen first and overflows (NaN). The noisy sum is NaN
    wherever one sign's terms add up past the largest float32, finite elsewhere."""
    big = torch.tensor([3.4e37] * 16 + [-3.4e37] * 16 + [1.0] * 4)
    assert torch.isfinite(big.sum()) and not torch.isfinite(big[:16].sum())
    for reduce in (torch.sum, torch.mean, torch.nansum):
        assert torch.isnan(_under_noise(0, reduce, big)), reduce
    rows = torch.stack([big, torch.ones(36)])
    per_row = _under_noise(0, lambda t: t.sum(dim=1), rows)
    assert torch.isnan(per_row[0]) and torch.isfinite(per_row[1])
    fits = torch.tensor([3.4e37] * 9 + [-3.4e37] * 9)  # 9 of them stay under 3.4e38
    assert torch.isfinite(_under_noise(0, torch.sum, fits))
    with RoundingNoise(0, noise=False):  # the noiseless base is eager's own sum
        assert torch.equal(torch.sum(big), big.sum())


def test_a_variance_moves_by_ulps_of_itself_not_of_its_inputs_offset() -> None:
    """A variance's terms are deviations from the mean, not its input: at an offset of 2**18 a
    float32 variance of about 1 is moved by ulps of 1, so a compiler that accumulates it in float32
    (5e-4 off, a real Inductor divergence) is not excused as rounding."""
    gen = torch.Generator().manual_seed(0)
    x = 2.0**18 + torch.randn(4, 1000, generator=gen)
    plain, noisy = torch.var(x, -1), _under_noise(0, torch.var, x, -1)
    relative = ((noisy - plain).abs() / plain).max()
    assert 0 < float(relative) < 1e-5


def test_equal_values_move_alike_as_rounding_moves_them() -> None:
    constant = torch.full((1000,), 0.0378, dtype=torch.bfloat16)
    noisy = _under_noise(3, torch.mul, constant, 1.7)
    assert bool((noisy == noisy[0]).all())  # a constant image stays constant


def test_the_noise_is_deterministic_per_seed() -> None:
    x = torch.randn(256, generator=torch.Generator().manual_seed(0))
    first, again = _under_noise(1, torch.sin, x), _under_noise(1, torch.sin, x)
    other = _under_noise(2, torch.sin, x)
    assert torch.equal(first, again)
    assert not torch.equal(first, other)


def test_views_in_place_ops_and_constants_are_left_alone() -> None:
    x = torch.randn(4, 4)
    y = x.clone()
    with RoundingNoise(0):
        view = x.t()
        ones = torch.ones(3)
        y.add_(1.0)
    assert view.data_ptr() == x.data_ptr()
    assert torch.equal(ones, torch.ones(3))
    assert torch.equal(y, x + 1.0)


def test_fused_operations_are_decomposed_and_the_plain_base_has_no_noise() -> None:
    from pytest_torchcompile._compat import compiler_decompositions

    x = torch.randn(4, 3, 5, 5, generator=torch.Generator().manual_seed(0)) + 20.0
    bn = torch.nn.BatchNorm2d(3).train()
    seen: list[str] = []

    class Recording(RoundingNoise):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
            seen.append(str(func))
            return super().__torch_dispatch__(func, types, args, kwargs)

    with Recording(0, noise=False, decompositions=compiler_decompositions()):
        base = bn(x)
    assert any("var_mean" in name or "mean" in name for name in seen), seen  # BN's statistics
    torch.testing.assert_close(base, bn(x))  # noiseless: the decomposition, at rounding level
    with RoundingNoise(0, decompositions=compiler_decompositions()):
        noisy = bn(x)
    assert not torch.equal(noisy, base)


def test_backward_runs_under_the_mode_and_gradients_carry_noise() -> None:
    generator = torch.Generator().manual_seed(0)
    w = torch.randn(64, 64, generator=generator, requires_grad=True)
    x = torch.randn(8, 64, generator=generator)
    plain = torch.autograd.grad((x @ w).tanh().sum(), w)[0]
    with RoundingNoise(0):
        noisy = torch.autograd.grad((x @ w).tanh().sum(), w)[0]
    assert not torch.equal(noisy, plain)
    # at rounding level: x @ w sums 64 products of about |x||w|, which move by sqrt(64) units of
    # their sum; through tanh' and x.T @ g that is some hundreds of units of the gradient's scale
    scale = float(plain.abs().max())
    torch.testing.assert_close(noisy, plain, rtol=0, atol=512 * torch.finfo().eps * scale)


def test_a_matrix_product_moves_by_its_terms_where_they_cancel() -> None:
    """A point's distance to itself through cdist's matrix product (|x|^2 + |x|^2 - 2 x.x) is
    a residue of terms of |x|^2 in float32, 0 in float64 and in a compiler's direct difference:
    the noise moves it by units of those terms, so one sample or its mirror reaches 0 or near it
    (a third of the way at least, the boundary rule's test), while an
    element far from cancelling moves by a few units of its own value."""
    from pytest_torchcompile._compat import compiler_decompositions

    x = torch.randn(64, 32, generator=torch.Generator().manual_seed(0)) * 10
    plain = torch.cdist(x, x)
    assert bool((plain.diagonal() > 0).any())  # eager's residue
    samples = []
    for opposite in (False, True):
        with RoundingNoise(0, opposite=opposite, decompositions=compiler_decompositions()):
            samples.append(torch.cdist(x, x))
    residue = plain.diagonal()
    nearer = torch.minimum(samples[0].diagonal(), samples[1].diagonal())
    # (most, not all: the norms that feed the product move too, so the mirror is no exact
    # opposite; and the terms' running sum reaches 2|x|^2, the -2 x.x before |x|^2 + |x|^2, half
    # their sum |a||b|, which the noise's scale was until it overstated random-signed products)
    reached = (nearer <= residue * 2 / 3)[residue > 0]
    assert float(reached.double().mean()) >= 0.6
    assert bool((nearer == 0).any())
    off = ~torch.eye(64, dtype=torch.bool)
    step = (samples[0] - plain)[off].abs() / plain[off]
    assert 0 < float(step.max()) <= 8 * math.sqrt(34) * torch.finfo().eps


def test_sparse_results_pass_through() -> None:
    dense = torch.eye(4)
    with RoundingNoise(0):
        sparse = (dense * 2.0).to_sparse()
        doubled = sparse * 2.0
    assert doubled.is_sparse
    assert bool((doubled.to_dense() - dense * 4.0).abs().max() <= 4.0 * torch.finfo().eps)


def test_half_precision_reductions_accumulate_in_float32_and_selections_sum_nothing() -> None:
    x = torch.rand(10000, generator=torch.Generator().manual_seed(0)).to(torch.bfloat16)
    plain, noisy = x.sum(), _under_noise(0, torch.sum, x)
    step = float(plain.double().abs()) * torch.finfo(torch.bfloat16).eps
    assert abs(float(noisy) - float(plain)) <= 2 * step  # a neighbour, not 100 bfloat16 ulps
    table = torch.rand(100000, 4, generator=torch.Generator().manual_seed(1))
    rows = torch.tensor([3, 7])
    picked = _under_noise(0, torch.nn.functional.embedding, rows, table)
    moved = (picked.double() - table[rows].double()).abs()
    assert bool((moved <= 2 * table[rows].double().abs() * torch.finfo().eps).all())


def test_operators_without_a_schema_are_left_alone() -> None:
    # Higher-order operators (torch.cond's, ...) reach dispatch modes without an ATen schema.
    from pytest_torchcompile import _compat

    assert not _compat.computes(object())
    assert _compat.computes(torch.ops.aten.add.Tensor)
    assert not _compat.computes(torch.ops.aten.add_.Tensor)  # writes its argument
    assert not _compat.computes(torch.ops.aten.view.default)  # a view
    assert _compat.op_name(torch.ops.aten.embedding.default) == "embedding"


def test_the_mirrored_sample_moves_every_value_the_other_way() -> None:
    """The mirror moves every rounded value the other way and leaves exact ones alone, so a
    difference one sample leaves on one side of a kink (a channel's interior minus its mean),
    the other takes across, where rounding can."""
    x = torch.linspace(-3, 3, 4001, dtype=torch.float64).to(torch.bfloat16)
    plain = torch.exp(x)
    with RoundingNoise(0):
        up = torch.exp(x)
    with RoundingNoise(0, opposite=True):
        down = torch.exp(x)
    moved, mirrored = up.double() - plain.double(), down.double() - plain.double()
    rounded = moved != 0
    assert bool((torch.sign(moved[rounded]) == -torch.sign(mirrored[rounded])).all())
    assert bool((mirrored[~rounded] == 0).all())  # exact results stay in both


def test_a_kink_one_sample_leaves_alone_its_mirror_crosses() -> None:
    """relu(a * w - mean(a * w)) of a constant bfloat16 tensor: eager sits on the kink (the
    difference is exactly 0), and its gradient is masked. A compiler computing a little wider
    lands on the other side, which one noise sample or its mirror does too (the two rounded
    products move apart one way in one, the other way in the other): rounding, excused; a
    compiler that moves the gradient further is not."""
    from pytest_torchcompile.judging.parity import CompareOptions, compare
    from pytest_torchcompile.running.sides import SideResult

    a = torch.full((64,), 0.3, dtype=torch.bfloat16)
    weight = torch.full((64,), 1.7, dtype=torch.bfloat16)
    cotangent = torch.randn(64, generator=torch.Generator().manual_seed(0)).to(torch.bfloat16)

    def gradient(mode: RoundingNoise | None) -> torch.Tensor:
        w = weight.clone().requires_grad_()
        with mode if mode is not None else contextlib.nullcontext():
            out = torch.relu(a * w - (a * weight).mean())
        (grad,) = torch.autograd.grad(out, [w], cotangent)
        return grad

    def side(grad: torch.Tensor) -> SideResult:
        return SideResult(None, None, {}, {"grad of input 0": grad})

    eager = gradient(None)
    first = gradient(RoundingNoise(1))  # seed 1: this sample keeps eager on its side
    mirror = gradient(RoundingNoise(1, opposite=True))
    assert torch.equal(eager, torch.zeros_like(eager))  # on the kink: relu'(0) = 0
    assert torch.equal(first, eager) and not torch.equal(mirror, eager)
    crossed = a * cotangent  # the kink passed
    noise = {
        "perturbed": lambda: side(first),
        "mirrored": lambda: side(mirror),
        "noise_base": lambda: side(eager),
    }
    report = compare(side(eager), side(crossed), CompareOptions(), **noise)
    assert report.ok, report.failure_message()
    wrong = compare(side(eager), side(crossed * 4), CompareOptions(), **noise)
    assert not wrong.ok and "moved the other way" in wrong.failure_message()


def test_a_products_scale_takes_alpha_and_beta_by_magnitude() -> None:
    """addmm's alpha and beta come as keywords: C - 2 A B, cancelling to a residue, has terms
    of the scale |C| + 2 |A||B|, and its noise moves it by units of that scale, not of the
    residue (a negative alpha taken as it is would cancel the scale too)."""
    generator = torch.Generator().manual_seed(0)
    a = torch.randn(8, 16, generator=generator) * 10
    c = 2 * (a @ a.T)
    plain = torch.addmm(c, a, a.T, alpha=-2)
    with RoundingNoise(0):
        noisy = torch.addmm(c, a, a.T, alpha=-2)
    # on the diagonal, |A||B| is A B itself: a negative alpha would leave no scale there
    terms = float(c.diagonal().max())
    assert float(plain.diagonal().abs().max()) < 1e-3 * terms  # the residue
    assert float((noisy - plain).diagonal().abs().max()) >= torch.finfo().eps * terms


def test_a_product_of_random_signed_terms_moves_by_their_norm_not_their_absolute_sum() -> None:
    """Each element of a @ b sums 512 random-signed products, whose partial sums walk about
    as far as their norm: sqrt(512) units of that is another order's error. Sum |a||b| takes
    every term as of one sign, about 18 times the norm here, and excused a 1e-3 error."""
    generator = torch.Generator().manual_seed(0)
    a, b = torch.randn(4, 512, generator=generator), torch.randn(512, 4, generator=generator)
    plain, noisy = a @ b, _under_noise(0, torch.mm, a, b)
    norm = (a.double().square() @ b.double().square()).sqrt()
    absolute = a.double().abs() @ b.double().abs()
    shift = math.sqrt(512) * torch.finfo().eps
    step = (noisy.double() - plain.double()).abs()
    # a walk's running sum reaches a few times its norm at most; the absolute sum is far above
    assert bool((step > 0).all()) and bool((step <= 4 * shift * norm).all())
    assert float((step / (shift * absolute)).max()) < 0.25
