"""Comparing what the eager and compiled runs produced: the walk over both sides, leaf by leaf.

The verdict follows `torch.testing.assert_close` (same per-dtype tolerances, NaN equal to NaN,
infinities equal only to themselves, integers and bools exact). Exceptions are compared as the user
sees them: Dynamo's and Inductor's wrappers are unwrapped first, and raising is parity when compiled
raised eager's exception type or a subclass of it. Outputs (any pytree), the state the call left and
the gradients are walked in that order; each tensor leaf's metadata is compared, then its values:
by the plain tolerance with the reduction-order noise floor (`closeness`), then, for a floating
leaf that fails it, by the rules in `rules` in the README's order, each consulting the re-runs it
needs (the float64 reference, eager's rounding noise, eager again; `reruns` runs them lazily and
at most once a call). A failure the control run shows too is the checker's: not judged.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from pytest_torchcompile import _compat
from pytest_torchcompile.errors import ParityError, UncopyableInputError
from pytest_torchcompile.judging import judges, rules
from pytest_torchcompile.judging.closeness import (
    Settled,
    dense,
    is_inexact,
    noise_floor,
    num,
    plain_pair,
    plainly_close,
    plainly_close_all,
    reads_wait,
    value_lines,
)
from pytest_torchcompile.judging.judges import Verdict
from pytest_torchcompile.judging.reruns import Reruns, RowRuns, exc_text, nodes_by_name
from pytest_torchcompile.running import trees
from pytest_torchcompile.running.sides import SideResult, Stopwatch
from pytest_torchcompile.running.snapshot import Unfaithful
from pytest_torchcompile.running.ties import TieOrder

# torch.testing.assert_close's default (rtol, atol) per dtype, copied from
# torch/testing/_comparison.py (torch 2.11 to 2.13) because its accessor is private.
# Other dtypes (integers, bool, float8) compare exactly, as there.
_DEFAULT_TOLERANCES: dict[torch.dtype, tuple[float, float]] = {
    torch.float16: (1e-3, 1e-5),
    torch.bfloat16: (1.6e-2, 1e-5),
    torch.float32: (1.3e-6, 1e-5),
    torch.float64: (1e-7, 1e-7),
    torch.complex32: (1e-3, 1e-5),
    torch.complex64: (1.3e-6, 1e-5),
    torch.complex128: (1e-7, 1e-7),
}


@dataclass(frozen=True)
class CompareOptions:
    """How strictly to compare; rtol/atol of None mean assert_close's per-dtype defaults."""

    rtol: float | None = None
    atol: float | None = None
    check_strides: bool = True  # strides of output tensors, in dims of size > 1
    check_requires_grad: bool = True  # False where the compiled side has no autograd
    context: str = ""  # backend, mode, dynamic, device...: appended to every message

    def __post_init__(self) -> None:
        if (self.rtol is None) != (self.atol is None):
            raise ValueError(
                f"rtol and atol must be given together or not at all, got rtol={self.rtol!r} "
                f"atol={self.atol!r}"
            )
        for name, value in (("rtol", self.rtol), ("atol", self.atol)):
            if value is not None and not value >= 0:
                raise ValueError(f"{name} must be a number >= 0, got {name}={value!r}")

    def tolerances(self, dtype: torch.dtype) -> tuple[float, float]:
        """(rtol, atol) for a dtype; integers and bools are always exact, (0, 0)."""
        if not (dtype.is_floating_point or dtype.is_complex):
            return 0.0, 0.0
        if self.rtol is not None and self.atol is not None:
            return self.rtol, self.atol
        return _DEFAULT_TOLERANCES.get(dtype, (0.0, 0.0))


@dataclass
class LeafComparison:
    """The verdict on one compared leaf, with its largest differences kept even when it passed."""

    leaf: str  # "output[1]['logits']", "grad of parameter 'W_q.weight'", ...
    verdict: Verdict
    max_abs: float = 0.0  # greatest |compiled - eager| over finite elements (0.0 for non-tensors)
    max_rel: float = 0.0  # greatest |compiled - eager| / |eager| over finite, nonzero eager ones
    message: str = ""  # FAILED: the full explanation, context line included
    note: str = ""  # EXCUSED and NOT_JUDGED: the rule it rested on and its evidence
    rule: str = ""  # the judge that reached the verdict
    nondeterministic: bool = False  # two eager runs already disagree at this leaf

    @property
    def ok(self) -> bool:
        """It does not fail the test (passed, excused, or not judged)."""
        return self.verdict is not Verdict.FAILED

    @property
    def judged(self) -> bool:
        """False where the checker could not judge it: its note says why ("checked partly")."""
        return self.verdict is not Verdict.NOT_JUDGED


@dataclass
class ParityReport:
    """Every leaf compared in one checker call, in order: exception, outputs, after, grads."""

    leaves: list[LeafComparison]
    exception_note: str  # "" or e.g. "both raised ValueError"
    context: str = ""
    # Whether a plain eager re-run reproduced eager at every leaf a rule asked about (None: no
    # rule asked, or one rebuilt this kind of call before): then the snapshot rebuilds it.
    rebuilt: bool | None = None

    @property
    def ok(self) -> bool:
        return all(leaf.ok for leaf in self.leaves)

    @property
    def notes(self) -> list[str]:
        """What the excused and unjudged leaves rested on, each naming its rule."""
        return [leaf.note for leaf in self.leaves if leaf.note]

    def having(self, verdict: Verdict) -> list[LeafComparison]:
        return [leaf for leaf in self.leaves if leaf.verdict is verdict]

    @property
    def failures(self) -> list[LeafComparison]:
        """Failing leaves, most important first: ones eager agrees with itself on come first."""
        return sorted(self.having(Verdict.FAILED), key=lambda leaf: leaf.nondeterministic)

    def failure_message(self) -> str:
        failures = self.failures
        if not failures:
            return ""
        count = "1 leaf" if len(failures) == 1 else f"{len(failures)} leaves"
        parts = [f"Eager and compiled runs disagree at {count} of {len(self.leaves)} compared."]
        parts += [leaf.message.removesuffix(_context_suffix(self.context)) for leaf in failures]
        if self.context:
            parts.append(self.context)
        return "\n\n".join(parts)

    def raise_if_failed(self) -> None:
        __tracebackhide__ = True
        if not self.ok:
            raise ParityError(self.failure_message())


def compare(
    eager: SideResult,
    compiled: SideResult,
    options: CompareOptions,
    *,
    reference: Callable[[], SideResult] | None = None,
    eager_again: Callable[[], SideResult] | None = None,
    perturbed: Callable[[], SideResult] | None = None,
    noise_base: Callable[[], SideResult] | None = None,
    mirrored: Callable[[], SideResult] | None = None,
    ties: Mapping[TieOrder, Callable[[], SideResult]] | None = None,
    control: Callable[[], SideResult] | None = None,
    rebuilt: bool = False,
    on_rows: RowRuns | None = None,
    eager_time: Stopwatch | None = None,
) -> ParityReport:
    """Compare the compiled side against eager, leaf by leaf.

    `reference`, `perturbed`, `noise_base`, `mirrored`, `eager_again` and `control` are
    expensive re-runs; each is called at most once, and only when some leaf fails the plain
    tolerance (reference), still fails after the reference (perturbed, and noise_base: the same
    re-run without the noise, which the noise is measured from; without it, from eager), still
    fails after the perturbed re-run (mirrored: its noise moved the other way; then ties: no
    noise, near-equal values taken in each other order, one after the other until every
    difference is explained), or fails outright
    (eager_again; and control: the call through the compiled side's own path with no compiler,
    which tells the checker's own differences from the compiler's). With `rebuilt` (a plain
    re-run reproduced this kind of call before), eager is taken as reproduced for the rules
    until a leaf would fail: only then is it re-run. With `eager_time` (eager's run of the
    call) and `on_rows` (the same re-runs on a sample of the call's rows), the re-runs are
    bounded (`samples.Bound`): a leaf whose noise runs would pass the bound is judged on a
    sample of its rows.
    """
    reruns = Reruns(
        options.tolerances,
        reference,
        eager_again,
        perturbed,
        noise_base,
        mirrored,
        ties=ties,
        control=control,
        rebuilt=rebuilt,
        on_rows=on_rows,
        eager_time=eager_time,
    )
    return _Comparer(options, reruns).compare(eager, compiled)


def compare_metadata(
    eager: SideResult,
    compiled: SideResult,
    options: CompareOptions,
    *,
    control: Callable[[], SideResult] | None = None,
) -> ParityReport:
    """Compare only what a different random stream cannot change: raising (and the exception's
    type), pytree structure, and each tensor leaf's metadata (shape, dtype, device, layout,
    requires_grad, output strides where significant). Values are not compared. A difference the
    `control` shows too is the checker's, not judged."""
    reruns = Reruns(options.tolerances, None, None, None, None, None, control=control)
    return _MetadataComparer(options, reruns).compare(eager, compiled)


# --- the walk over both sides ---------------------------------------------------------------


class _PlainVerdicts:
    """The plain tolerance's verdicts of one call's tensor leaves, settled together where reading
    a value waits for a device, and leaf by leaf elsewhere."""

    def __init__(self, options: CompareOptions) -> None:
        self.options = options
        self._settled: dict[str, Settled] = {}  # plain verdicts of the tensor leaves, by name

    def settle(self, eager: SideResult, compiled: SideResult) -> None:
        """Judge every tensor leaf both sides hold alike by the plain tolerance at once, where
        reading a value waits for a device.

        Reading a verdict off a GPU is a host sync (the device must drain its queue); one per
        leaf made a passing call's comparison cost more than its kernels. On the CPU a read
        costs nothing, and leaf by leaf (torch.equal first) is fewer ops. `_values` then takes
        the verdicts from here."""
        # A call's tensors share a device as a rule; in a mixed call whose first tensor found
        # is on the CPU, leaves are read one by one: slower on the GPU, the same verdicts.
        if not reads_wait(next(_tensors(eager), None)):
            return
        found, given = nodes_by_name(eager), nodes_by_name(compiled)
        pairs = [
            (name, given[name].detach(), e.detach(), *self.options.tolerances(e.dtype))
            for name, e in found.items()
            if reads_wait(e) and plain_pair(e, given.get(name))
        ]
        self._settled = {
            name: Settled(c, e, rtol, atol, *verdicts)
            for (name, c, e, rtol, atol), verdicts in zip(
                pairs, plainly_close_all([pair[1:] for pair in pairs]), strict=True
            )
        }

    def close(
        self, name: str, c: Tensor, e: Tensor, rtol: float, atol: float
    ) -> tuple[float, float] | None:
        """`plainly_close`, read from `settle_plainly`'s verdicts where they hold this leaf."""
        settled = self._for(name, c, e, rtol, atol)
        return settled.verdict if settled else plainly_close(c, e, rtol, atol)

    def within_floor(
        self, name: str, c: Tensor, e: Tensor, rtol: float, atol: float
    ) -> tuple[float, float] | None:
        """`plainly_close` with the reduction-order noise floor of `e` added to atol."""
        settled = self._for(name, c, e, rtol, atol)
        if settled:
            return settled.within_floor
        return plainly_close(c, e, rtol, atol + noise_floor(e, e.dtype))

    def within_tolerance(
        self, name: str, c: Tensor, e: Tensor, rtol: float, atol: float
    ) -> tuple[float, float] | None:
        """(max_abs, max_rel) where the leaf is within assert_close's tolerance, with the
        reduction-order noise floor where the tolerances are the defaults; None elsewhere."""
        passed = self.close(name, c, e, rtol, atol)
        if passed is None and self.options.rtol is None and is_inexact(e):
            # Within reduction-order noise of eager: the reference rule would pass it (with r the
            # reference, |c - r| <= |c - e| + |e - r|), so no re-run is needed to say so.
            passed = self.within_floor(name, c, e, rtol, atol)
        return passed

    def _for(self, name: str, c: Tensor, e: Tensor, rtol: float, atol: float) -> Settled | None:
        settled = self._settled.get(name)
        return settled if settled is not None and settled.judges(c, e, rtol, atol) else None


HOST_ELEMENTS = 1 << 16
"""A leaf that fails the plain tolerance and is no larger than this is judged by the rules on
the CPU: their few dozen small float64 ops and reads cost a kernel launch and a host sync each
on a GPU (about 4 ms for an 8-element gradient on an H100), next to nothing on the CPU. The
arithmetic is the same IEEE float64 there, so are the verdicts."""


def _judged_where(t: Tensor) -> Tensor:
    """`t` where the rules judge it: on the CPU when it is small and reading it waits for a
    device (complex32, with few CPU kernels, stays where it is)."""
    if reads_wait(t) and t.numel() <= HOST_ELEMENTS and t.dtype != torch.complex32:
        return t.cpu()
    return t


class _Comparer:
    """One comparison: walks both sides in report order and collects a verdict per leaf."""

    def __init__(self, options: CompareOptions, reruns: Reruns, *, controlled: bool = True) -> None:
        self.options = options
        self.reruns = reruns
        self.plain = _PlainVerdicts(options)
        self.witnesses = _Witnesses(options, reruns, controlled=controlled)
        self.leaves: list[LeafComparison] = []
        self._holding: set[int] = set()  # objects compared by what they hold, being walked

    def compare(self, eager: SideResult, compiled: SideResult) -> ParityReport:
        self.witnesses.eager = eager
        note = self.exceptions(eager, compiled)
        if eager.exception is None and compiled.exception is None:
            self.plain.settle(eager, compiled)
            self.walk("output", eager.output, compiled.output, "output")
            self.sections(eager.after, compiled.after, "after")
            self.sections(eager.grads, compiled.grads, "grad")
        return ParityReport(self.leaves, note, self.options.context, self.reruns.reproduced)

    def exceptions(self, eager: SideResult, compiled: SideResult) -> str:
        """Record an 'exception' leaf when the sides disagree on raising; return the note."""
        note, body = _raising(eager, compiled)
        if body:
            self._fail("exception", body, "exception", eager_value=eager.exception)
        return note

    def sections(self, eager: dict[str, Any], compiled: dict[str, Any], section: str) -> None:
        for key in eager:
            if key in compiled:
                self.walk(key, eager[key], compiled[key], section)
            else:
                body = f"{key}: present in eager only, missing from compiled."
                self._fail(key, body, section, eager_value=eager[key])
        for key in compiled:
            if key not in eager:
                body = f"{key}: present in compiled only, missing from eager."
                self._fail(key, body, section, eager_value=_ABSENT)

    def walk(self, name: str, e: Any, c: Any, section: str) -> None:
        try:
            e_node, c_node = _children(e), _children(c)
        except Exception as exc:  # a value whose own methods refuse to be read
            note = f"{name}: cannot compare a {type(e).__qualname__}: reading it raised "
            self.leaves.append(
                LeafComparison(
                    name, Verdict.NOT_JUDGED, note=note + exc_text(exc), rule="uncomparable"
                )
            )
            return
        if e_node is None and c_node is None:
            self._leaf(name, e, c, section)
            return
        if e_node is None or c_node is None or type(e) is not type(c):
            self._fail(name, _kind_mismatch(name, e, c, section), section, eager_value=e)
            return
        e_children, c_children = dict(e_node), dict(c_node)
        if e_children.keys() != c_children.keys():
            self._fail(name, _shape_mismatch(name, e, e_node, c_node), section, eager_value=e)
            return
        for suffix, e_child in e_node:
            self.walk(name + suffix, e_child, c_children[suffix], section)

    def _leaf(self, name: str, e: Any, c: Any, section: str) -> None:
        if isinstance(e, Tensor) and isinstance(c, Tensor):
            self._tensor(name, e, c, section)
        elif type(e) is not type(c):
            self._fail(name, _kind_mismatch(name, e, c, section), section, eager_value=e)
        elif isinstance(e, float | complex) and e != c:  # equal ones (most) need no tensors
            wide = torch.float64 if isinstance(e, float) else torch.complex128
            e_t, c_t = torch.tensor(e, dtype=wide), torch.tensor(c, dtype=wide)
            self._values(name, e_t, c_t, [])
        elif e is not c and trees.by_identity(e):
            self._held(name, e, c, section)
        else:
            try:
                equal = bool(e == c)
            except Exception as exc:
                body = f"{name}: cannot compare {type(e).__name__} values: {exc_text(exc)}"
                self._fail(name, body, section, eager_value=e)
                return
            if equal:
                self.leaves.append(LeafComparison(name, Verdict.PASSED, rule="equality"))
            else:
                body = f"{name}: eager has {e!r}, compiled has {c!r}."
                self._fail(name, body, section, eager_value=e)

    def _held(self, name: str, e: Any, c: Any, section: str) -> None:
        """Two runs' objects that compare by identity alone, compared by what they hold (each
        object once on the way down: one that holds itself is not walked again)."""
        e_held, c_held = trees.held(e), trees.held(c)
        if e_held is None or c_held is None:
            note = (
                f"{name}: cannot compare a {type(e).__qualname__} (it compares by identity, "
                "and holds no attributes the checker can compare)"
            )
            self.leaves.append(
                LeafComparison(name, Verdict.NOT_JUDGED, note=note, rule="uncomparable")
            )
        elif dict(e_held).keys() != dict(c_held).keys():
            only_e = ", ".join(k for k, _ in e_held if k not in dict(c_held)) or "none"
            only_c = ", ".join(k for k, _ in c_held if k not in dict(e_held)) or "none"
            body = (
                f"{name}: attributes differ; only in eager: {only_e}; only in compiled: {only_c}."
            )
            self._fail(name, body, section, eager_value=e)
        elif not e_held:
            self.leaves.append(LeafComparison(name, Verdict.PASSED, rule="equality"))
        elif id(e) not in self._holding:
            self._holding.add(id(e))
            theirs = dict(c_held)
            for suffix, item in e_held:
                self.walk(name + suffix, item, theirs[suffix], section)
            self._holding.discard(id(e))

    def _tensor(self, name: str, e: Tensor, c: Tensor, section: str) -> None:
        problems = [
            f"{what}: eager {ev}, compiled {cv}"
            for what, ev, cv in _metadata(e, c, self.options, section)
        ]
        if (e.shape, e.dtype, e.device, e.layout) != (c.shape, c.dtype, c.device, c.layout):
            body = f"{name}: tensor metadata differs between eager and compiled.\n" + "\n".join(
                f"  {p}" for p in problems
            )
            self._fail(name, body, section, eager_value=e, values_differ=False)
            return
        self._values(name, dense(e), dense(c), problems)

    def _values(self, name: str, e: Tensor, c: Tensor, problems: list[str]) -> None:
        """A tensor leaf alike in metadata but for its strides: by the judges, in order, then,
        where they fail it, by the control."""
        rtol, atol = self.options.tolerances(e.dtype)
        within = functools.partial(self.plain.within_tolerance, name, c, e, rtol, atol)
        case = judges.Case(
            name, e, c, rtol, atol, tuple(problems), within, self.reruns, _judged_where
        )
        outcome = judges.judge(case)
        if outcome.verdict is Verdict.FAILED and self.reruns.assumed:
            self.reruns.assumed = False  # a failure: prove, this time, that eager re-runs alike
            outcome = judges.judge(case)
        if outcome.verdict is Verdict.FAILED:
            outcome = self.witnesses.controlled(name, outcome)
        max_abs, max_rel = outcome.largest
        if outcome.verdict is not Verdict.FAILED:
            leaf = LeafComparison(
                name, outcome.verdict, max_abs, max_rel, note=outcome.note, rule=outcome.rule
            )
            self.leaves.append(leaf)
            return
        lines = _failure_lines(name, outcome, e, c, rtol, atol, problems)
        self._failed(name, lines, max_abs, max_rel, outcome.rule, outcome.nondeterministic)

    def _failed(
        self,
        name: str,
        lines: list[str],
        max_abs: float,
        max_rel: float,
        rule: str,
        nondeterministic: bool,
    ) -> None:
        message = "\n".join(lines) + _context_suffix(self.options.context)
        self.leaves.append(
            LeafComparison(
                name,
                Verdict.FAILED,
                max_abs,
                max_rel,
                message,
                rule=rule,
                nondeterministic=nondeterministic,
            )
        )

    def _fail(
        self,
        name: str,
        body: str,
        section: str,
        *,
        eager_value: Any,
        values_differ: bool = True,
    ) -> None:
        """A leaf that differs in kind, structure, presence, metadata, a Python value or an
        exception: failed with a note where eager's own re-run varies there, or not judged where
        the control shows the same difference."""
        shown = self.witnesses.control_differs(name)
        if shown:
            note = _control_note(name, shown)
            self.leaves.append(
                LeafComparison(name, Verdict.NOT_JUDGED, note=note, rule=judges.CONTROL)
            )
            return
        # A second eager run can explain differing values, never differing metadata.
        ask = self.reruns.eager_again.given and values_differ
        varies = self.witnesses.nondeterminism(name, eager_value, section) if ask else ""
        lines = [body, f"  {varies}"] if varies else [body]
        self._failed(name, lines, 0.0, 0.0, "equality", bool(varies))


class _Witnesses:
    """What stands behind a failing leaf's verdict: the control (a difference it shows too is
    the checker's own: not judged) and eager's second run (a difference it shows too is eager's
    nondeterminism, which the failure says)."""

    def __init__(self, options: CompareOptions, reruns: Reruns, *, controlled: bool) -> None:
        self.options = options
        self.reruns = reruns
        self.eager = SideResult(None, None, {}, {})  # the call's eager side, once compared
        self._controlled = controlled  # the control judges failures (not within the control)
        self._control_report: ParityReport | None = None  # eager against the control, once

    def controlled(self, name: str, outcome: judges.Outcome) -> judges.Outcome:
        """`outcome` (a failure), or NOT_JUDGED where the control differs from eager there too."""
        shown = self.control_differs(name)
        if not shown:
            return outcome
        return dataclasses.replace(
            outcome,
            verdict=Verdict.NOT_JUDGED,
            rule=judges.CONTROL,
            note=_control_note(name, shown),
        )

    def nondeterminism(self, name: str, eager_value: Any, section: str) -> str:
        """A note where a plain eager re-run does not reproduce the first at this non-tensor or
        structural leaf, else ""."""
        if not self.reruns.eager_again.given:
            return ""
        again = self.reruns.eager_again.result()
        if isinstance(again.exception, Unfaithful):
            return ""  # no faithful re-run: nothing is known about eager's determinism
        if section == "exception":
            if type(again.exception) is type(eager_value):
                return ""
            how = f"a second eager run {_outcome(again.exception, again.raised_in_backward)}"
        elif again.exception is not None:
            how = f"a second eager run raised {exc_text(again.exception)}"
        else:
            found, again_value = self.reruns.eager_again.get(name)
            if found != (eager_value is not _ABSENT):
                how = "a second eager run " + ("has" if found else "lacks") + " this leaf"
            elif not found:
                return ""
            else:
                check = _Comparer(
                    self.options, Reruns(self.options.tolerances, None, None, None, None)
                )
                check.walk(name, eager_value, again_value, section)
                failed = [leaf for leaf in check.leaves if not leaf.ok]
                if not failed:
                    return ""
                worst = max(leaf.max_abs for leaf in failed)
                how = "two eager runs differ" + (f" by {num(worst)}" if worst else "")
        return rules.nondeterministic_text(how)

    def control_differs(self, name: str) -> str:
        """What the control run (the call through the compiled side's own path with no
        compiler) shows where it differs from eager at `name` too: the difference is then the
        checker's own. "" where it agrees there, or where there is no faithful control: a
        difference stands unless the control shows it too, and within the control's own
        comparison."""
        if not self._controlled or not self.reruns.control.given:
            return ""
        control = self.reruns.control.result()
        if isinstance(control.exception, Unfaithful | UncopyableInputError):
            return ""
        if self._control_report is None:
            judge = _Comparer(self.options, self.reruns, controlled=False)
            self._control_report = judge.compare(self.eager, control)
        for leaf in self._control_report.having(Verdict.FAILED):
            if leaf.leaf == "exception" or _related(leaf.leaf, name):
                return leaf.message.removesuffix(_context_suffix(self.options.context))
        return ""


class _MetadataComparer(_Comparer):
    """The walk of compare_metadata: leaves judged by kind and metadata, never by value."""

    def _leaf(self, name: str, e: Any, c: Any, section: str) -> None:
        if isinstance(e, Tensor) and isinstance(c, Tensor):
            self._tensor(name, e, c, section)
        elif type(e) is not type(c):
            self._fail(name, _kind_mismatch(name, e, c, section), section, eager_value=e)
        else:
            self.leaves.append(LeafComparison(name, Verdict.PASSED, rule="metadata"))

    def _tensor(self, name: str, e: Tensor, c: Tensor, section: str) -> None:
        problems = _metadata(e, c, self.options, section)
        if not problems:
            self.leaves.append(LeafComparison(name, Verdict.PASSED, rule="metadata"))
            return
        body = f"{name}: tensor metadata differs between eager and compiled.\n" + "\n".join(
            f"  {what}: eager {ev}, compiled {cv}" for what, ev, cv in problems
        )
        self._fail(name, body, section, eager_value=e, values_differ=False)


def _failure_lines(
    name: str,
    outcome: judges.Outcome,
    e: Tensor,
    c: Tensor,
    rtol: float,
    atol: float,
    problems: list[str],
) -> list[str]:
    """What a failing tensor leaf's message says: what differs, by how much, what each rule
    that tried found."""
    scan = outcome.scan
    exact = rtol == 0 and atol == 0
    differ = scan is not None and scan.mismatched > 0
    headline = f"values are not {'equal' if exact else 'close'}" if differ else ""
    lines = [f"{name}: {headline or 'tensor metadata differs'}"]
    lines += [f"  {p}" for p in problems]
    if problems and problems[-1].startswith("memory layout"):
        lines.append("  (check_strides=False ignores strides)")
    if scan is not None and differ:
        lines += value_lines(scan, e, c, rtol, atol)
    return lines + list(outcome.lines)


def _control_note(name: str, shown: str) -> str:
    first = shown.strip().splitlines()[0] if shown.strip() else shown
    return (
        f"{name}: not judged: the control run (this call through the compiled side's own path, "
        f"its copies and re-runs, with no compiler) differs from eager here too ({first}), so the "
        "difference is the checker's, not the compiler's. Please report it."
    )


def _related(name: str, other: str) -> bool:
    """Whether two leaf names are the same leaf, or one holds the other."""
    if name == other:
        return True
    short, long = sorted((name, other), key=len)
    return long.startswith(short) and long[len(short)] in "[."


class _Absent:
    """Marks a leaf one side does not have (distinct from a leaf whose value is None)."""


_ABSENT = _Absent()


# --- pytrees and descriptions ---------------------------------------------------------------


def _children(value: Any) -> list[tuple[str, Any]] | None:
    """A node's children with the suffix each adds to its parent's name; None for a leaf."""
    return trees.children(value, inner_tensors=True)


def _describe(value: Any) -> str:
    if value is None:
        return "None"
    if isinstance(value, Tensor):
        return f"a tensor of shape {tuple(value.shape)} and dtype {value.dtype}"
    kind = type(value).__qualname__
    if isinstance(value, tuple | list | dict) and not isinstance(value, torch.Size):
        return f"a {kind} of length {len(value)}"
    if dataclasses.is_dataclass(value):
        return f"a {kind}"
    return f"{kind} {value!r}"


def _kind_mismatch(name: str, e: Any, c: Any, section: str) -> str:
    if section == "grad" and (e is None or c is None):
        empty, full, value = ("eager", "compiled", c) if e is None else ("compiled", "eager", e)
        return f"{name}: {empty} computed no gradient (None), {full} computed {_describe(value)}."
    return f"{name}: eager has {_describe(e)}, compiled has {_describe(c)}."


def _shape_mismatch(
    name: str, e: Any, e_node: list[tuple[str, Any]], c_node: list[tuple[str, Any]]
) -> str:
    if isinstance(e, dict):
        e_keys, c_keys = [s[1:-1] for s, _ in e_node], [s[1:-1] for s, _ in c_node]
        only_e = ", ".join(k for k in e_keys if k not in c_keys) or "none"
        only_c = ", ".join(k for k in c_keys if k not in e_keys) or "none"
        return f"{name}: dict keys differ; only in eager: {only_e}; only in compiled: {only_c}."
    return f"{name}: eager has {len(e_node)} elements, compiled has {len(c_node)}."


def _metadata(
    e: Tensor, c: Tensor, options: CompareOptions, section: str
) -> list[tuple[str, str, str]]:
    """(what, eager's, compiled's) for each piece of tensor metadata that differs."""
    pairs: list[tuple[str, Any, Any]] = [
        ("shape", tuple(e.shape), tuple(c.shape)),
        ("dtype", e.dtype, c.dtype),
        ("device", e.device, c.device),
        ("layout", e.layout, c.layout),
    ]
    if options.check_requires_grad:
        pairs.append(("requires_grad", e.requires_grad, c.requires_grad))
    check_strides = options.check_strides and section == "output"
    found = [(what, str(ev), str(cv)) for what, ev, cv in pairs if ev != cv]
    comparable = e.shape == c.shape and e.layout == c.layout == torch.strided
    if check_strides and comparable and e.numel() > 0 and _layout(e) != _layout(c):
        found.append(("memory layout (strides)", str(e.stride()), str(c.stride())))
    return found


def _layout(t: Tensor) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """What of a tensor's strides code can depend on: the order of its dimensions in memory and
    which are broadcast (stride 0), over dimensions of size > 1.

    A channels_last result where eager gives a contiguous one, a transpose materialized, or a
    broadcast dimension made real are layout changes; Inductor padding rows for alignment (row
    stride 16 for 10 columns) keeps the layout and is no divergence.
    """
    strides = t.stride()
    dims = [d for d, size in enumerate(t.shape) if size > 1]
    order = tuple(sorted(dims, key=lambda d: (-strides[d], -d)))
    broadcast = tuple(d for d in dims if strides[d] == 0)
    return order, broadcast


def _raising(eager: SideResult, compiled: SideResult) -> tuple[str, str]:
    """How the sides compare in raising, as the user sees it: (the note where both raised
    alike, the failure's text where they did not); ("", "") where neither raised."""
    e, c = eager.exception, compiled.exception
    if e is None and c is None:
        return "", ""
    e_user = None if e is None else _compat.user_exception(e)
    c_user = None if c is None else _compat.user_exception(c)
    if e_user is not None and c is not None and isinstance(c_user, type(e_user)):
        # What the user sees: Dynamo's wrappers unwrapped. A subclass of eager's type is
        # parity too: code catching what eager raised catches it.
        note = f"both raised {_type_name(e_user)}"
        if c_user is not c:
            return f"{note} (compiled: inside torch.compile's {_type_name(c)})", ""
        same = type(c_user) is type(e_user)
        return (note if same else f"{note} (compiled: {_type_name(c)})"), ""
    body = (
        f"exception: eager {_outcome(e, eager.raised_in_backward)}, "
        f"compiled {_outcome(c, compiled.raised_in_backward)}"
    )
    return "", body


def _type_name(exc: BaseException) -> str:
    return type(exc).__name__


def _outcome(exc: BaseException | None, in_backward: bool = False) -> str:
    """What one side did, as the user would see it; a compiler failure is named as one."""
    if exc is None:
        return "returned normally"
    where = "in the backward " if in_backward else ""
    user = _compat.user_exception(exc)
    if user is not exc:
        return f"raised {where}{exc_text(user)} (inside torch.compile's {_type_name(exc)})"
    if _compat.is_compile_wrapper(exc):
        return f"failed to compile {where}with {exc_text(exc)}"
    return f"raised {where}{exc_text(exc)}"


def _context_suffix(context: str) -> str:
    return f"\n\n{context}" if context else ""


# --- element-wise numerics, in float64 chunks -----------------------------------------------


def _tensors(side: SideResult) -> Iterator[Tensor]:
    """The side's tensors: in its output pytree, state after the call and gradients (these
    first: most are tensors)."""
    pending = [side.output, *side.after.values(), *side.grads.values()]
    while pending:
        value = pending.pop()
        if isinstance(value, Tensor):
            yield value
        else:
            pending += [child for _, child in _children(value) or []]
