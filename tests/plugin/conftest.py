"""pytester runs of Hypothesis tests: the same examples every run, no shared example database."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from hypothesis import settings

PROFILES = """
from hypothesis import settings

settings.register_profile("parity-ci", derandomize=True, database=None)
settings.register_profile("parity-few", derandomize=True, database=None, max_examples=8)
settings.register_profile("parity-ci-500", derandomize=True, database=None, max_examples=500)
"""


@pytest.fixture
def hypothesis_pytester(pytester: pytest.Pytester) -> Iterator[pytest.Pytester]:
    """pytester whose runs can pass --hypothesis-profile=parity-ci (derandomized, no example
    database, otherwise Hypothesis's defaults), parity-ci-500 (500 examples) or parity-few (8
    examples).

    Inline runs share this process, and Hypothesis's profile and its default example database
    are global: without this, one run would replay another run's failures or keep its profile.
    The profile in force before the test is loaded again afterwards.
    """
    previous = settings.get_current_profile_name()
    pytester.makeconftest(PROFILES)
    yield pytester
    settings.load_profile(previous)


@pytest.fixture
def caught_only_with(pytester: pytest.Pytester) -> Callable[..., pytest.RunResult]:
    """Run pytester's test file on a planted backend without, then with, the options that take
    the compile path it breaks: it must pass, then fail. Returns the failing run."""

    def run(backend: str, *options: str) -> pytest.RunResult:
        planted = f"--compile-backend=planted:{backend}"
        pytester.runpytest(planted).assert_outcomes(passed=1)
        result = pytester.runpytest(planted, *options)
        result.assert_outcomes(failed=1)
        return result

    return run
