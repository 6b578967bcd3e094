"""Real TorchInductor bugs the plugin's own property tests found, kept as end-to-end tests.

Each test runs the shrunk program through the plugin on the torch version where it was seen and
expects the failure the plugin reports for it. When an upgrade fixes the bug, the test fails
with "passed" where it expected "failed": then drop it, and the note in hypothesis_properties.py.
"""

from __future__ import annotations

import pytest
import torch

SEEN_ON = "2.13.0"


@pytest.mark.skipif(
    torch.__version__.split("+")[0] != SEEN_ON, reason=f"seen on torch {SEEN_ON} (CPU) only"
)
def test_float16_conv_backward_after_a_recompile_on_cpu_inductor(pytester):
    # Found by hypothesis_properties.py::test_conv_block on --compile-backend=inductor. Shrunk:
    # a float16 Conv2d+ReLU compiled for a (1, 1, 1, 1) input, then recompiled (automatic dynamic
    # shapes) for (1, 16, 70, 2): the compiled backward fails Inductor's own stride assertion.
    # float32 and bfloat16 pass, and so does either shape alone.
    pytester.makepyfile(
        """
        import pytest, torch

        class Block(torch.nn.Module):
            def __init__(self, channels):
                super().__init__()
                self.conv = torch.nn.Conv2d(channels, 4, 3, padding=1)

            def forward(self, x):
                return torch.relu(self.conv(x))

        @pytest.mark.compile_parity(devices=["cpu"])
        def test_it(compile_parity):
            torch.manual_seed(0)
            for shape in [(1, 1, 1, 1), (1, 16, 70, 2)]:
                x = torch.randn(shape, dtype=torch.float16)
                compile_parity(Block(shape[1]).to(torch.float16), x)
        """
    )
    result = pytester.runpytest("--compile-backend=inductor")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*ParityError*",
            "*exception: eager returned normally, compiled raised in the backward AssertionError: expected size*",
            "*input 0: float16[[]1, 16, 70, 2]*",
        ]
    )
