"""The `compile_parity` and `device` fixtures: thin, so the work stays in runner.py."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest

from pytest_torchcompile.stash import CHECKER_KEY, SESSION_KEY, TMP_PATHS_KEY, settings_of
from pytest_torchcompile.workers import worker_gpu

if TYPE_CHECKING:
    import torch

    from pytest_torchcompile.runner import Checker


@pytest.fixture
def compile_parity(request: pytest.FixtureRequest) -> Iterator[Checker | EagerOnly]:
    """Call it as `compile_parity(model_or_fn, *args, **kwargs)`: eager vs compiled, or fail.

    Each call runs the callable eagerly and compiled, compares them and raises ``ParityError``
    where they differ (see :meth:`pytest_torchcompile.runner.Checker.__call__` for its arguments,
    the :class:`~pytest_torchcompile.runner.ParityResult` it returns and what else it raises).
    The settings are the test's ``compile_parity`` marker keys over the ``--compile-*`` options
    over the ini keys over the defaults; ``compile_parity.settings`` shows them, with where each
    came from.

    One checker per test: every call (and every Hypothesis example) shares its compile cache,
    so guards and recompiles behave as in a real program; in a Hypothesis test, hitting the
    recompile limit starts a fresh cache instead of running an example eagerly. The test runs
    in a clean compile world: Dynamo reset, configs, grad mode and default dtype restored.
    Under --compile-parity=off it only runs the callable eagerly (see EagerOnly).

    When the test ends, its budgets are judged over all its calls: it fails with
    ``GraphBreakBudgetExceeded``, ``RecompileLimitExceeded`` or ``EagerFallbackError`` (a frame
    ran eagerly), and a test marked ``compile_parity`` that never calls the fixture fails with
    ``UnusedCheckerError``. After a parity failure the failure message names the compiler stage
    that diverged and a standalone repro.

    Example::

        @pytest.mark.compile_parity(max_recompiles=1)
        def test_mlp(compile_parity, device):
            model = MLP().to(device)
            compile_parity(model, torch.randn(8, 16, device=device))
            compile_parity(model, torch.randn(4, 16, device=device))  # a second shape
    """
    from pytest_torchcompile.runner import Checker
    from pytest_torchcompile.running.recorder import Recorder

    if request.config.stash[SESSION_KEY].parity == "off":
        yield EagerOnly()
        return
    settings = settings_of(request.node)
    examples = getattr(getattr(request.node, "obj", None), "is_hypothesis_test", False) is True
    checker = Checker(settings, examples=examples)
    checker.recorder = Recorder(examples=examples)  # so that a failure can be replayed (triage.py)
    request.node.stash[CHECKER_KEY] = checker
    request.node.stash[TMP_PATHS_KEY] = request.getfixturevalue("tmp_path_factory")
    with checker.isolated():
        yield checker


class EagerOnly:
    """The fixture under --compile-parity=off: calls the callable as written and checks nothing.

    It returns a ParityResult whose `eager` and `compiled` are both the plain call's output,
    with no errors and empty counts, so a suite runs unchanged with the plugin turned off.
    """

    calls = 0

    def __call__(self, fn: Any, /, *args: Any, **kwargs: Any) -> Any:
        from pytest_torchcompile.counting.accounting import Accountant
        from pytest_torchcompile.judging.parity import ParityReport
        from pytest_torchcompile.runner import ParityResult

        self.calls += 1
        output = fn(*args, **kwargs)
        counts = Accountant().counts()
        return ParityResult(output, output, {}, counts, ParityReport([], ""))


@pytest.fixture
def device(request: pytest.FixtureRequest) -> torch.device:
    """A torch.device this parity test runs on: cpu and every visible CUDA device.

    A CUDA parameter on a machine without that device is skipped with the reason.
    """
    import torch

    name: Any = getattr(request, "param", "cpu")
    selected = torch.device(name)
    if selected.type == "cuda":
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if count == 0:
            pytest.skip(f"{name}: no CUDA device is visible (torch.cuda.is_available() is False)")
        pinned = worker_gpu(request.config) if selected.index is None else None
        if pinned is not None:
            selected = torch.device("cuda", pinned)
            torch.cuda.set_device(selected)  # this worker's GPU: plain "cuda" lands there too
        elif selected.index is None:
            selected = torch.device("cuda", torch.cuda.current_device())
        if selected.index is not None and selected.index >= count:
            pytest.skip(f"{name}: only {count} CUDA device(s) are visible")
    return selected
