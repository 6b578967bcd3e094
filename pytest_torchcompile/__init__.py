"""pytest-torchcompile: prove that torch.compile keeps a model's meaning.

Attributes that need torch are loaded on first use, so the pytest plugin can load in sessions
that never touch a parity test without importing torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pytest_torchcompile._version import __version__

__all__ = [
    "CompileParityFailure",
    "EagerFallbackError",
    "EnvironmentFault",
    "ExportFailure",
    "GraphBreakBudgetExceeded",
    "ParityError",
    "ParityResult",
    "RecompileLimitExceeded",
    "UncheckableCallError",
    "UncopyableInputError",
    "UnusedCheckerError",
    "__version__",
    "assert_compile_parity",
]

from pytest_torchcompile.errors import (
    CompileParityFailure,
    EagerFallbackError,
    EnvironmentFault,
    ExportFailure,
    GraphBreakBudgetExceeded,
    ParityError,
    RecompileLimitExceeded,
    UncheckableCallError,
    UncopyableInputError,
    UnusedCheckerError,
)

if TYPE_CHECKING:
    from pytest_torchcompile.runner import ParityResult, assert_compile_parity

_LAZY = {
    "ParityResult": "pytest_torchcompile.runner",
    "assert_compile_parity": "pytest_torchcompile.runner",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'pytest_torchcompile' has no attribute {name!r}")
