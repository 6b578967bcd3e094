"""The failures the plugin raises. All are AssertionErrors, so pytest shows them as test failures."""

from __future__ import annotations

# Every note or warning the plugin adds to an error it did not raise starts with this.
NOTE_PREFIX = "pytest-torchcompile: "


class CompileParityFailure(AssertionError):
    """Base of every verdict the plugin reaches against a compiled program."""

    __tracebackhide__ = True


class ParityError(CompileParityFailure):
    """Eager and compiled runs disagree: outputs, metadata, mutations, state, gradients or exceptions."""


class GraphBreakBudgetExceeded(CompileParityFailure):
    """More graph breaks than the test's budget allows (or any, under fullgraph)."""


class RecompileLimitExceeded(CompileParityFailure):
    """More recompiles than the test's budget allows, or Dynamo's own limit turned a call eager."""


class EagerFallbackError(CompileParityFailure):
    """A call meant to be compiled ran eagerly (skipped frame, suppressed error): no parity was shown."""


class ExportFailure(CompileParityFailure):
    """torch.export or AOTInductor's packaging refused the program (backends export and
    aot_inductor compile it whole, so what torch.compile would break the graph at fails here):
    no parity was shown."""


class UnusedCheckerError(CompileParityFailure):
    """A test marked compile_parity that never called the checker."""


class EnvironmentFault(AssertionError):
    """The compiled run failed because of its environment (a corrupt Inductor cache, a missing
    compiler or header, out of memory or disk), so no parity was shown either way.

    Not a CompileParityFailure: it is no verdict on the compiler, and gets no stage bisect or repro.
    """

    __tracebackhide__ = True


class UncopyableInputError(TypeError):
    """The checker cannot copy the module or an input; the message names it and what to do.

    A misuse, not a verdict on the compiler, so it is no AssertionError.
    """


class UncheckableCallError(TypeError):
    """The call cannot be checked as given (it returns an iterator, or holds meta tensors); the
    message names the part and what to do.

    A misuse, not a verdict on the compiler: no stage is blamed and no repro is written.
    """


def first_line(exc: BaseException) -> str:
    """`Type: the first line of the message`, for one-line summaries of an exception."""
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"
