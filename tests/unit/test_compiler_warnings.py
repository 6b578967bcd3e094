"""Which warnings `_compat.compiler_warnings_dropped` drops: torch's own, during a compile only."""

from __future__ import annotations

import warnings
from typing import Any

import torch

from pytest_torchcompile import _compat

TORCH_MODULE: dict[str, Any] = {"__name__": "torch._inductor.planted", "warnings": warnings}
exec("def warn():\n    warnings.warn('from torch', DeprecationWarning)\n", TORCH_MODULE)


def _user_warn() -> None:
    warnings.warn("from the user", UserWarning, stacklevel=1)


def _backend(gm: torch.fx.GraphModule, example_inputs: Any) -> Any:
    TORCH_MODULE["warn"]()
    _user_warn()  # code of the test's that a compile runs (a fake kernel) keeps its warnings
    return gm.forward


def test_torchs_warnings_during_a_compile_are_dropped_and_no_others() -> None:
    torch._dynamo.reset()
    try:
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("error")
            warnings.filterwarnings("always", category=UserWarning)
            with _compat.compiler_warnings_dropped():
                torch.compile(lambda x: x + 1, backend=_backend)(torch.ones(2))
            warnings.simplefilter("always")
            TORCH_MODULE["warn"]()  # outside a compile: the test's filters apply
    finally:
        torch._dynamo.reset()
    assert [str(w.message) for w in seen] == ["from the user", "from torch"]
