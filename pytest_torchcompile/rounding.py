"""Rounding noise: eager run as if every operation had rounded its result differently.

The float64 reference tells how far eager and compiled are from the exact answer, but not how far
a correct compiler may be. Where a result cancels (a BatchNorm's bias gradient is exactly zero;
a sum of terms of opposite sign), the rounding of every intermediate value shows up in full and the
two sides are both pure noise: eager's one sample of that noise is no bound on the other's. This
mode estimates the noise itself: each floating result an operation computes is shifted by up to half
a unit in the last place and rounded again, so it lands on its own value or a neighbouring one (the
rounding a different but equally valid evaluation could make), pseudo-randomly but as a function of
the value, so equal values move alike, as real rounding moves them (a constant image stays
constant). It is Monte Carlo arithmetic at the granularity of ATen
operations (Parker, 1997), used only to re-judge a leaf that failed every cheaper rule.
"""

from __future__ import annotations

from typing import Any

import torch

from pytest_torchcompile import _compat

# Multipliers of a 64-bit mixing hash (SplitMix64's, reduced below 2**63 for torch.int64).
_MIX = (0x1E3779B97F4A7C15, 0x3F58476D1CE4E5B9, 0x14D049BB133111EB)
_MANTISSA = (1 << 52) - 1
_SALT = (1 << 62) - 1


def _moved(t: torch.Tensor, salt: int) -> torch.Tensor:
    """`t` with each element shifted by a value-determined fraction in [-1/2, 1/2] of eps and
    rounded back to its dtype: the same value or a neighbouring one."""
    bits = t.detach().to(torch.float64).view(torch.int64)
    mixed = (bits ^ (bits >> 29)) * _MIX[0] + (salt * _MIX[1] & _SALT)
    mixed = (mixed ^ (mixed >> 31)) * _MIX[2]
    unit = ((mixed >> 11) & _MANTISSA).to(torch.float64) / float(_MANTISSA) - 0.5  # [-1/2, 1/2]
    eps = torch.finfo(t.dtype).eps
    return (t.detach().to(torch.float64) * (1 + eps * unit)).to(t.dtype)


def _has_floating_tensor(value: Any) -> bool:
    if isinstance(value, torch.Tensor):
        return value.is_floating_point()
    if isinstance(value, tuple | list):
        return any(_has_floating_tensor(item) for item in value)
    if isinstance(value, dict):
        return any(_has_floating_tensor(item) for item in value.values())
    return False


class RoundingNoise(_compat.dispatch_mode_base()):  # type: ignore[misc]
    """A dispatch mode under which computed floating results carry rounding-level noise.

    Deterministic for one `seed`: the same program on the same values moves the same way. Views,
    in-place and out= operations are left alone (their result is an argument), as are results
    of operations with no floating tensor argument (constants are exact).
    """

    def __init__(self, seed: int) -> None:
        super().__init__()
        self.seed = seed
        self.calls = 0

    def __torch_dispatch__(
        self,
        func: Any,
        types: Any,
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        result = func(*args, **(kwargs or {}))
        if not _compat.computes(func) or not _has_floating_tensor((args, kwargs)):
            return result
        self.calls += 1
        salt = self.seed * 1_000_003 + self.calls

        def move(value: Any) -> Any:
            if (
                isinstance(value, torch.Tensor)
                and value.is_floating_point()
                and value.layout == torch.strided  # sparse values are left as they are
                and value.numel()
            ):
                return _moved(value, salt)
            return value

        if isinstance(result, tuple | list):
            return type(result)(move(value) for value in result)
        return move(result)
