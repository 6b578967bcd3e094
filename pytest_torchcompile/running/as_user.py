"""The call compiled as the user compiles it, beside the checked compile that draws random numbers.

A graph that draws random numbers is compiled with Inductor's `fallback_random` on the checked
side (randomness.py), which changes what is compiled; so the callable is compiled once more
exactly as the user compiles it, on its own copies and compile cache, uncounted, and judged on
what random draws cannot change.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pytest_torchcompile import _compat
from pytest_torchcompile.counting.costs import AS_USER, Costs
from pytest_torchcompile.running.compiler import AsUser, Compiler
from pytest_torchcompile.running.copier import clone_tree
from pytest_torchcompile.running.marks import mark_inputs
from pytest_torchcompile.running.module_copies import ModuleCopies
from pytest_torchcompile.running.sides import SideResult, run_side
from pytest_torchcompile.running.targets import Target


class AsUserRuns:
    """Compiles a callable as the user does, once, and runs calls through that compile."""

    def __init__(self, compiler: Compiler, costs: Costs) -> None:
        self.compiler = compiler
        self.costs = costs  # the test's: the compile is counted there, its time uncounted
        self._copies = ModuleCopies()  # its own: the compiled side's say how its latest run copied

    def compiled(self, target: Target, kept: AsUser | None) -> AsUser:
        """`kept` (the target's compile as the user's, or None), its module copy synced from the
        target's; made afresh where there is none or the module is structured otherwise than
        its copy."""
        previous = None
        if kept is not None and kept.module_copy is not None:
            previous = (kept.module_copy, kept.memo)
        copy, memo, fresh = target.synced(self._copies, previous)
        if kept is None or fresh:
            kept = AsUser(copy.module, self.compiler.compile(copy.apart(), as_user=True), memo)
            self.costs.compiled(AS_USER)
        return kept

    def run(
        self, as_user: AsUser, args: tuple[Any, ...], kwargs: Mapping[str, Any]
    ) -> SideResult | None:
        """The call through `as_user`, on its own copies of the inputs, uncounted. None when
        Dynamo refused it for its recompile limit (that compile cache is the checker's, not the
        user's)."""
        settings = self.compiler.settings
        _, user_args, user_kwargs = clone_tree((None, args, dict(kwargs)))
        self.compiler.switch_as_compiled()
        mark_inputs((user_args, user_kwargs), settings.dim_marks, (args, kwargs))
        side = self.compiler.side(as_user.compiled, as_user.module_copy, user_args, user_kwargs)
        around = _compat.compiler_warnings_dropped
        with _compat.dynamo_records() as records:  # uncounted, but its compiling costs time
            result = run_side(side, settings.compares_backward, around, wait=False)
        self.costs.compiled_uncounted(sum(event.duration_s for event in records.compiles))
        if result.exception is not None and _compat.is_recompile_limit_error(result.exception):
            return None
        return result


__all__ = ["AsUserRuns"]
