"""One readable line per tensor, for failure messages and Hypothesis's notes alike.

Its own room: the failure messages (messages.py, repro.py) need it without importing the
Hypothesis strategies, and the strategies (which show it as `tcst.describe`) without the checker.
"""

from __future__ import annotations

import torch


def describe(t: torch.Tensor) -> str:
    """One readable line for a failure report, e.g.
    ``float16[2, 3] strides=(1, 2) offset=4 cpu non-contiguous``. Raises nothing.

    Example::

        assert tcst.describe(torch.zeros(2, 3)) == (
            "float32[2, 3] strides=(3, 1) offset=0 cpu contiguous"
        )
    """
    head = f"{str(t.dtype).removeprefix('torch.')}[{', '.join(map(str, t.shape))}]"
    if t.layout != torch.strided:
        return f"{head} {str(t.layout).removeprefix('torch.')} {t.device}"
    if t.is_contiguous():
        flags = ["contiguous"]
    elif t.dim() == 4 and t.is_contiguous(memory_format=torch.channels_last):
        flags = ["channels_last"]
    elif t.dim() == 5 and t.is_contiguous(memory_format=torch.channels_last_3d):
        flags = ["channels_last_3d"]
    else:
        flags = ["non-contiguous"]
    if any(stride == 0 and size > 1 for stride, size in zip(t.stride(), t.shape, strict=True)):
        flags.append("expanded")
    if t.requires_grad:
        flags.append("requires_grad")
    strides = tuple(t.stride())
    return f"{head} strides={strides} offset={t.storage_offset()} {t.device} {' '.join(flags)}"


__all__ = ["describe"]
