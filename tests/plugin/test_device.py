"""The device fixture: cpu and every CUDA device, filtered by --compile-devices and the marker."""

from __future__ import annotations

import pytest
import torch

PROGRAM = """
import pytest, torch

@pytest.mark.compile_parity{marker}
def test_it(compile_parity, device):
    compile_parity(lambda x: x.cos(), torch.ones(3, device=device))
"""

NO_CUDA = not torch.cuda.is_available()


@pytest.mark.skipif(not NO_CUDA, reason="checks the no-CUDA skip")
def test_cuda_is_skipped_with_a_reason_without_a_gpu(pytester):
    pytester.makepyfile(PROGRAM.format(marker=""))
    result = pytester.runpytest("--compile-backend=aot_eager", "-rs", "-v")
    result.assert_outcomes(passed=1, skipped=1)
    result.stdout.fnmatch_lines(
        ["*test_it?cpu? PASSED*", "*SKIPPED*cuda: no CUDA device is visible*"]
    )


def test_compile_devices_filters(pytester):
    pytester.makepyfile(PROGRAM.format(marker=""))
    result = pytester.runpytest("--compile-backend=aot_eager", "--compile-devices=cpu", "-v")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*test_it?cpu? PASSED*"])


def test_marker_devices_override_the_command_line(pytester):
    pytester.makepyfile(PROGRAM.format(marker="(devices=['cuda:7'])"))
    result = pytester.runpytest("--compile-backend=aot_eager", "--compile-devices=cpu", "-v", "-rs")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(["*test_it?cuda:7? SKIPPED*", "*cuda:7:*"])


def test_device_param_is_left_to_tests_that_choose_their_own(pytester):
    pytester.makepyfile(
        """
        import pytest, torch

        @pytest.mark.compile_parity
        @pytest.mark.parametrize("device", ["cpu"])
        def test_it(compile_parity, device):
            compile_parity(lambda x: x.cos(), torch.ones(3, device=device))
        """
    )
    pytester.runpytest("--compile-backend=aot_eager").assert_outcomes(passed=1)
