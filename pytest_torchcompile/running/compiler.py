"""How the compiled side compiles a callable, and what it runs the compiled call under.

torch.compile gets the test's backend behind a counting wrapper (the Accountant's) around a
random-aware one (randomness.py: Inductor's `fallback_random` only for graphs that draw random
numbers); in zero-change mode that backend is the session's, as Dynamo's entries guard on it. As
the user compiles it, the backend is the user's, uncounted. On an export path the callable is
exported instead, and under the control backend nothing is compiled at all.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from typing import Any, Protocol

import torch

from pytest_torchcompile import _compat
from pytest_torchcompile.counting.accounting import Accountant
from pytest_torchcompile.running import randomness
from pytest_torchcompile.running.exported import Exported
from pytest_torchcompile.running.shared_compiles import SharedCompiles
from pytest_torchcompile.running.sides import Side
from pytest_torchcompile.running.targets import Target
from pytest_torchcompile.settings import (
    CONTROL_BACKEND,
    EXPORT_PATHS,
    Settings,
    load_backend_callable,
)


class _Draws(Protocol):
    drew: bool  # a graph compiled since this was last set to False draws random numbers


@dataclass
class _Uncompiled:
    drew: bool = False


@dataclass
class AsUser:
    """The callable compiled as the user compiles it (fallback_random as the user set it)."""

    module_copy: torch.nn.Module | None
    compiled: Callable[..., Any]
    memo: dict[int, Any]  # what the module was copied with, for syncing it


@dataclass
class Compiled:
    """One callable's compiled form on the checked side."""

    original: Callable[..., Any]  # kept alive so its id is never reused for another callable
    module_copy: torch.nn.Module | None
    compiled: Callable[..., Any]
    draws_random: bool = False  # a graph of it draws random numbers: fallback_random is on there
    as_user: AsUser | None = None  # made once it draws random numbers


class Compiler:
    """The test's compiles: the counted backend (made once, or the session's), the user's,
    the exporter, or none under the control backend."""

    def __init__(
        self, settings: Settings, accountant: Accountant, shared: SharedCompiles | None
    ) -> None:
        self.settings = settings
        self.accountant = accountant
        self._shared = shared
        self._backend: Any = None
        self._random_aware: randomness.RandomAwareBackend | None = None

    def _backend_object(self) -> Any:
        if self._backend is None:
            if self._shared is not None:  # one for the session: Dynamo's entries guard on it
                key = (self.settings.backend, self.settings.mode, self.settings.torch_dynamic)
                self._backend, self._random_aware = self._shared.backend(key, self._new_backend)
                self.accountant.adopt(self._backend)
            else:
                self._backend, self._random_aware = self._new_backend()
        return self._backend

    def _new_backend(self) -> tuple[Any, randomness.RandomAwareBackend]:
        """The counting backend around the test's backend, and the random-aware one inside."""
        name = self.settings.backend
        target: Any = load_backend_callable(name) if ":" in name else name
        mode = None if self.settings.mode == "default" else self.settings.mode
        inner = _compat.inner_backend(target, mode, self.settings.torch_dynamic)
        drawing = _compat.fallback_random_backend(target, mode, self.settings.torch_dynamic)
        random_aware = randomness.RandomAwareBackend(inner, drawing)
        return self.accountant.backend(random_aware), random_aware

    def _user_backend(self) -> Any:
        """The backend as the user's torch.compile builds it, uncounted, for the as-user run."""
        self._backend_object()
        assert self._random_aware is not None
        return self._random_aware.user

    def compile(self, target: Target, *, as_user: bool) -> Callable[..., Any]:
        """`target` compiled by torch.compile with the counted backend (as the user compiles it:
        the user's, uncounted), or exported, on an export path; `target` itself under the
        control backend, which compiles nothing."""
        if self.settings.backend == CONTROL_BACKEND:
            return target.fn
        if self.settings.backend in EXPORT_PATHS:
            accountant = None if as_user else self.accountant
            return Exported(target, self.settings.backend, accountant, fallback_random=not as_user)
        return torch.compile(
            target.fn,
            backend=self._user_backend() if as_user else self._backend_object(),
            fullgraph=self.settings.fullgraph,
            dynamic=self.settings.torch_dynamic,
            # the user's counts stay theirs, and the session's compiles (zero-change mode keeps
            # Dynamo's cache from test to test) out of the test's own
            **(_compat.own_recompile_region() if as_user or self._shared is not None else {}),
        )

    def draws(self, entry: Compiled) -> _Draws:
        """What notes whether compiling `entry` made a graph that draws random numbers (nothing
        does under the control backend: nothing is compiled)."""
        if isinstance(entry.compiled, Exported):
            return entry.compiled
        if self.settings.backend == CONTROL_BACKEND:
            return _Uncompiled()
        self._backend_object()
        assert self._random_aware is not None  # made with the backend
        return self._random_aware

    def switch_as_compiled(self) -> None:
        """The process-wide state a compiled call runs under (none is switched by the control,
        which compiles nothing)."""
        if self.settings.backend != CONTROL_BACKEND:
            _compat.compiled_switches()

    def side(
        self,
        compiled: Callable[..., Any],
        module_copy: torch.nn.Module | None,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
    ) -> Side:
        """A compiled callable's side; under CUDA graphs its results are copied out of the pool."""
        return Side(compiled, module_copy, args, kwargs, cudagraphs=self.settings.uses_cudagraphs)

    @contextmanager
    def observe(self, entry: Compiled) -> Iterator[None]:
        """Around the compiled call and its backward: the accountant, and fallback_random where
        the callable draws random numbers, so a backward compiled lazily gets its forward's
        setting (graphs that draw none are unaffected by it)."""
        drawing = entry.draws_random or self.draws(entry).drew
        observed = (
            nullcontext()  # no Dynamo to observe: each export is counted as it is made, and
            if isinstance(entry.compiled, Exported)  # the control backend compiles nothing
            or self.settings.backend == CONTROL_BACKEND
            else self.accountant.observe(
                module=entry.module_copy,
                cudagraphs=self.settings.uses_cudagraphs,
                fn=entry.original,
            )
        )
        with (
            observed,
            _compat.compiler_warnings_dropped(),  # the compile's, not the test's
            _compat.fallback_random_patched() if drawing else nullcontext(),
            self._compiled_autograd() if self.settings.compiled_autograd else nullcontext(),
        ):
            yield

    def _compiled_autograd(self) -> Any:
        """Compiled autograd on, around the compiled call and its backward (as Dynamo's own
        switch has it on around a compiled call): each backward graph it captures is compiled
        with the test's backend and torch.compile settings, and counted."""
        compile_graph = functools.partial(
            torch.compile,
            backend=self._backend_object(),
            fullgraph=self.settings.fullgraph,
            dynamic=self.settings.torch_dynamic,
        )
        compiler = self.accountant.autograd_compiler(compile_graph)
        return _compat.compiled_autograd(compiler, self.settings.torch_dynamic)


__all__ = ["AsUser", "Compiled", "Compiler"]
