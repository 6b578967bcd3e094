"""Where torch's own AOTInductor loader crashes (torch 2.11+cu130 on the GPU host: a plain
`torch._inductor.aoti_load_package` of the package dies too), a test of the aot_inductor path is
skipped with the plugin's diagnosis, not failed on the environment."""

from __future__ import annotations

import re

import pytest
import torch

_CRASH = re.compile(r"LoaderCrash: AOTInductor's package loader crashed \(([^)]*)\)")


def skip_where_the_loader_crashes(output: str) -> None:
    """Skip the calling test when the inner run's `output` reports the loader's crash."""
    crash = _CRASH.search(output)
    if crash is not None:
        pytest.skip(f"torch {torch.__version__}'s AOTInductor loader crashes here ({crash[1]})")
