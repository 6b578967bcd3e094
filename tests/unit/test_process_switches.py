"""_compat.process_switches_kept puts back each process-wide switch a check may flip."""

from __future__ import annotations

import warnings

import torch

from pytest_torchcompile import _compat


def test_each_switch_flipped_inside_is_put_back() -> None:
    validate = torch.distributions.Distribution._validate_args
    filters = list(warnings.filters)
    with _compat.process_switches_kept():
        torch.distributions.Distribution.set_default_validate_args(not validate)
        torch.set_grad_enabled(False)
        torch.set_default_dtype(torch.float64)
        torch.use_deterministic_algorithms(True, warn_only=True)
        warnings.simplefilter("ignore")
    assert torch.distributions.Distribution._validate_args is validate
    assert torch.is_grad_enabled()
    assert torch.get_default_dtype() == torch.float32
    assert not torch.are_deterministic_algorithms_enabled()
    assert not torch.is_deterministic_algorithms_warn_only_enabled()
    assert warnings.filters == filters
