"""The compiled side of one test: compiled once, on copies, as a real program would meet it.

The callable is compiled once per test (one Dynamo cache for every call and Hypothesis example, so
guards, recompiles and cache hits are exercised), on the compiled side's own copies of the caller's
modules (copied once, synced before each call, so parameters keep their addresses) and inputs. Where
a graph draws random numbers it is compiled with Inductor's `fallback_random`, and the callable is
compiled once more as the user compiles it (`run_as_user`), for what random draws cannot change.
In zero-change mode the session's compiles (shared_compiles.py) serve later tests instead.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Hashable, Iterator, Mapping
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from typing import Any, Protocol

import torch

from pytest_torchcompile import _compat
from pytest_torchcompile.counting.accounting import Accountant
from pytest_torchcompile.counting.costs import AS_USER, Costs
from pytest_torchcompile.running import randomness
from pytest_torchcompile.running.copier import clone_tree
from pytest_torchcompile.running.exported import Exported
from pytest_torchcompile.running.marks import mark_inputs
from pytest_torchcompile.running.shared_compiles import SharedCompiles, key_of
from pytest_torchcompile.running.sides import Side, SideResult, nothing, run_side, state_left
from pytest_torchcompile.running.snapshot import (
    Copies,
    Restructured,
    Watch,
    sync_module,
    tensor_pairs,
)
from pytest_torchcompile.running.trees import leaves
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


def _synced_copy(
    module: torch.nn.Module, kept: tuple[torch.nn.Module, dict[int, Any]] | None
) -> tuple[torch.nn.Module, dict[int, Any], bool]:
    """`kept` (a copy of a module like `module`, and the memo it was made with) synced from
    `module`; or, where there is none or `module` is structured otherwise, a fresh copy and its
    memo. The last item says whether the copy is fresh."""
    if kept is not None:
        try:
            sync_module(module, *kept)
            return kept[0], kept[1], False
        except Restructured:
            pass
    memo: dict[int, Any] = {}
    copied: torch.nn.Module = clone_tree(module, memo)
    return copied, memo, True


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
        # id -> (caller's module, its compiled-side copy); the module is kept so ids stay unique
        # id of a caller's module -> it, its copy, and the memo the copy was made with
        self._module_copies: dict[int, tuple[torch.nn.Module, torch.nn.Module, dict[int, Any]]] = {}
        self._backend: Any = None
        self._random_aware: randomness.RandomAwareBackend | None = None
        self._copied_afresh = False  # the latest run copied a module afresh (else synced one)
        self._before_last_run = accountant.mark()  # the counts before the last `run`
        # Zero-change mode: the session's compiles (shared_compiles.py), and the key each
        # module of this test is compiled under there (id -> the module, its key).
        self._shared = shared
        self._shared_keys: dict[int, tuple[Callable[..., Any], Hashable]] = {}
        self._last_fn: Callable[..., Any] | None = None  # the callable the last `run` ran

    def share(self, fn: Callable[..., Any], structure: Hashable = None) -> None:
        """Compile `fn` as the session's one compile of it: a module (of `structure`,
        selection.module_structure) per class and structure where syncing can bring it over
        completely (shared_compiles.key_of), a function as itself; else for this test alone."""
        key = None
        if self._shared is not None:
            settings = self.settings
            options = (settings.backend, settings.mode, settings.torch_dynamic, settings.fullgraph)
            compiled_as = (*options, settings.dim_marks, settings.compiled_autograd)
            if isinstance(fn, torch.nn.Module):
                key = key_of(fn, compiled_as, structure)
            else:  # a module-level function: the same object in every test
                key = (compiled_as, fn)
        if key is None:
            self._shared_keys.pop(id(fn), None)
        else:
            self._shared_keys[id(fn)] = (fn, key)

    def shared_key(self, fn: Callable[..., Any]) -> Hashable | None:
        """The session key `fn` is compiled under, or None."""
        kept = self._shared_keys.get(id(fn))
        return kept[1] if kept is not None and kept[0] is fn else None

    def forget(self) -> None:
        """Drop every compiled function and module copy (after Dynamo's cache was reset, and
        compiled autograd's with it)."""
        self._compiled.clear()
        self._module_copies.clear()
        self.accountant.forget_captures()
        if self._shared is not None:
            self._shared.clear()

    def start_afresh(self) -> bool:
        """Where the last run's callable is a session compile (shared_compiles.py), drop it:
        its next compile gets a recompile region of its own, so the other classes' compiles
        stay. False where Dynamo's whole cache must be reset instead."""
        fn = self._last_fn
        key = self.shared_key(fn) if fn is not None else None
        if key is None or self._shared is None:
            return False
        self._shared.entries.pop(key, None)
        self._compiled.pop(id(fn), None)
        return True

    def entry(self, fn: Callable[..., Any]) -> Compiled:
        """`fn`'s compiled form, as the last `run` left it."""
        return self._compiled[id(fn)]

    # compile ------------------------------------------------------------------------------------

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
        """The backend as the user's torch.compile builds it, uncounted, for `run_as_user`."""
        self._backend_object()
        assert self._random_aware is not None
        return self._random_aware.user

    def _module_copy(self, module: torch.nn.Module) -> tuple[torch.nn.Module, bool]:
        """The compiled side's long-lived copy of a caller's module, synced; and whether it is new.

        A module keeps one copy for the whole test, so its parameters keep their addresses as
        they would in the caller's program (CUDA graphs re-record when static addresses move).
        """
        kept = self._module_copies.get(id(module))
        copied, memo, fresh = _synced_copy(module, kept[1:] if kept is not None else None)
        if fresh:
            self._module_copies[id(module)] = (module, copied, memo)
            self._copied_afresh = True
        return copied, fresh

    def _copies_of_modules(
        self, tree: Any, copy: Callable[[torch.nn.Module], torch.nn.Module] | None = None
    ) -> dict[int, Any]:
        """A deepcopy memo mapping each module among the inputs, and its state, to its copy
        (the long-lived one, synced, or what `copy` makes of it)."""
        memo: dict[int, Any] = {}
        for leaf in leaves(tree):
            if isinstance(leaf, torch.nn.Module) and id(leaf) not in memo:
                copied = copy(leaf) if copy is not None else self._module_copy(leaf)[0]
                memo[id(leaf)] = copied
                memo.update(tensor_pairs(leaf, copied))
        return memo

    def _compiled_for(self, fn: Callable[..., Any]) -> Compiled:
        key = self.shared_key(fn)
        if key is not None and self._shared is not None:
            shared = self._from_the_session(fn, key, self._shared)
            self._compiled[id(fn)] = shared
            return shared
        entry = self._compiled.get(id(fn))
        module_copy = None
        if isinstance(fn, torch.nn.Module):
            module_copy, fresh = self._module_copy(fn)
            if fresh:
                entry = None
        if entry is None:
            target = module_copy if module_copy is not None else fn
            entry = Compiled(fn, module_copy, self._compile(target, as_user=False))
            self._compiled[id(fn)] = entry
        return entry

    def _from_the_session(
        self, fn: Callable[..., Any], key: Hashable, shared: SharedCompiles
    ) -> Compiled:
        """The session's compile for `key`, its module synced from `fn` (a module); made (and
        compiled, in its own recompile region) where there is none or it cannot be synced."""
        kept: tuple[Compiled, dict[int, Any]] | None = shared.entries.get(key)
        if not isinstance(fn, torch.nn.Module):  # a function: compiled once, as itself
            if kept is None:
                kept = shared.entries[key] = (
                    Compiled(fn, None, self._compile(fn, as_user=False)),
                    {},
                )
            else:
                self.accountant.reusing = True
            return kept[0]
        previous = None
        if kept is not None and kept[0].module_copy is not None:
            previous = (kept[0].module_copy, kept[1])
        copied, memo, fresh = _synced_copy(fn, previous)
        if not fresh and kept is not None:
            self.accountant.reusing = True
            return kept[0]
        entry = Compiled(copied, copied, self._compile(copied, as_user=False))
        shared.entries[key] = (entry, memo)
        self._copied_afresh = True
        return entry

    def _compile(self, target: Callable[..., Any], *, as_user: bool) -> Callable[..., Any]:
        """`target` compiled by torch.compile with the counted backend (as the user compiles it:
        the user's, uncounted), or exported, on an export path; `target` itself under the
        control backend, which compiles nothing."""
        if self.settings.backend == CONTROL_BACKEND:
            return target
        if self.settings.backend in EXPORT_PATHS:
            accountant = None if as_user else self.accountant
            return Exported(target, self.settings.backend, accountant, fallback_random=not as_user)
        return torch.compile(
            target,
            backend=self._user_backend() if as_user else self._backend_object(),
            fullgraph=self.settings.fullgraph,
            dynamic=self.settings.torch_dynamic,
            # the user's counts stay theirs, and the session's compiles (zero-change mode keeps
            # Dynamo's cache from test to test) out of the test's own
            **(_compat.own_recompile_region() if as_user or self._shared is not None else {}),
        )

    def _draws(self, entry: Compiled) -> _Draws:
        """What notes whether compiling `entry` made a graph that draws random numbers (nothing
        does under the control backend: nothing is compiled)."""
        if isinstance(entry.compiled, Exported):
            return entry.compiled
        if self.settings.backend == CONTROL_BACKEND:
            return _Uncompiled()
        self._backend_object()
        assert self._random_aware is not None  # made with the backend
        return self._random_aware

    def refused_by(self, fn: Callable[..., Any], exc: BaseException | None) -> str | None:
        """The export path whose exporter refused `fn`'s program, where `exc` (what its compiled
        run raised) is that refusal; None otherwise."""
        entry = self._compiled.get(id(fn))
        if entry is None or not isinstance(entry.compiled, Exported):
            return None
        return entry.compiled.refused(exc)

    # run ----------------------------------------------------------------------------------------

    def run(
        self,
        fn: Callable[..., Any],
        args: tuple[Any, ...],
        kwargs: Mapping[str, Any],
        watch: Watch,
    ) -> tuple[SideResult, bool, Copies]:
        """The compiled side, on copies of the caller's inputs and modules (left untouched);
        whether it changed (or created) a plain attribute or a state entry of theirs; and the
        copies, which show the tensors it changed. `watch` is the caller's state before the
        call, which the copies start from."""
        self._copied_afresh = False
        self._last_fn = fn
        self._switch_as_compiled()
        self._before_last_run = self.accountant.mark()
        entry = self._compiled_for(fn)
        memo = self._copies_of_modules((args, dict(kwargs)))
        # Shaped as (module, args, kwargs), so an uncopyable input is named as the input it is.
        _, compiled_args, compiled_kwargs = clone_tree((None, args, dict(kwargs)), memo)
        mark_inputs((compiled_args, compiled_kwargs), self.settings.dim_marks, (args, kwargs))
        if isinstance(fn, torch.nn.Module) and entry.module_copy is not None:
            memo.update(tensor_pairs(fn, entry.module_copy))
        copies = Copies(memo)
        side = self._side(entry.compiled, entry.module_copy, compiled_args, compiled_kwargs)
        draws = self._draws(entry)
        draws.drew = False
        around = functools.partial(self._observe, entry)
        result = run_side(side, self.settings.compares_backward, around, wait=False)
        entry.draws_random = entry.draws_random or draws.drew
        # The copies' tensors are watched by their marks; their plain attributes and the names
        # of their state by the caller's, which they were synced from.
        now = state_left(result, side)
        return result, bool(watch.attributes_changed(now) or copies.rebound(now)), copies

    def _switch_as_compiled(self) -> None:
        """The process-wide state a compiled call runs under (none is switched by the control,
        which compiles nothing)."""
        if self.settings.backend != CONTROL_BACKEND:
            _compat.compiled_switches()

    def run_control(
        self,
        fn: Callable[..., Any],
        module: torch.nn.Module | None,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
    ) -> SideResult:
        """The control: a call through this side's own path with no compiler, from `module`,
        `args` and `kwargs` (a fresh copy of the call as it was; `module` is `fn`'s, where
        `fn` is a module). Its modules are copied as the latest run's were (afresh, or a copy
        synced from the call's), its inputs cloned into them and marked, and it runs as the
        compiled side does, uncounted. Where it differs from eager, so would any compiler."""
        memo = self._copies_of_modules((module, args, kwargs), self._copied_as_the_latest)
        _, control_args, control_kwargs = clone_tree((None, args, kwargs), memo)
        mark_inputs((control_args, control_kwargs), self.settings.dim_marks, (args, kwargs))
        module_copy = memo.get(id(module)) if module is not None else None
        target = module_copy if module_copy is not None else fn
        side = Side(target, module_copy, control_args, control_kwargs)
        return run_side(side, self.settings.compares_backward, nothing)

    def _copied_as_the_latest(self, module: torch.nn.Module) -> torch.nn.Module:
        """A copy of `module` made as the latest run made its copies: afresh, or synced."""
        memo: dict[int, Any] = {}
        copied: torch.nn.Module = clone_tree(module, memo)
        if not self._copied_afresh:
            sync_module(module, copied, memo)
        return copied

    def forget_last_run(self) -> None:
        """Drop what the last `run` added to the counts: the checker runs it again. Its
        compiling still cost time, which the breakdown keeps under compile."""
        self.costs.compiled_uncounted(self.accountant.rollback(self._before_last_run))

    def _side(
        self,
        compiled: Callable[..., Any],
        module_copy: torch.nn.Module | None,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
    ) -> Side:
        """A compiled callable's side; under CUDA graphs its results are copied out of the pool."""
        return Side(compiled, module_copy, args, kwargs, cudagraphs=self.settings.uses_cudagraphs)

    @contextmanager
    def _observe(self, entry: Compiled) -> Iterator[None]:
        """Around the compiled call and its backward: the accountant, and fallback_random where
        the callable draws random numbers, so a backward compiled lazily gets its forward's
        setting (graphs that draw none are unaffected by it)."""
        drawing = entry.draws_random or self._draws(entry).drew
        observed = (
            nullcontext()  # no Dynamo to observe: each export is counted as it is made, and
            if isinstance(entry.compiled, Exported)  # the control backend compiles nothing
            or self.settings.backend == CONTROL_BACKEND
            else self.accountant.observe(
                module=entry.module_copy, cudagraphs=self.settings.uses_cudagraphs
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

    def run_as_user(
        self, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: Mapping[str, Any]
    ) -> SideResult | None:
        """The call compiled as the user compiles it (no fallback_random), on its own copies and
        compile cache, uncounted: judged on what random draws cannot change. None when Dynamo
        refused it for its recompile limit (that compile cache is the checker's, not the
        user's)."""
        entry = self.entry(fn)
        as_user = entry.as_user
        module = fn if isinstance(fn, torch.nn.Module) else None
        if as_user is not None and as_user.module_copy is not None and module is not None:
            try:
                sync_module(module, as_user.module_copy, as_user.memo)
            except Restructured:
                as_user = None
        if as_user is None:
            memo: dict[int, Any] = {}
            module_copy = clone_tree(module, memo) if module is not None else None
            target = module_copy if module_copy is not None else randomness.own_code(fn)
            compiled = self._compile(target, as_user=True)
            as_user = entry.as_user = AsUser(module_copy, compiled, memo)
            self.costs.compiled(AS_USER)
        _, user_args, user_kwargs = clone_tree((None, args, dict(kwargs)))
        self._switch_as_compiled()
        mark_inputs((user_args, user_kwargs), self.settings.dim_marks, (args, kwargs))
        side = self._side(as_user.compiled, as_user.module_copy, user_args, user_kwargs)
        around = _compat.compiler_warnings_dropped
        with _compat.dynamo_records() as records:  # uncounted, but its compiling costs time
            result = run_side(side, self.settings.compares_backward, around, wait=False)
        self.costs.compiled_uncounted(sum(event.duration_s for event in records.compiles))
        if result.exception is not None and _compat.is_recompile_limit_error(result.exception):
            return None
        return result
