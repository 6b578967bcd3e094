"""The compiled side of one test: compiled once, on copies, as a real program would meet it.

The callable is compiled once per test (one Dynamo cache for every call and Hypothesis example, so
guards, recompiles and cache hits are exercised), on the compiled side's own copies of the caller's
modules (copied once, synced before each call, so parameters keep their addresses) and inputs. Where
a graph draws random numbers it is compiled with Inductor's `fallback_random`, and the callable is
compiled once more as the user compiles it (`run_as_user`), for what random draws cannot change.
In zero-change mode the session's compiles (shared_compiles.py) serve later tests instead.
This module holds the cache of compiled forms and runs calls through it; how they are compiled
(compiler.py), the module copies (module_copies.py) and the as-user run (as_user.py) are rooms
of their own.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Hashable, Mapping
from typing import Any

from pytest_torchcompile.counting.accounting import Accountant
from pytest_torchcompile.counting.costs import Costs
from pytest_torchcompile.running.as_user import AsUserRuns
from pytest_torchcompile.running.compiler import Compiled, Compiler
from pytest_torchcompile.running.copier import clone_tree
from pytest_torchcompile.running.exported import Exported
from pytest_torchcompile.running.marks import mark_inputs
from pytest_torchcompile.running.module_copies import ModuleCopies
from pytest_torchcompile.running.shared_compiles import SharedCompiles
from pytest_torchcompile.running.sides import Side, SideResult, nothing, run_side, state_left
from pytest_torchcompile.running.snapshot import Copies, Watch
from pytest_torchcompile.running.targets import Target
from pytest_torchcompile.settings import Settings


class _SessionCompiles:
    """Zero-change mode's share of the session's compiles (shared_compiles.py): the key each
    callable of this test is compiled under there, and its entry, synced from the test's module."""

    def __init__(
        self,
        settings: Settings,
        compiler: Compiler,
        copies: ModuleCopies,
        shared: SharedCompiles | None,
    ) -> None:
        self.settings = settings
        self.compiler = compiler
        self.copies = copies
        self.shared = shared
        self._keys: dict[int, tuple[Callable[..., Any], Hashable]] = {}  # id -> the fn, its key

    def share(self, target: Target, structure: Hashable) -> None:
        """Key `target` (with `structure`, where a module) to the session's one compile of it,
        or to this test alone where it has none (no session store, or a hook of its own)."""
        key = None
        if self.shared is not None:
            settings = self.settings
            options = (settings.backend, settings.mode, settings.torch_dynamic, settings.fullgraph)
            compiled_as = (*options, settings.dim_marks, settings.compiled_autograd)
            key = target.session_key(compiled_as, structure)
        fn = target.fn
        if key is None:
            self._keys.pop(id(fn), None)
        else:
            self._keys[id(fn)] = (fn, key)

    def key(self, fn: Callable[..., Any]) -> Hashable | None:
        """The session key `fn` is compiled under, or None."""
        kept = self._keys.get(id(fn))
        return kept[1] if kept is not None and kept[0] is fn else None

    def entry(self, target: Target) -> Compiled | None:
        """The session's compile of `target`, its module synced from the target's; made (and
        compiled, in its own recompile region) where there is none or it is restructured (a
        function: once, as itself). None where `target` is compiled for this test alone: where
        syncing cannot bring its module over completely (`unshared` says why), from then on."""
        key = self.key(target.fn)
        if key is None or self.shared is None or key in self.shared.refused:
            return None
        kept: tuple[Compiled, dict[int, Any]] | None = self.shared.entries.get(key)
        previous = None
        if kept is not None and kept[0].module_copy is not None:
            previous = (kept[0].module_copy, kept[1])
        copy, memo, fresh = target.synced(self.copies, previous)
        if not fresh and kept is not None:
            self.compiler.accountant.reusing = True
            return kept[0]
        if self.copies.unsynced is not None:
            self.shared.refused[key] = self.copies.unsynced
            del self.shared.entries[key]
            return None
        entry = Compiled(copy.fn, copy.module, self.compiler.compile(copy, as_user=False))
        self.shared.entries[key] = (entry, memo)
        return entry

    def unshared(self, fn: Callable[..., Any]) -> str | None:
        """Why `fn`'s module is compiled for each test alone, where syncing cannot bring it over."""
        key = self.key(fn)
        return None if key is None or self.shared is None else self.shared.refused.get(key)

    def drop(self, fn: Callable[..., Any]) -> bool:
        """Drop `fn`'s session compile, where it has one (else False)."""
        key = self.key(fn)
        if key is None or self.shared is None:
            return False
        self.shared.entries.pop(key, None)
        return True

    def clear(self) -> None:
        """Forget the session's compiles (Dynamo's cache was reset)."""
        if self.shared is not None:
            self.shared.clear()


class CompiledSide:
    """The compiled functions and module copies of one test, and running a call through them."""

    def __init__(
        self,
        settings: Settings,
        accountant: Accountant,
        costs: Costs,
        shared: SharedCompiles | None = None,
    ) -> None:
        self.settings = settings
        self.accountant = accountant
        self.costs = costs  # the test's: a compile the checker adds is counted there
        self._compiled: dict[int, Compiled] = {}
        self._compiler = Compiler(settings, accountant, shared)
        self._copies = ModuleCopies()
        self._session = _SessionCompiles(settings, self._compiler, self._copies, shared)
        self._as_user = AsUserRuns(self._compiler, costs)
        self._before_last_run = accountant.mark()  # the counts before the last `run`
        self._last_fn: Callable[..., Any] | None = None  # the callable the last `run` ran

    def share(self, target: Target, structure: Hashable = None) -> None:
        """Compile `target` as the session's one compile of it: a module (of `structure`,
        selection.module_structure) per class and structure where syncing can bring it over
        completely (shared_compiles.key_of), a function as itself; else for this test alone."""
        self._session.share(target, structure)

    def unshared(self, target: Target) -> str | None:
        """Why `target` is compiled for this test alone though the session shares compiles:
        syncing cannot bring its module over completely (snapshot.Unsynced); None otherwise."""
        return self._session.unshared(target.fn)

    def forget(self) -> None:
        """Drop every compiled function and module copy (after Dynamo's cache was reset, and
        compiled autograd's with it)."""
        self._compiled.clear()
        self._copies.clear()
        self.accountant.forget_captures()
        self._session.clear()

    def start_afresh(self) -> bool:
        """Where the last run's callable is a session compile (shared_compiles.py), drop it:
        its next compile gets a recompile region of its own, so the other classes' compiles
        stay. False where Dynamo's whole cache must be reset instead."""
        fn = self._last_fn
        if fn is None or not self._session.drop(fn):
            return False
        self._compiled.pop(id(fn), None)
        return True

    def entry(self, target: Target) -> Compiled:
        """`target`'s compiled form, as the last `run` left it."""
        return self._compiled[id(target.fn)]

    def _compiled_for(self, target: Target) -> Compiled:
        fn = target.fn
        shared = self._session.entry(target)
        if shared is not None:
            self._compiled[id(fn)] = shared
            return shared
        entry = self._compiled.get(id(fn))
        copy, fresh = target.copied(self._copies)
        if entry is None or fresh:
            entry = Compiled(fn, copy.module, self._compiler.compile(copy, as_user=False))
            self._compiled[id(fn)] = entry
        return entry

    def refused_by(self, target: Target, exc: BaseException | None) -> str | None:
        """The export path whose exporter refused `target`'s program, where `exc` (what its
        compiled run raised) is that refusal; None otherwise."""
        entry = self._compiled.get(id(target.fn))
        if entry is None or not isinstance(entry.compiled, Exported):
            return None
        return entry.compiled.refused(exc)

    def run(
        self,
        target: Target,
        args: tuple[Any, ...],
        kwargs: Mapping[str, Any],
        watch: Watch,
    ) -> tuple[SideResult, bool, Copies]:
        """The compiled side, on copies of the caller's inputs and modules (left untouched);
        whether it changed (or created) a plain attribute or a state entry of theirs; and the
        copies, which show the tensors it changed. `watch` is the caller's state before the
        call, which the copies start from."""
        self._copies.afresh = False
        self._last_fn = target.fn
        self._compiler.switch_as_compiled()
        self._before_last_run = self.accountant.mark()
        entry = self._compiled_for(target)
        memo = self._copies.memo_of((args, dict(kwargs)))
        # Shaped as (module, args, kwargs), so an uncopyable input is named as the input it is.
        _, compiled_args, compiled_kwargs = clone_tree((None, args, dict(kwargs)), memo)
        mark_inputs((compiled_args, compiled_kwargs), self.settings.dim_marks, (args, kwargs))
        memo.update(target.state_pairs(entry.module_copy))
        copies = Copies(memo)
        side = self._compiler.side(
            entry.compiled, entry.module_copy, compiled_args, compiled_kwargs
        )
        draws = self._compiler.draws(entry)
        draws.drew = False
        around = functools.partial(self._compiler.observe, entry)
        result = run_side(side, self.settings.compares_backward, around, wait=False)
        entry.draws_random = entry.draws_random or draws.drew
        # The copies' tensors are watched by their marks; their plain attributes and the names
        # of their state by the caller's, which they were synced from.
        now = state_left(result, side)
        return result, bool(watch.attributes_changed(now) or copies.rebound(now)), copies

    def run_control(
        self, target: Target, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> SideResult:
        """The control: a call of `target` through this side's own path with no compiler, from
        `args`, `kwargs` and the target's module (a fresh copy of the call as it was). Its
        modules are copied as the latest run's were (afresh, or a copy synced from the call's),
        its inputs cloned into them and marked, and it runs as the compiled side does,
        uncounted. Where it differs from eager, so would any compiler."""
        memo = self._copies.memo_of((target.module, args, kwargs), self._copies.as_the_latest)
        module, control_args, control_kwargs = clone_tree((target.module, args, kwargs), memo)
        mark_inputs((control_args, control_kwargs), self.settings.dim_marks, (args, kwargs))
        control = target.on(module)
        side = Side(control.fn, control.module, control_args, control_kwargs)
        return run_side(side, self.settings.compares_backward, nothing)

    def forget_last_run(self) -> None:
        """Drop what the last `run` added to the counts: the checker runs it again. Its
        compiling still cost time, which the breakdown keeps under compile."""
        self.costs.compiled_uncounted(self.accountant.rollback(self._before_last_run))

    def run_as_user(
        self, target: Target, args: tuple[Any, ...], kwargs: Mapping[str, Any]
    ) -> SideResult | None:
        """The call compiled as the user compiles it (no fallback_random), on its own copies and
        compile cache, uncounted: judged on what random draws cannot change. None when Dynamo
        refused it for its recompile limit (that compile cache is the checker's, not the
        user's)."""
        entry = self.entry(target)
        entry.as_user = self._as_user.compiled(target, entry.as_user)
        return self._as_user.run(entry.as_user, args, kwargs)
