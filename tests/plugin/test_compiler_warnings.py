"""The warnings torch issues while the checker compiles are the compiler's, not the test's: they
neither fail a suite that turns warnings into errors nor fill its warnings summary, while the
warnings of the test's own code stay its own on both sides."""

from __future__ import annotations

import os
import sys
import warnings

import pytest
import torch

from pytest_torchcompile import _compat

USER_CODE = """
import warnings
import pytest, torch

def noisy(x):
    warnings.warn("the user's own warning", UserWarning)
    return x * 2

@pytest.mark.compile_parity
def test_linear(compile_parity):
    compile_parity(torch.nn.Linear(3, 2), torch.randn(4, 3))

@pytest.mark.compile_parity
def test_pytest_warns_sees_the_users_warning(compile_parity):
    with pytest.warns(UserWarning, match="the user's own warning"):
        compile_parity(noisy, torch.randn(3))
"""

RAISED_ALIKE = """

@pytest.mark.compile_parity
def test_the_users_warning_as_an_error_is_raised_alike(compile_parity):
    with pytest.raises(UserWarning, match="the user's own warning"):
        compile_parity(noisy, torch.randn(3))
"""

UNCAUGHT = """

@pytest.mark.compile_parity
def test_the_users_warning_reaches_the_summary(compile_parity):
    compile_parity(noisy, torch.randn(3))
"""

# A backend whose compiles, forward and (lazily) backward, warn from a module named as torch's:
# the warnings any torch version issues while it compiles, whatever they are.
WARNING_BACKEND = """
import warnings
from functorch.compile import make_boxed_func
from torch._dynamo.backends.common import aot_autograd

_TORCH = {"__name__": "torch._inductor.planted", "warnings": warnings}
exec(
    "def warn(stage):\\n"
    "    warnings.warn(f'torch.planted is deprecated ({stage})', DeprecationWarning)\\n",
    _TORCH,
)

def _compiler(stage):
    def compile_graph(gm, example_inputs):
        _TORCH["warn"](stage)
        return make_boxed_func(gm.forward)
    return compile_graph

backend = aot_autograd(fw_compiler=_compiler("forward"), bw_compiler=_compiler("backward"))
"""


# Other plugins a machine has installed (pytest-benchmark warns at configure time when xdist is
# present) would fail an inner run under `-W error` before any test: only torch's warnings are
# under test here.
NO_FOREIGN_WARNINGS = ("-p", "no:benchmark", "-p", "no:cacheprovider")


def test_warnings_of_the_compile_neither_fail_nor_show_while_the_users_stay(pytester):
    pytester.makepyfile(warning_backend=WARNING_BACKEND)
    pytester.syspathinsert()
    pytester.makepyfile(test_user=USER_CODE + RAISED_ALIKE)
    errors = pytester.runpytest(
        "--compile-backend=warning_backend:backend", "-W", "error", *NO_FOREIGN_WARNINGS
    )
    errors.assert_outcomes(passed=3)
    pytester.makepyfile(test_user=USER_CODE + UNCAUGHT)
    shown = pytester.runpytest("--compile-backend=warning_backend:backend", *NO_FOREIGN_WARNINGS)
    shown.assert_outcomes(passed=3)
    shown.stdout.fnmatch_lines(["*warnings summary*", "*UserWarning: the user's own warning"])
    shown.stdout.no_fnmatch_line("*torch.planted is deprecated*")


@pytest.mark.parametrize("errors", [True, False], ids=["filterwarnings-error", "plain"])
def test_an_inductor_suite_passes_under_error_filters_and_shows_no_torch_warnings(
    pytester, monkeypatch, errors
):
    """Inductor's compile imports torch.utils.mkldnn, which issues 14 DeprecationWarnings
    (torch 2.13): in a fresh process, with a fresh cache, as a user's first run meets them."""
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(pytester.path / "inductor-cache"))
    if errors:
        pytester.makeini("[pytest]\nfilterwarnings =\n    error\n")
    pytester.makepyfile(test_user=USER_CODE + (RAISED_ALIKE if errors else UNCAUGHT))
    result = pytester.runpytest_subprocess("--compile-backend=inductor", *NO_FOREIGN_WARNINGS)
    result.assert_outcomes(passed=3)
    result.stdout.no_fnmatch_line("*site-packages/torch/*Warning*")
    if not errors:
        result.stdout.fnmatch_lines(["*UserWarning: the user's own warning"])


def test_the_stage_bisect_under_error_filters_blames_the_stage_that_diverges(pytester, monkeypatch):
    """The bisect replays through aot_eager_decomp_partition, whose first compile in a process
    imports torch.utils.mkldnn: its DeprecationWarnings made that stage "diverge" under
    `-W error::DeprecationWarning`, for a bug of the backend after it."""
    pytester.makepyfile(
        corrupt="""
        def backend(gm, example_inputs):
            def run(*args):
                return [out + 1 for out in gm(*args)]
            return run
        """,
        test_bad="""
        import pytest, torch

        @pytest.mark.compile_parity
        def test_doubled(compile_parity):
            compile_parity(lambda x: x * 2, torch.randn(3))
        """,
    )
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(pytester.path / "inductor-cache"))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(pytester.path), *sys.path]))
    result = pytester.runpytest_subprocess(
        "--compile-backend=corrupt:backend", "-W", "error::DeprecationWarning", *NO_FOREIGN_WARNINGS
    )
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        ["E * stage: Dynamo OK, AOTAutograd OK, decompositions OK -> corrupt:backend diverges"]
    )


def test_the_checkers_dynamo_reset_drops_torchs_import_warnings(monkeypatch):
    """Where CUDA is present, torch._dynamo.reset() imports Inductor's cudagraph trees and with
    them torch.utils.mkldnn's DeprecationWarnings (torch 2.11+cu130): the reset around every
    check must not fail a test under `filterwarnings = error`. Here the reset warns from a
    module named as torch's, whatever this machine's torch imports."""
    planted: dict[str, object] = {"__name__": "torch._inductor.planted", "warnings": warnings}
    exec(
        "def reset():\n    warnings.warn('torch.planted is deprecated', DeprecationWarning)\n",
        planted,
    )
    monkeypatch.setattr(torch._dynamo, "reset", planted["reset"])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _compat.reset_dynamo()  # dropped: the compiler's own
        with pytest.raises(DeprecationWarning):
            warnings.warn("the user's own", DeprecationWarning, stacklevel=1)  # filters stand
