"""The wrappers around module (and function) calls while an intercepted test's body runs.

An outermost call goes to the interceptor; a call made while one is in progress (the test's own
call, or a replay) passes straight through, and so does one under torch.compile's tracing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, ExitStack, contextmanager, nullcontext
from types import FunctionType
from typing import Any

import torch

from pytest_torchcompile.adoption.callsites import CallSites, Constructions, qualified_name
from pytest_torchcompile.adoption.functions import Found, FunctionSites
from pytest_torchcompile.adoption.kinds import FunctionCall, InterceptedCall, ModuleCall


class Wrappers:
    """Installs the wrappers for the test body (`install`, `remove`), hands each outermost call
    to `intercept`, and notes the functions an outermost call in progress makes (`nested`)."""

    def __init__(
        self,
        intercept: Callable[[InterceptedCall], Any],
        functions: Found | None,
        constructions: Constructions | None,
    ) -> None:
        self._intercept = intercept
        self._sites = CallSites(self._wrapper)
        self._functions = (
            FunctionSites(functions, self._function_wrapper) if functions is not None else None
        )
        self._constructions = constructions  # the test's: paused while the checker copies
        self._busy = False  # a module call or a check is in progress: calls pass straight through
        self._open = False  # the test body runs: a wrapper someone kept afterwards passes through
        self.nested: set[str] = set()  # functions the outermost call in progress made

    def install(self) -> None:
        self._sites.install()
        if self._functions is not None:
            self._functions.install()
        self._open = True

    def remove(self) -> None:
        self._open = False
        if self._functions is not None:
            self._functions.remove()
        self._sites.remove()

    @contextmanager
    def passing_through(self) -> Iterator[None]:
        """Every call inside the block passes straight through (the test's call, a replay)."""
        self._busy = True
        try:
            yield
        finally:
            self._busy = False

    def originals(self) -> ExitStack:
        """The original `__call__`s and functions, and no constructions noted, while a replay
        runs."""
        stack = ExitStack()
        stack.enter_context(self._sites.suspended())
        if self._functions is not None:
            stack.enter_context(self._functions.suspended())
        stack.enter_context(_paused(self._constructions))
        return stack

    def _wrapper(self, original: Callable[..., Any]) -> Callable[..., Any]:
        """What replaces one class's `__call__` (`original`) while the test body runs."""
        intercept = self._intercept

        def __call__(module: torch.nn.Module, *args: Any, **kwargs: Any) -> Any:
            if self._busy or torch.compiler.is_compiling():
                return original(module, *args, **kwargs)
            name = qualified_name(type(module))
            return intercept(ModuleCall(original, args, kwargs, name, module=module))

        return __call__

    def _function_wrapper(self, name: str, original: FunctionType) -> Callable[..., Any]:
        """What a function's trampoline calls (`original`: the copy of the function, named
        `name`) while the test body runs."""
        intercept = self._intercept

        def call(*args: Any, **kwargs: Any) -> Any:
            if self._busy or not self._open or torch.compiler.is_compiling():
                if self._busy:
                    self.nested.add(name)
                return original(*args, **kwargs)
            return intercept(FunctionCall(original, args, kwargs, name))

        return call


def _paused(constructions: Constructions | None) -> AbstractContextManager[None]:
    return nullcontext() if constructions is None else constructions.paused()


__all__ = ["Wrappers"]
