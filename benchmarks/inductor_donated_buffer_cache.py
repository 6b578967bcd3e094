"""A tensor a compiled forward stores for the user (`self.att = att.softmax(-1).detach()`) is
overwritten by the backward when Inductor's FX graph cache already holds the same backward graph,
compiled where that tensor was not an output (torch 2.13, CPU; Inductor only).

    python benchmarks/inductor_donated_buffer_cache.py    # exits 1 while the bug is present

Found by zero-change mode on monai 1.5's own suite (`test_selfattention.py` and
`test_crossattention.py`, `TestResBlock::test_access_attn_matrix`, `--compile-parity=all
--compile-backend=inductor`): the test calls an `SABlock(save_attn=False)`, then one with
`save_attn=True`, whose forward keeps the attention matrix as `self.att_mat`; "attribute att_mat"
differed on every element after the checker's backward. The two forwards differ (the second returns
the softmax), their backward graphs do not. AOTAutograd lets Inductor reuse ("donate") a saved
tensor's memory in the backward only where no forward output aliases it, but the FX graph cache key
leaves the donated indices out: the second backward is the first one's, loaded from the cache, and
its softmax gradient is written in place into the stored attention matrix. A program that reads the
stored matrix after `loss.backward()` (to plot attention during training) gets garbage once any
earlier compile, in this process or another one sharing the cache folder, put that backward in the
cache. Here without the plugin: the stored matrix after a backward, eager and compiled, with a cold
cache, after the `save=False` module was compiled, and the same with the FX graph cache off.
"""

from __future__ import annotations

import copy
import os
import sys
import tempfile

import torch
import torch._inductor.config


class Attention(torch.nn.Module):
    """monai's SABlock, reduced: one head, the attention matrix kept on request."""

    def __init__(self, save: bool) -> None:
        super().__init__()
        self.qk = torch.nn.Linear(16, 32)
        self.save = save
        self.att = torch.Tensor()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k = self.qk(x).chunk(2, dim=-1)
        att = (torch.einsum("bxd,byd->bxy", q, k) * 0.25).softmax(dim=-1)
        if self.save:
            self.att = att.detach()
        return att @ x


def stored_error(x: torch.Tensor, warm_first: bool) -> float:
    """Max |compiled - eager| of the stored matrix after one forward and backward each, in a
    fresh compile cache (warmed by compiling the `save=False` module first where asked)."""
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = tempfile.mkdtemp()
    torch._dynamo.reset()
    if warm_first:
        torch.compile(Attention(save=False), backend="inductor")(x).sum().backward()
        torch._dynamo.reset()
    torch.manual_seed(1)
    eager = Attention(save=True)
    compiled = copy.deepcopy(eager)
    eager(x).sum().backward()
    torch.compile(compiled, backend="inductor")(x).sum().backward()
    return (compiled.att - eager.att).abs().max().item()


def main() -> int:
    torch.manual_seed(0)
    x = torch.randn(2, 8, 16)
    cold = stored_error(x, warm_first=False)
    warm = stored_error(x, warm_first=True)
    with torch._inductor.config.patch(fx_graph_cache=False):
        uncached = stored_error(x, warm_first=True)
    print(
        f"torch {torch.__version__}: stored attention matrix after backward, max |compiled - eager|"
    )
    print(f"  cold cache:                                  {cold:.3g}")
    print(f"  after compiling the save=False module:       {warm:.3g}")
    print(f"  the same with the FX graph cache off:        {uncached:.3g}")
    wrong = max(cold, warm, uncached) > 1e-5
    print("the bug is present" if wrong else "the bug is gone")
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
