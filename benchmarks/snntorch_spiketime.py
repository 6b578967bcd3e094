"""Inductor's C++ code for snntorch's SpikeTime loss does not compile (torch 2.13, CPU).

    python benchmarks/snntorch_spiketime.py          # exits 1 while the bug is present

Found by zero-change mode on snntorch 1.0's own suite (`tests/test_snntorch/functional/
test_loss.py`, `--compile-parity=all --compile-backend=inductor`: four temporal-loss tests,
"compiled raised CppCompileError", stage TorchInductor). Here without the plugin: the
`SpikeTime` module that `snntorch.functional.mse_temporal_loss` holds, called on the test's
inputs (spikes of shape time x batch x neurons, int64 targets), eagerly and compiled. On torch
2.13 the compiled call raises `no matching function for call to max_masked_reduce(VecMask<float,
1>&, VecMask<long int, 2>&, ...)` where eager returns. Needs `pip install snntorch`.
"""

from __future__ import annotations

import sys

import torch


def main() -> int:
    import snntorch.functional as sf

    torch.manual_seed(0)
    spikes = torch.randint(2, (3, 3, 3)).float()
    targets = torch.tensor([1, 2, 0], dtype=torch.int64)
    loss = sf.mse_temporal_loss(reduction="none")
    spike_time = next(m for m in vars(loss).values() if type(m).__name__ == "SpikeTime")
    eager = spike_time(spikes, targets)
    print(f"eager: {[tuple(t.shape) for t in eager]}")
    try:
        compiled = torch.compile(spike_time, backend="inductor")(spikes, targets)
    except Exception as exc:  # the bug: Inductor's C++ does not compile
        print(
            f"compiled raised {type(exc).__name__}: {str(exc).splitlines()[0]}: the bug is present"
        )
        return 1
    same = all(torch.equal(a, b) for a, b in zip(eager, compiled, strict=True))
    print("compiled agrees: the bug is gone" if same else "compiled differs")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
