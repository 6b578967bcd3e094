"""Parameters and buffers after the call are compared; the caller's module ends as model(x) leaves it."""

from __future__ import annotations

PROGRAM = """
import pytest, torch

@pytest.mark.compile_parity
def test_batchnorm_train(compile_parity):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4)).train()
    for _ in range(2):
        compile_parity(model, torch.randn(2, 3, 6, 6))
    assert int(model[1].num_batches_tracked) == 2
"""


def test_buffers_pass_on_a_correct_backend(pytester):
    pytester.makepyfile(PROGRAM)
    pytester.runpytest("--compile-backend=aot_eager").assert_outcomes(passed=1)


def test_a_skipped_buffer_update_fails_naming_the_buffer(pytester):
    pytester.makepyfile(PROGRAM)
    result = pytester.runpytest("--compile-backend=planted:skip_buffer_update")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*ParityError*", "*buffer '1.running_mean'*"])


def test_module_attribute_changes_reach_the_compiled_copy(pytester):
    pytester.makepyfile(
        """
        import pytest, torch

        class Scale(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.factor = 1.0
            def forward(self, x):
                return x * self.factor

        @pytest.mark.compile_parity
        def test_it(compile_parity):
            model = Scale()
            for factor in (1.0, 2.0, 3.0):
                model.factor = factor
                result = compile_parity(model, torch.ones(3))
                assert float(result.compiled[0]) == factor
        """
    )
    pytester.runpytest("--compile-backend=aot_eager").assert_outcomes(passed=1)
