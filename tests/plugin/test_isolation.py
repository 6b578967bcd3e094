"""Each test starts clean and leaves nothing behind, so test order never changes a verdict."""

from __future__ import annotations

import subprocess
import sys


def test_configs_grad_mode_and_dtype_are_restored(pytester):
    pytester.makepyfile(
        """
        import pytest, torch
        import torch._dynamo.config as dynamo_config
        import torch._inductor.config as inductor_config

        @pytest.mark.compile_parity
        def test_changes_everything(compile_parity):
            assert not inductor_config.fallback_random  # on only where a graph draws
            dynamo_config.recompile_limit = 1
            torch.set_grad_enabled(False)
            torch.set_default_dtype(torch.float64)
            compile_parity(lambda x: x + 1, torch.ones(2))

        def test_sees_a_clean_world():
            assert dynamo_config.recompile_limit == 8
            assert not inductor_config.fallback_random
            assert torch.is_grad_enabled()
            assert torch.get_default_dtype() == torch.float32
        """
    )
    pytester.runpytest("--compile-backend=aot_eager", "-p", "no:randomly").assert_outcomes(passed=2)


def test_dropout_compares_under_the_same_rng(pytester):
    pytester.makepyfile(
        """
        import pytest, torch

        @pytest.mark.compile_parity
        def test_it(compile_parity):
            compile_parity(torch.nn.Dropout(0.5).train(), torch.ones(64, 64))
        """
    )
    pytester.runpytest("--compile-backend=aot_eager").assert_outcomes(passed=1)


def test_a_session_without_parity_tests_does_not_import_torch(tmp_path):
    (tmp_path / "test_plain.py").write_text(
        "import sys\n\ndef test_plain():\n    assert 'torch' not in sys.modules\n"
    )
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "torchcompile",
            "-q",
            str(tmp_path / "test_plain.py"),
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 passed" in done.stdout
