"""The `compile_parity` and `device` fixtures: thin, so the work stays in runner.py."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest

from pytest_torchcompile.settings import Settings

if TYPE_CHECKING:
    import torch

    from pytest_torchcompile.runner import Checker

SESSION_TEST_SETTINGS = pytest.StashKey[Settings]()  # command line > ini > default
SETTINGS_KEY = pytest.StashKey[Settings]()  # one test's, with its marker applied
CHECKER_KEY = pytest.StashKey["Checker"]()


@pytest.fixture
def compile_parity(request: pytest.FixtureRequest) -> Iterator[Checker]:
    """Call it as `compile_parity(model_or_fn, *args, **kwargs)`: eager vs compiled, or fail.

    One checker per test: every call (and every Hypothesis example) shares its compile cache,
    so guards and recompiles behave as in a real program. The test runs in a clean compile
    world: Dynamo reset, configs, grad mode and default dtype restored afterwards.
    """
    from pytest_torchcompile.runner import Checker, isolated

    settings = (
        request.node.stash.get(SETTINGS_KEY, None) or request.config.stash[SESSION_TEST_SETTINGS]
    )
    checker = Checker(settings)
    request.node.stash[CHECKER_KEY] = checker
    with isolated(checker.accountant):
        yield checker


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
        if selected.index is not None and selected.index >= count:
            pytest.skip(f"{name}: only {count} CUDA device(s) are visible")
    return selected
