"""Inductor loses a boolean-mask write that follows an index write into the same tensor
(torch 2.13, CPU): the rows `torch.any(mask != inf, dim=1)` keeps are every row, where eager
keeps none.

    python benchmarks/inductor_masked_index_put_any.py   # exits 1 while compiled differs

Found by zero-change mode on pytorch-metric-learning 2.8.1's `BatchEasyHardMiner` (tests/miners/
test_batch_easy_hard_miner_labels.py on `inductor`: 80 of 156 calls diverged; with
`allowed_pos_range=[0.2, 0.5]` eager mines 0 pairs, compiled 64). This is its `get_x_per_row`,
cut down: a mask of +inf, 1 at the pairs, +inf again where the distance is out of range."""

import sys

import torch


def rows_in_range(mat: torch.Tensor, anchors: torch.Tensor, others: torch.Tensor) -> torch.Tensor:
    inf = float("inf")
    mask = torch.ones_like(mat) * inf
    mask[anchors, others] = 1
    mask[(mat > 0.5) | (mat < 0.2)] = inf
    return torch.any(mask != inf, dim=1)


def main(backends: list[str]) -> int:
    torch.manual_seed(0)
    points = torch.randn(64, 256)
    mat = torch.cdist(points, points)  # about 22 apart: none in [0.2, 0.5]
    labels = torch.randint(0, 10, (64,))
    same = (labels[:, None] == labels[None, :]) & ~torch.eye(64, dtype=torch.bool)
    anchors, others = torch.where(same)
    eager = rows_in_range(mat, anchors, others)
    differing = 0
    for backend in backends:
        torch._dynamo.reset()
        compiled = torch.compile(rows_in_range, backend=backend)(mat, anchors, others)
        agree = torch.equal(eager, compiled)
        differing += not agree
        print(
            f"{backend}: rows kept, eager {int(eager.sum())}, compiled {int(compiled.sum())}: "
            f"{'same' if agree else 'DIFFERS'}"
        )
    print(f"torch {torch.__version__}")
    return 1 if differing else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:] or ["aot_eager", "inductor"]))
