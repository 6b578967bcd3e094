"""Re-runs bounded: where the rounding-noise re-runs a leaf needs would cost more than the call's
bound, the leaf is judged on a sample of its rows, the call re-run on those rows alone.

The re-runs one call needs (eager again, the float64 reference, rounding-noise samples, the
control) cost together about `RERUN_RATIO` times the call's eager side, or `RERUN_FLOOR_S` where
that is more. A plain re-run costs what eager does and the float64 reference two to four times
that on a CPU; a rounding-noise run, whose every operation is also computed in float64 and
hashed, `NOISE_COST` times (measured on a deep tanh stack with a 10M-element output: 22x). So
where those runs would pass the bound on a leaf whose first dimension is the call's batch (every
tensor input of the call shares that first dimension), the rows to judge are chosen (the ones
where compiled is farthest past the float64 reference's allowance, and as many again at
random), the call is re-run plainly on those rows alone, and where that reproduces eager's rows
bit for bit, the noise runs take those rows too and the rule judges the sample. The leaf's note
says so. Where the rows do not re-run alone alike (a batch statistic), the full runs judge it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor

RERUN_RATIO = 3.0
"""The re-runs of one call cost about this many times its eager side, at most."""

RERUN_FLOOR_S = 2.0
"""Re-runs this short are never cut, whatever the call's eager side took."""

NOISE_COST = 22.0
"""A rounding-noise run costs about this many plain re-runs where the call's tensors are large
(the noiseless base about 1.3): the bound's estimate of what the full runs would cost."""

MIN_ROWS = 64
"""A sample holds at least this many rows, however little of the bound is left."""

_SAMPLE_SEED = 0x5A3D1E  # the random rows of a sample: the same for the same leaf


@dataclass(frozen=True)
class Bound:
    """What one call's re-runs may cost: `RERUN_RATIO` times its eager side, at least the floor."""

    eager_seconds: float

    @property
    def allowance(self) -> float:
        return max(RERUN_FLOOR_S, RERUN_RATIO * self.eager_seconds)

    def rows(self, batch: int, spent: float, plain_seconds: float) -> int:
        """How many of `batch` rows the noise runs can take within what is left of the bound
        (`spent` so far; a plain re-run of the whole call took `plain_seconds`): `batch` where
        the full runs fit, else at least MIN_ROWS."""
        full = self.estimate(plain_seconds)
        left = self.allowance - spent
        if full <= left or batch <= 2 * MIN_ROWS:
            return batch
        per_row = (full + plain_seconds) / batch  # and the plain run that shows the rows
        return min(batch, max(MIN_ROWS, math.floor(max(left, 0.0) / per_row)))

    def estimate(self, plain_seconds: float) -> float:
        """What the full noise runs would cost, by `NOISE_COST`: the sample and its mirror,
        and the noiseless base."""
        return (2 * NOISE_COST + 1.3) * plain_seconds


def choose_rows(excess: Tensor, count: int) -> tuple[Tensor, int]:
    """`count` rows of a leaf (sorted indices along its first dimension): the rows holding the
    largest `excess` (how far compiled is past what the float64 reference allows; rows with
    none are never among them), half of them at most, and the rest drawn at random. Also how
    many are the worst."""
    per_row = excess.detach().reshape(excess.shape[0], -1).amax(dim=1).to("cpu", torch.float64)
    failing = int((per_row > 0).sum())
    worst = min(failing, max(1, count // 2))
    chosen = per_row.argsort(descending=True)[:worst]
    rest = torch.ones(per_row.numel(), dtype=torch.bool)
    rest[chosen] = False
    others = rest.nonzero().reshape(-1)
    generator = torch.Generator().manual_seed(_SAMPLE_SEED)
    drawn = others[torch.randperm(others.numel(), generator=generator)[: count - worst]]
    return torch.cat([chosen, drawn]).sort().values, worst


def sample_text(rows: int, batch: int, worst: int, bound: Bound, spent: float, full: float) -> str:
    """What a leaf judged on a sample of its rows says of the sample, for its note."""
    return (
        f"judged on a sample of {rows} of its {batch} rows (dim 0: the {worst} where compiled "
        f"is farthest past the float64 reference's allowance, {rows - worst} at random), the "
        "call re-run on those rows alone (which reproduces eager's rows bit for bit there): "
        f"the full rounding-noise runs would take about {full:.1f} s, and the call's re-runs "
        f"had taken {spent:.1f} s of their bound ({bound.allowance:.1f} s: "
        f"{RERUN_RATIO:g}x its eager side)"
    )
