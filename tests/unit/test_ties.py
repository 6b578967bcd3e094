"""running/ties.py: ordering operations with near-equal values taken the other way round."""

from __future__ import annotations

import torch

from pytest_torchcompile.running.rounding import RoundingNoise

UP = torch.nextafter(torch.tensor(1.0), torch.tensor(2.0)).item()  # one unit above 1.0


def reordered(fn, *args, order="reversed"):
    with RoundingNoise(0, noise=False, ties=order):
        return fn(*args)


def test_topk_and_sort_take_near_and_exactly_equal_values_the_other_way() -> None:
    x = torch.tensor([1.0, 3.0, UP, 2.0, 3.0])
    assert torch.topk(x, 3).indices.tolist() == [1, 4, 3]
    assert reordered(torch.topk, x, 3).indices.tolist() == [4, 1, 3]  # equal 3.0s swapped
    values, indices = reordered(torch.sort, x)
    assert indices.tolist() == [2, 0, 3, 4, 1]  # 1.0 and one unit above, then the equal 3.0s
    assert torch.equal(values, x[indices])


def test_argmin_takes_a_near_tie_the_other_way_and_keeps_the_first_of_equal_values() -> None:
    near = torch.tensor([UP, 1.0, 4.0])
    assert near.argmin().item() == 1 and reordered(torch.argmin, near).item() == 0
    equal = torch.tensor([3.0, 1.0, 1.0])  # argmin promises the first of equal values
    assert reordered(torch.argmin, equal).item() == 1
    two_up = torch.nextafter(torch.tensor(2.0), torch.tensor(3.0)).item()
    values, indices = reordered(torch.max, torch.tensor([[0.0, two_up, 2.0]]), 1)
    assert indices.tolist() == [2] and values.tolist() == [2.0]  # 2 and 2+ulp: the other one


def test_values_apart_by_more_than_rounding_keep_their_order() -> None:
    x = torch.tensor([1.0, 1.001, 0.999, 5.0])
    assert reordered(torch.sort, x).indices.tolist() == torch.sort(x).indices.tolist()
    assert reordered(torch.argmin, x).item() == 2


def test_a_stable_sort_and_non_finite_values_are_left_alone() -> None:
    x = torch.tensor([2.0, 2.0, 1.0])
    assert reordered(lambda t: torch.sort(t, stable=True), x).indices.tolist() == [2, 0, 1]
    nan = torch.tensor([UP, 1.0, float("nan")])
    assert reordered(torch.sort, nan).indices.tolist() == torch.sort(nan).indices.tolist()


def test_keepdim_and_a_flattened_argmax_keep_torch_shapes() -> None:
    x = torch.tensor([[1.0, 5.0], [5.0, 2.0]])
    assert reordered(lambda t: t.argmax(), x).shape == x.argmax().shape
    flat_kept = reordered(lambda t: t.argmax(keepdim=True), x)
    assert torch.equal(flat_kept, x.argmax(keepdim=True))  # shape (1, 1), the first 5.0
    assert reordered(lambda t: t.argmax(1, keepdim=True), x).shape == (2, 1)
    values, indices = reordered(lambda t: t.min(0, keepdim=True), x)
    assert values.shape == indices.shape == (1, 2)
    assert torch.equal(values, x.min(0, keepdim=True).values)


def test_equal_values_come_in_the_other_order_than_eagers_own_topk_not_the_index_order() -> None:
    # topk keeps no index order among equal values (pytorch-metric-learning's miner: the
    # distances of (i, j) and (j, i)); the other order is the other of eager's own.
    for size in (5, 100, 5000):
        x = torch.linspace(0, 1, size)[
            torch.randperm(size, generator=torch.Generator().manual_seed(size))
        ]
        x[size // 3] = x[size - 2] = 2.0  # two equal largest values
        eager = torch.topk(x, 2).indices
        assert reordered(torch.topk, x, 2).indices.tolist() == eager.flip(0).tolist()


def test_a_group_of_four_is_also_taken_two_by_two_from_its_first_and_from_its_second() -> None:
    # Two pairs of equal values five units apart: one group of four near-equal values.
    far = 1.0 + 5 * torch.finfo(torch.float32).eps
    x = torch.tensor([1.0, 1.0, far, far, 7.0, 0.5])
    eager = torch.topk(x, 6).indices.tolist()
    assert eager[0] == 4 and eager[5] == 5 and sorted(eager[1:3]) == [2, 3]
    group = eager[1:5]
    assert reordered(torch.topk, x, 6).indices.tolist()[1:5] == group[::-1]
    pairs = reordered(torch.topk, x, 6, order="pairs").indices.tolist()
    assert pairs[1:5] == [group[1], group[0], group[3], group[2]]
    shifted = reordered(torch.topk, x, 6, order="pairs shifted").indices.tolist()
    assert shifted[1:5] == [group[0], group[2], group[1], group[3]]
    assert pairs[0] == shifted[0] == 4 and pairs[5] == shifted[5] == 5  # outside the group
    three = torch.tensor([3.0, 1.0, far, 1.0])  # a group of three: its last stays in pairs
    eager_three = torch.sort(three).indices.tolist()
    paired = reordered(torch.sort, three, order="pairs").indices.tolist()
    assert paired == [eager_three[1], eager_three[0], eager_three[2], eager_three[3]]
