"""The only module that touches private torch names; each use is guarded for torch 2.11 and 2.13.

Everything else in the plugin goes through these small functions, so a torch upgrade that moves
an internal breaks one place, with a clear error, instead of many.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import torch

TORCH_VERSION: tuple[int, int] = tuple(int(p) for p in torch.__version__.split(".")[:2])  # type: ignore[assignment]

# --- backends (lead) ---


def registered_backends() -> list[str]:
    """Every backend name torch.compile accepts, debug and experimental ones included."""
    from torch._dynamo.backends.registry import list_backends

    return sorted(list_backends(exclude_tags=()))


def inner_backend(
    backend: str | Callable[..., Any], mode: str | None, dynamic: bool | None
) -> Callable[..., Any]:
    """The backend object `torch.compile(backend=..., mode=...)` would build.

    The plugin wraps it in a counting backend, so `mode` must be applied here exactly as
    torch.compile applies it (inductor turns modes into config patches, other backends get
    `mode=` as a keyword).
    """
    if backend == "inductor":
        wrapper = torch._TorchCompileInductorWrapper
        params = inspect.signature(wrapper.__init__).parameters
        if "name" in params:
            return wrapper(mode, None, dynamic, None)  # type: ignore[no-any-return]
        return wrapper(mode, None, dynamic)  # type: ignore[no-any-return]
    return torch._TorchCompileWrapper(backend, mode, None, dynamic)  # type: ignore[no-any-return]


# --- isolation (lead) ---


def reset_dynamo() -> None:
    """Forget every compiled frame, guard and counter, as a fresh process would have."""
    torch._dynamo.reset()


@contextmanager
def patched_configs(dynamo: dict[str, Any], inductor: dict[str, Any]) -> Iterator[None]:
    """Set Dynamo and Inductor config values for a block, restoring every value afterwards."""
    import torch._dynamo.config as dynamo_config
    import torch._inductor.config as inductor_config

    with dynamo_config.patch(dynamo), inductor_config.patch(inductor):
        yield


def config_snapshot() -> tuple[dict[str, Any], dict[str, Any]]:
    """Dynamo and Inductor configs as they are now, to restore after a test changed them."""
    import torch._dynamo.config as dynamo_config
    import torch._inductor.config as inductor_config

    return dynamo_config.get_config_copy(), inductor_config.get_config_copy()


def config_restore(snapshot: tuple[dict[str, Any], dict[str, Any]]) -> None:
    """Put back only the values that changed (setting deprecated keys again would warn)."""
    import torch._dynamo.config as dynamo_config
    import torch._inductor.config as inductor_config

    for module, saved in zip((dynamo_config, inductor_config), snapshot, strict=True):
        current = module.get_config_copy()
        for key, value in saved.items():
            if current.get(key) != value:
                setattr(module, key, value)


# --- compile failures (lead) ---


def is_recompile_limit_error(exc: BaseException) -> bool:
    """Dynamo refused to compile again because the recompile limit was hit (fail_on_... set)."""
    from torch._dynamo import exc as dynamo_exc

    return isinstance(exc, dynamo_exc.FailOnRecompileLimitHit)


def is_graph_break_error(exc: BaseException) -> bool:
    """Dynamo could not trace something (raised instead of breaking the graph under fullgraph)."""
    from torch._dynamo import exc as dynamo_exc

    return isinstance(exc, dynamo_exc.Unsupported)
