"""One checked call: the compiled side and eager run from one state, and the re-runs from before.

The compiled side runs first, on copies (`compiled.CompiledSide`), so the caller's objects still
hold the state before the call when it is kept for re-runs (`snapshot.StateBefore`); then eager
runs on the caller's own objects, so they end as a plain call leaves them. Both start from the same
world around the call (`world.World`: the RNG, generators, globals, containers and objects the
callable reaches). Every re-run the rules ask for (`Call.reruns`) starts from that state again, and
leaves the world as eager left it.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass
from typing import Any, TypedDict

import torch

from pytest_torchcompile import _compat
from pytest_torchcompile.counting.costs import FAULT_RETRY, Costs
from pytest_torchcompile.running import faults, randomness, trees
from pytest_torchcompile.running.compiled import CompiledSide
from pytest_torchcompile.running.copier import clone_tree
from pytest_torchcompile.running.kept import KeptFor
from pytest_torchcompile.running.rounding import RoundingNoise
from pytest_torchcompile.running.sides import (
    COTANGENT_SEED,
    Side,
    SideResult,
    Stopwatch,
    differentiable_outputs,
    nothing,
    run_side,
    state_left,
    with_world,
    without_unjudged,
)
from pytest_torchcompile.running.signatures import Skip, inputs_signature
from pytest_torchcompile.running.snapshot import (
    Copies,
    StateBefore,
    Unfaithful,
    Watch,
    upcast_tree,
)
from pytest_torchcompile.running.state import state_after
from pytest_torchcompile.running.targets import Target
from pytest_torchcompile.running.ties import TIE_ORDERS, TieOrder
from pytest_torchcompile.running.world import World, WorldState, unseen
from pytest_torchcompile.settings import CACHELESS_BACKENDS, Settings


class RerunThunks(TypedDict):
    """`Call.reruns`: parity.compare's re-run keywords, each a thunk run at most once."""

    reference: Callable[[], SideResult]
    eager_again: Callable[[], SideResult]
    perturbed: Callable[[], SideResult]
    mirrored: Callable[[], SideResult]
    noise_base: Callable[[], SideResult]
    ties: dict[TieOrder, Callable[[], SideResult]]
    control: Callable[[], SideResult]


FALLBACK_RANDOM_NOTE = (
    f"random draws compared with {randomness.FALLBACK_RANDOM} on the graphs that draw them; "
    "raising and metadata also checked compiled as you compile"
)


@dataclass
class Call:
    """One checked call after both sides ran: their results, and what re-runs start from."""

    target: Target
    snapshot_of: tuple[torch.nn.Module | None, tuple[Any, ...], dict[str, Any]]
    eager: SideResult
    compiled: SideResult
    as_user: SideResult | None  # compiled as the user compiles, where it draws random
    pristine: StateBefore
    lacking: list[str]  # state eager changed whose earlier value is not kept: no re-run
    world: World  # what the call reaches besides its copies
    before: WorldState  # as it was before the call
    side: CompiledSide  # the compiled side's path, which the control takes with no compiler
    costs: Costs  # the test's: re-runs are timed as such
    eager_time: Stopwatch  # eager's run of this call, which bounds what its re-runs may cost

    def from_before(
        self, copier: Callable[[Any, dict[int, Any]], Any], run: Callable[..., SideResult]
    ) -> Callable[[], SideResult]:
        """A thunk calling `run(target, args, kwargs)` on a fresh copy of the call as it was
        (made by `copier`: clone_tree, upcast_tree...), in the world as it was before the call
        (the generators among the call's objects too, before they are copied), leaving the
        world as eager left it."""

        def from_the_snapshot() -> SideResult:
            if self.lacking:
                raise Unfaithful(
                    f"eager changed {', '.join(self.lacking)} in place where the compiled run "
                    "did not, so there is no copy of the state before the call"
                )
            left_by_eager = self.world.capture()
            self.world.restore(self.before)
            try:
                module, args, kwargs = self.pristine.copy(self.snapshot_of, copier)
                with self.costs.timing("re-runs"), unseen():
                    result = run(self.target.on(module), args, kwargs)
                with_world(result, self.world)  # what it left there, as the sides have
                return result
            finally:
                self.world.restore(left_by_eager)

        return from_the_snapshot

    def rerun(
        self,
        copier: Callable[[Any, dict[int, Any]], Any],
        backward: bool,
        around: Callable[[], Any] = nothing,
        rows: torch.Tensor | None = None,
    ) -> Callable[[], SideResult]:
        """A thunk running eager again on a fresh copy of the call as it was (`from_before`);
        with `rows`, on those rows alone of every input along the call's batch (`on_rows`)."""

        def eager_again(
            target: Target, args: tuple[Any, ...], kwargs: dict[str, Any]
        ) -> SideResult:
            if rows is not None:
                args, kwargs = _on_rows((args, kwargs), rows, self.batch)
            likes = [o.dtype for o in differentiable_outputs(self.eager.output)]
            side = Side(target.fn, target.module, args, kwargs, likes)
            return run_side(side, backward, around)

        return self.from_before(copier, eager_again)

    @functools.cached_property
    def kind(self) -> Hashable | None:
        """What makes two calls of a test one kind for the snapshot: the callable and the
        inputs' types, shapes, strides, dtypes and devices (None where they cannot be told: a
        tensor subclass). A plain eager re-run that reproduced one call of a kind is not run
        for the next ones until a leaf would fail."""
        try:
            return id(self.target.fn), inputs_signature(self.snapshot_of[1:])
        except Skip:
            return None

    @functools.cached_property
    def batch(self) -> int:
        """The length of the first dimension the call's tensor inputs share (0 where none
        has one): the dimension a sample of rows is taken along."""
        inputs = trees.tensors(self.snapshot_of[1:])
        sizes = {t.shape[0] for t in inputs if _cuttable(t) and t.shape[0] > 1}
        return sizes.pop() if len(sizes) == 1 else 0

    def on_rows(
        self, backward: bool
    ) -> Callable[[int, torch.Tensor], dict[str, Callable[[], SideResult]]] | None:
        """Re-runs on a sample of the rows of the call's batch (where its tensor inputs share
        one first dimension): eager plainly, which must reproduce eager's rows bit for bit for
        the sample to stand, and the rounding-noise runs; {} for a leaf whose first dimension
        is not the batch's. None where the call has no batch."""
        if not self.batch:
            return None
        table = functools.cache(_compat.compiler_decompositions)

        def runs(batch: int, rows: torch.Tensor) -> dict[str, Callable[[], SideResult]]:
            if batch != self.batch:
                return {}
            return {
                "plain": self.rerun(clone_tree, backward, rows=rows),
                **self._noise(backward, table, rows),
            }

        return runs

    def _noise(
        self,
        backward: bool,
        table: Callable[[], Mapping[Any, Callable[..., Any]]],
        rows: torch.Tensor | None = None,
    ) -> dict[str, Callable[[], SideResult]]:
        """The rounding-noise runs: a sample, its mirror and the same program without noise."""

        def noise(*, noise: bool = True, opposite: bool = False) -> Callable[[], Any]:
            return lambda: RoundingNoise(
                COTANGENT_SEED, noise=noise, opposite=opposite, decompositions=table()
            )

        return {
            "perturbed": self.rerun(clone_tree, backward, noise(), rows),
            "mirrored": self.rerun(clone_tree, backward, noise(opposite=True), rows),
            "noise_base": self.rerun(clone_tree, backward, noise(noise=False), rows),
        }

    def control(self) -> Callable[[], SideResult]:
        """A thunk running the control: the call, from a fresh copy of it as it was, through
        the compiled side's own path (its copies, marks and runner) with no compiler. Where the
        control differs from eager too, a difference is the checker's own."""

        return self.from_before(clone_tree, self.side.run_control)

    def _tie_rerun(self, backward: bool, order: TieOrder) -> Callable[[], SideResult]:
        return self.rerun(
            clone_tree, backward, lambda: RoundingNoise(COTANGENT_SEED, noise=False, ties=order)
        )

    def reruns(self, backward: bool) -> RerunThunks:
        """The re-runs the rules may ask for (parity.compare's keywords), each from the state
        before the call: eager again, the float64 reference, the rounding-noise runs (a
        sample, its mirror, and the same program without noise), eager with near-equal values
        taken in each other order tried (not decomposed: they are measured from eager itself)
        and the control."""
        table = functools.cache(_compat.compiler_decompositions)  # imported only if a leaf needs it
        noise = self._noise(backward, table)
        return RerunThunks(
            reference=self.rerun(upcast_tree, backward),
            eager_again=self.rerun(clone_tree, backward),
            perturbed=noise["perturbed"],
            mirrored=noise["mirrored"],
            noise_base=noise["noise_base"],
            ties={order: self._tie_rerun(backward, order) for order in TIE_ORDERS},
            control=self.control(),
        )


def _cuttable(t: torch.Tensor) -> bool:
    """Whether rows of `t` can be cut out (`index_select` along its first dimension)."""
    return t.layout == torch.strided and not t.is_nested and t.dim() > 0


def _on_rows(tree: Any, rows: torch.Tensor, batch: int) -> Any:
    """`tree` with each tensor whose first dimension has `batch` elements cut to `rows` (a new
    leaf, requiring grad as the input did), through tuples, lists and dicts."""
    if isinstance(tree, torch.Tensor):
        if not _cuttable(tree) or tree.shape[0] != batch:
            return tree
        cut = tree.detach().index_select(0, rows.to(tree.device))
        return cut.requires_grad_(tree.requires_grad)
    if isinstance(tree, tuple | list):
        return type(tree)(_on_rows(item, rows, batch) for item in tree)
    if isinstance(tree, dict):
        return {key: _on_rows(item, rows, batch) for key, item in tree.items()}
    return tree


def _recompile_limit_hit(result: SideResult) -> bool:
    return result.exception is not None and _compat.is_recompile_limit_error(result.exception)


class CallRunner:
    """Runs both sides of each call of one test, from one state."""

    def __init__(
        self,
        compiled: CompiledSide,
        settings: Settings,
        *,
        examples: bool,
        on_recompile_limit: Callable[[], None],
        notes: list[str],
        context: Callable[[], str],
        costs: Costs,
    ) -> None:
        self.compiled = compiled
        self.costs = costs  # the test's: each side's run is timed
        self.settings = settings
        # Under Hypothesis, a call refused for the recompile limit runs again in a fresh cache
        # (`on_recompile_limit` starts it); outside, the refusal is the verdict.
        self._examples = examples
        self._on_recompile_limit = on_recompile_limit
        self._notes = notes  # the checker's, for the report
        self._context = context
        self._worlds = KeptFor(World.of)  # by the callable: the walk reads code once

    def _note(self, note: str) -> None:
        if note not in self._notes:
            self._notes.append(note)

    def run(self, target: Target, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> Call:
        """Run the compiled side (on copies), then eager (on the caller's objects), from one
        state; keep what re-runs need to start from the state before the call."""
        snapshot_of = (target.module, args, dict(kwargs))  # the call as made
        # One walk of the state before the call serves both sides: the compiled side's copies
        # hold the same plain attributes under the same names.
        watch = Watch.of(state_after(*snapshot_of))
        world = self._worlds.of(target.fn).for_call(args, kwargs)
        before = world.capture()

        def compiled_again() -> tuple[SideResult, bool, Copies]:
            world.restore(before)
            with self.costs.timing("compiled side"), unseen():
                return self.compiled.run(target, args, kwargs, watch)

        with self.costs.timing("compiled side"), unseen():
            compiled, moved, copies = self.compiled.run(target, args, kwargs, watch)
        if self._examples and _recompile_limit_hit(compiled):
            self._on_recompile_limit()
            compiled, moved_again, copies = compiled_again()
            moved = moved or moved_again
        cached = self.settings.backend not in CACHELESS_BACKENDS
        fault = faults.classify(compiled.exception, cached=cached)
        if fault is not None:  # not the compiler's doing: retried with a fresh cache, or raised
            self.costs.compiled(FAULT_RETRY)
            outcome = faults.recover(
                fault,
                compiled_again,
                lambda r: r[0].exception,
                self._notes,
                self._context(),
                before_retry=self.compiled.forget_last_run,  # the retry is counted, not both
            )
            compiled, moved_again, copies = outcome
            moved = moved or moved_again
        # Re-runs need the call as it was, and the caller's objects hold that until eager runs:
        # keep what the compiled run shows the call changes. Anything else eager changes, the
        # watch sees, and re-runs refuse.
        pristine = StateBefore.take(snapshot_of, copies, moved)
        with_world(compiled, world)
        as_user = None
        if self.compiled.entry(target).draws_random:
            world.restore(before)
            with self.costs.timing("compiled side"), unseen():
                as_user = self.compiled.run_as_user(target, args, kwargs)
            if as_user is not None:  # judged against eager's world too
                with_world(as_user, world)
            self._note(FALLBACK_RANDOM_NOTE)
        # Eager starts from the world the compiled side did, under the process-wide switches
        # the user set, not torch.compile's.
        world.restore(before)
        eager_side = Side(target.fn, target.module, args, dict(kwargs))
        eager_time = Stopwatch()
        with self.costs.timing("eager side"), eager_time.timing():
            eager = run_side(eager_side, self.settings.compares_backward, nothing, wait=False)
        lacking = pristine.lacks(watch, state_left(eager, eager_side))
        with_world(eager, world)
        without_unjudged(world, compiled, as_user)
        return Call(
            target,
            snapshot_of,
            eager,
            compiled,
            as_user,
            pristine,
            lacking,
            world,
            before,
            self.compiled,
            self.costs,
            eager_time,
        )
