"""The judges of one tensor leaf: each rule one small unit answering in one outcome type.

A leaf is judged by the judges in `ORDER`, the order docs/compared.md lists them; each looks at
the leaf's eager and compiled values and, lazily, at the re-runs it needs (`Evidence`), and
answers with an `Outcome` (verdicts.py: the type the rules answer in too): PASSED (within the plain tolerance), EXCUSED (outside it, passed by a
named rule whose note gives the evidence), FAILED (this rule excuses nothing: its lines say why,
and a later judge may still excuse it unless the failure is final) or None (the rule does not
apply to this leaf). `judge` is the loop over them. A difference that outlasts every judge is
then put to the control (parity.py), which may make it NOT_JUDGED: the checker's own difference.

No leaf outside the plain tolerance passes without a named rule: an EXCUSED or NOT_JUDGED outcome
without a note, or a PASSED outcome from any judge but the first, is an internal error
(`JudgingError`), raised where the verdict is made.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal, Protocol

import torch
from torch import Tensor

from pytest_torchcompile.judging import rules
from pytest_torchcompile.judging.closeness import Scan, distance, is_inexact, num, scan_leaf
from pytest_torchcompile.judging.verdicts import JudgingError as JudgingError
from pytest_torchcompile.judging.verdicts import NoiseSample as NoiseSample
from pytest_torchcompile.judging.verdicts import Outcome as Outcome
from pytest_torchcompile.judging.verdicts import Verdict as Verdict
from pytest_torchcompile.running.ties import TIE_ORDERS, TieOrder

AUDIT_ENVIRONMENT = "PYTEST_TORCHCOMPILE_FAIL_EXCUSED"
"""Set to 1, every excused leaf fails with its excuse: an audit of what the rules let pass."""


@dataclass(frozen=True)
class Reproduction:
    """Whether a plain eager re-run from the call's snapshot reproduces eager at this leaf."""

    kind: Literal["reproduced", "differs", "unavailable"]
    how: str = ""  # how it differs, or why no faithful re-run exists


@dataclass(frozen=True)
class Noise:
    """One rounding-noise sample of this leaf: the perturbed re-run and its noiseless base."""

    noisy: Tensor | None  # None: the re-run has no such leaf
    base: Tensor | None
    raised: str = ""  # the re-run raised this: nothing to judge by


@dataclass(frozen=True)
class RowSample:
    """Rows of a leaf to judge it on, where its full re-runs would pass the call's bound."""

    rows: Tensor  # indices along the leaf's first dimension
    evidence: Evidence  # the re-runs on those rows alone
    slack: float  # the whole leaf's allowance beyond the tolerance, by the float64 reference
    text: str  # what the note says of the sample


class Evidence(Protocol):
    """The re-runs a leaf's judges may consult, each run lazily and at most once a call."""

    @property
    def reference_given(self) -> bool: ...

    @property
    def noise_given(self) -> bool: ...

    def reproduction(self, name: str, e: Tensor) -> Reproduction: ...

    def reference(self, name: str, e: Tensor) -> tuple[Tensor | None, str]: ...

    def noise(self, name: str, e: Tensor, *, sample: NoiseSample) -> Noise | None: ...

    def noise_rows(self, name: str, e: Tensor, c: Tensor) -> RowSample | None: ...

    def spread_samples(self, name: str, e: Tensor) -> list[Tensor] | None: ...

    def late_samples(self, name: str, e: Tensor) -> tuple[list[Tensor], str]: ...

    def alerted(self) -> bool: ...


@dataclass
class Case:
    """A tensor leaf under judgement: eager's and compiled's dense values, moved where the rules
    judge them (`where`) only once the plain tolerance has failed them."""

    name: str
    eager: Tensor
    compiled: Tensor
    rtol: float
    atol: float
    problems: tuple[str, ...]  # metadata that differs (strides): fails whatever the values
    within_tolerance: Callable[[], tuple[float, float] | None]  # assert_close with the floor
    evidence: Evidence
    where: Callable[[Tensor], Tensor] = lambda t: t

    @functools.cached_property
    def whole_from_floats(self) -> bool:
        """An integer or bool leaf computed from floating values (a quantizer's codes, the floor
        of a bfloat16 value): its float64 reference's whole numbers differ from eager's, so
        eager's own carry eager's rounding. Such a leaf is judged as a floating one, by the
        rules' boundaries (compiled is wrong where eager matches the reference and compiled
        does not); where the reference agrees with eager, whole numbers are exact. Asked only
        of a leaf outside the plain tolerance: it runs the reference."""
        if is_inexact(self.eager) or not self.evidence.reference_given:
            return False
        eager = self.where(self.eager)
        r, _ = self.evidence.reference(self.name, eager)
        if r is None or is_inexact(r):
            return False
        return bool((r.to(torch.float64) != eager.to(torch.float64)).any())

    @functools.cached_property
    def e(self) -> Tensor:
        e = self.where(self.eager)
        return e.to(torch.float64) if self.whole_from_floats else e

    @functools.cached_property
    def c(self) -> Tensor:
        c = self.where(self.compiled)
        return c.to(torch.float64) if self.whole_from_floats else c

    @functools.cached_property
    def reruns(self) -> Evidence:
        """The evidence as the judges consult it: for whole numbers judged as floats, asked
        with eager's own leaf and answering in float64."""
        if self.whole_from_floats:
            return _Widened(self.evidence, self.where(self.eager))
        return self.evidence

    @functools.cached_property
    def plain(self) -> Scan:
        """The element-wise verdict by the plain tolerance alone."""
        return scan_leaf(self.c, self.e, self.rtol, self.atol)

    @property
    def exact(self) -> bool:
        return not is_inexact(self.eager) and not self.whole_from_floats


@dataclass(frozen=True)
class _Widened:
    """The evidence of a whole-number leaf judged as a floating one (`Case.whole_from_floats`):
    the re-runs are asked with the leaf as eager holds it, and their leaves come back in
    float64. Row samples stand for floating leaves only."""

    inner: Evidence
    eager: Tensor  # the leaf in eager's own dtype

    @property
    def reference_given(self) -> bool:
        return self.inner.reference_given

    @property
    def noise_given(self) -> bool:
        return self.inner.noise_given

    def reproduction(self, name: str, e: Tensor) -> Reproduction:
        return self.inner.reproduction(name, self.eager)

    def reference(self, name: str, e: Tensor) -> tuple[Tensor | None, str]:
        r, why_not = self.inner.reference(name, self.eager)
        return _wide(r), why_not

    def noise(self, name: str, e: Tensor, *, sample: NoiseSample) -> Noise | None:
        found = self.inner.noise(name, self.eager, sample=sample)
        if found is None:
            return None
        return Noise(_wide(found.noisy), _wide(found.base), found.raised)

    def noise_rows(self, name: str, e: Tensor, c: Tensor) -> RowSample | None:
        return None

    def spread_samples(self, name: str, e: Tensor) -> list[Tensor] | None:
        samples = self.inner.spread_samples(name, self.eager)
        return None if samples is None else [t.to(torch.float64) for t in samples]

    def late_samples(self, name: str, e: Tensor) -> tuple[list[Tensor], str]:
        samples, how = self.inner.late_samples(name, self.eager)
        return [t.to(torch.float64) for t in samples], how

    def alerted(self) -> bool:
        return self.inner.alerted()


def _wide(t: Tensor | None) -> Tensor | None:
    return None if t is None else t.to(torch.float64)


Judge = Callable[[Case, Outcome], Outcome | None]


# --- the judges, in docs/compared.md's order --------------------------------------------------


def assert_close(case: Case, _: Outcome) -> Outcome | None:
    """Rule 1: assert_close's tolerance with the reduction-order noise floor; values and
    metadata. Integers and bools are exact, and no later rule excuses them, unless they are
    whole numbers computed from floating values (`Case.whole_from_floats`)."""
    largest = None if case.problems else case.within_tolerance()
    if largest is not None:
        return Outcome(Verdict.PASSED, "assert_close", largest=largest)
    if not case.problems and not case.plain.mismatched:  # NaN and inf in the same places
        return Outcome(Verdict.PASSED, "assert_close", case.plain, largest=_largest(case.plain))
    final = bool(case.problems) or (case.exact and not _eager_varies(case))
    return Outcome(Verdict.FAILED, "assert_close", case.plain, final=final)


def float64_reference(case: Case, so_far: Outcome) -> Outcome | None:
    """Rule 2 (rules.by_reference): compiled against the float64 reference, where a plain eager
    re-run reproduces eager."""
    if case.exact or so_far.final or not case.evidence.reference_given:
        return None
    reproduced = case.reruns.reproduction(case.name, case.e)
    if reproduced.kind == "differs":
        return None  # eager varies here: the run-to-run spread judges it
    assert so_far.scan is not None
    if reproduced.kind == "unavailable":
        line = (
            f"  Not judged by the float64 reference or eager's rounding noise: no faithful "
            f"re-run: {reproduced.how}."
        )
        return Outcome(Verdict.FAILED, rules.REFERENCE, so_far.scan, (line,))
    r, why_not = case.reruns.reference(case.name, case.e)
    if r is None:
        line = f"  No float64 reference here ({why_not}): judged by the plain tolerance."
        return Outcome(Verdict.FAILED, rules.REFERENCE, so_far.scan, (line,))
    judged = rules.by_reference(case.e, case.c, r, case.rtol, case.atol, so_far.scan)
    assert judged.scan is not None
    if judged.passed:
        note = _reference_note(case, judged.scan, r)
        return Outcome(Verdict.EXCUSED, judged.rule, judged.scan, note=note)
    # Compiled is wrong there: only eager's rounding noise may show it is no boundary.
    final = judged.boundaries.wrong > 0 and not case.evidence.noise_given
    return dataclasses.replace(judged, final=final)


def rounding_noise(case: Case, so_far: Outcome) -> Outcome | None:
    """Rule 3 (rules.by_rounding_noise): compiled moved no further than eager's own rounding
    noise moves eager; its mirrored sample where the first does not excuse the leaf. NaN and inf
    placement is never noise, except where the noise makes eager non-finite there too."""
    scan = so_far.scan
    if case.exact or so_far.final or not case.evidence.noise_given or scan is None:
        return None
    if case.reruns.reproduction(case.name, case.e).kind != "reproduced":
        return None
    placed = scan.mismatched - scan.value_mismatches
    if placed and placed != rules.compiled_overflows(case.e, case.c):
        # NaN/inf placement of another kind (eager non-finite, NaN against inf): never noise
        wrong = so_far.boundaries.wrong > 0
        return Outcome(Verdict.FAILED, rules.NOISE, scan, final=True) if wrong else None
    rows = case.reruns.noise_rows(case.name, case.e, case.c)
    if rows is not None and (on_rows := _on_rows(case, so_far, rows)) is not None:
        return on_rows
    lines: list[str] = []
    unexcused = so_far.boundaries.wrong  # where no sample judges them, they stand
    explained: Tensor | None = None  # boundary elements the first sample explained
    for which in ("perturbed", "mirrored"):
        sample = case.reruns.noise(case.name, case.e, sample=which)
        if sample is None:
            continue
        if sample.raised:
            lines.append(f"  Not judged by eager's rounding noise: it raised {sample.raised}.")
            break
        if sample.noisy is None or sample.base is None:
            break
        judged = rules.by_rounding_noise(
            case.e,
            case.c,
            sample.noisy,
            sample.base,
            scan,
            so_far.boundaries,
            mirrored=which == "mirrored",
            explained_before=explained,
        )
        lines += judged.lines
        unexcused, explained = judged.unexcused, judged.explained
        if judged.passed:
            note = _noise_note(case, judged)
            return Outcome(Verdict.EXCUSED, judged.rule, judged.scan, note=note)
    return Outcome(Verdict.FAILED, rules.NOISE, scan, tuple(lines), final=unexcused > 0)


def _on_rows(case: Case, so_far: Outcome, sample: RowSample) -> Outcome | None:
    """Rule 3 on a sample of the leaf's rows: the float64 reference's verdict there (with the
    whole leaf's allowance), then eager's rounding noise on the call re-run on those rows.
    None where the sample holds none of the elements the reference failed: the whole runs
    judge the leaf then."""
    where = sample.rows.to(case.e.device)
    rows = dataclasses.replace(
        case, eager=case.e[where], compiled=case.c[where], evidence=sample.evidence
    )
    r, _ = sample.evidence.reference(case.name, rows.e)
    assert r is not None  # a sample is taken only where the reference is
    judged = rules.by_reference(
        rows.e, rows.c, r, case.rtol, case.atol, rows.plain, slack=sample.slack
    )
    if judged.passed:
        return None
    outcome = rounding_noise(rows, dataclasses.replace(judged, lines=()))
    assert outcome is not None
    line = f"  On a sample of the leaf's rows: {sample.text}."
    if outcome.verdict is Verdict.EXCUSED:
        return dataclasses.replace(outcome, scan=so_far.scan, note=f"{outcome.note}; {sample.text}")
    return dataclasses.replace(
        outcome, scan=so_far.scan, lines=(line, *outcome.lines), boundaries=so_far.boundaries
    )


def near_ties(case: Case, so_far: Outcome) -> Outcome | None:
    """Rule 4 (rules.by_near_ties): compiled took near-equal values in another
    order than eager (the index a topk or argmin returns), where eager taking them in another
    order returns compiled's value at every element that differs (the orders tried one after
    the other, each asked for only while some difference is unexplained). Integers too: an
    index is exact, but which of two near-equal values it points to is rounding. Silent where
    reversing them changes nothing in this leaf (no near tie reached it)."""
    scan = so_far.scan if so_far.scan is not None else case.plain
    if case.problems or case.e.is_complex() or not case.evidence.noise_given:
        return None  # metadata no order explains; complex values, which nothing orders
    if case.reruns.reproduction(case.name, case.e).kind != "reproduced":
        return None
    first = _tie_run(case, TIE_ORDERS[0])
    if first is None or rules.identical(first, case.e):
        return None
    later = (_tie_run(case, order) for order in TIE_ORDERS[1:])
    orders = itertools.chain([first], (run for run in later if run is not None))
    judged = rules.by_near_ties(case.e, case.c, orders, case.rtol, case.atol, scan)
    if not judged.passed:
        return dataclasses.replace(judged, final=so_far.final)
    note = f"{_outside(case, case.plain)}; excused as near ties: {judged.lines[-1].strip()}"
    return Outcome(Verdict.EXCUSED, judged.rule, judged.scan, note=note)


def _tie_run(case: Case, order: TieOrder) -> Tensor | None:
    """This leaf in one of rule 4's re-runs; None where it is not given, raised, or has the
    leaf otherwise shaped."""
    found = case.reruns.noise(case.name, case.e, sample=order)
    if found is None or found.raised or found.noisy is None:
        return None
    return found.noisy if found.noisy.shape == case.e.shape else None


def run_to_run_spread(case: Case, so_far: Outcome) -> Outcome | None:
    """Rule 5 (rules.by_eager_spread): where eager's own runs differ (a plain re-run does not
    reproduce it, or one of a few more differs where the rules failed), compiled within eager's
    run-to-run spread passes, with a note. Whatever the rules before it found, they judged one
    eager run: where eager varies, that is what compiled is held to. Metadata it cannot excuse."""
    if case.problems:
        return None
    reproduced = case.reruns.reproduction(case.name, case.e)
    if reproduced.kind == "unavailable" or (case.exact and reproduced.kind != "differs"):
        return None
    if reproduced.kind == "differs":
        samples = None if case.exact else case.reruns.spread_samples(case.name, case.e)
        how = reproduced.how
        if samples is None:  # an integer leaf, or no third run: nothing to hold compiled to
            line = f"  {rules.nondeterministic_text(how)}"
            return Outcome(
                Verdict.FAILED,
                rules.SPREAD,
                so_far.scan,
                (line,),
                final=True,
                nondeterministic=True,
            )
        alerted: Callable[[], bool] = case.reruns.alerted
    else:
        samples, how = case.reruns.late_samples(case.name, case.e)
        if not samples:
            return None
        alerted = _no_alert
    judged = rules.by_eager_spread(
        case.name, case.e, case.c, samples, case.rtol, case.atol, how, alerted
    )
    verdict = Verdict.EXCUSED if judged.passed else Verdict.FAILED
    return dataclasses.replace(judged, verdict=verdict, final=True)


ORDER: tuple[tuple[str, Judge], ...] = (
    ("assert_close", assert_close),
    (rules.REFERENCE, float64_reference),
    (rules.NOISE, rounding_noise),
    (rules.TIES, near_ties),
    (rules.SPREAD, run_to_run_spread),
)
"""The judges in the order docs/compared.md lists them; then the control (parity.py), which
judges every kind of leaf."""

CONTROL = "the control"
"""The last judge: a difference the control run shows too is the checker's own, not judged."""


def judge(case: Case) -> Outcome:
    """The leaf's outcome: the first judge that passes or excuses it, else the failure with the
    lines of every judge that tried (a final failure is one the tolerance rules after it leave
    alone: they say so by not applying)."""
    so_far = Outcome(Verdict.FAILED, "")
    lines: list[str] = []
    for rule, decide in ORDER:
        outcome = decide(case, so_far)
        if outcome is None:
            continue
        if outcome.verdict is Verdict.PASSED and rule == ORDER[0][0]:
            return outcome
        if outcome.passed:
            return _excused(case, outcome, rule)
        lines += outcome.lines
        so_far = dataclasses.replace(outcome, lines=tuple(lines))
    return dataclasses.replace(so_far, largest=_largest(case.plain))


def _excused(case: Case, outcome: Outcome, rule: str) -> Outcome:
    """`outcome`, an excuse, checked: no judge but the first passes a leaf outside the plain
    tolerance without naming itself; under the excuse audit, every excuse fails instead."""
    if outcome.verdict is Verdict.PASSED:
        raise JudgingError(
            f"the {rule} rule passed {case.name} outside the plain tolerance without an excuse: "
            "an internal error of the checker, please report it"
        )
    largest = _largest(case.plain)
    if os.environ.get(AUDIT_ENVIRONMENT) == "1":
        line = (
            f"  Excused by the {outcome.rule} rule, failed by {AUDIT_ENVIRONMENT}=1: {outcome.note}"
        )
        failed = Verdict.FAILED
        return dataclasses.replace(
            outcome, verdict=failed, lines=(line,), final=True, largest=largest
        )
    return dataclasses.replace(outcome, largest=largest)


def _largest(plain: Scan) -> tuple[float, float]:
    return plain.abs_all.value, plain.rel_all.value


def _eager_varies(case: Case) -> bool:
    return case.reruns.reproduction(case.name, case.e).kind == "differs"


def _no_alert() -> bool:
    return False


# --- what an excuse says ----------------------------------------------------------------------


def _outside(case: Case, plain: Scan) -> str:
    """Where the leaf is outside the plain tolerance, which an excuse must account for."""
    placed = plain.mismatched - plain.value_mismatches
    where = f"{placed} NaN/inf placement(s)" if placed else ""
    if plain.value_mismatches:
        where = (
            f"{plain.value_mismatches} value(s), greatest |compiled - eager| "
            + num(plain.abs_bad.value)
            + (f", and {where}" if where else "")
        )
    whole = (
        " (whole numbers computed from floating values: eager's own differ from the float64 "
        "reference's)"
        if case.whole_from_floats
        else ""
    )
    return (
        f"{case.name}: outside assert_close's tolerance at {where} of {plain.numel} "
        f"element(s){whole}"
    )


def _reference_note(case: Case, verdict: Scan, r: Tensor) -> str:
    """Rule 2's excuse: how far each side is from the float64 reference."""
    parts = [f"{_outside(case, case.plain)}; excused by the float64 reference"]
    if case.plain.value_mismatches:
        parts[0] += (
            f": compiled is {num(distance(case.c, r).value)} from it where eager is "
            f"{num(distance(case.e, r).value)} (allowed: {rules.REFERENCE_SLACK:g}x eager's "
            "error and reduction-order noise)"
        )
    if verdict.rescued:
        parts.append(
            f"compiled is finite and agrees with the float64 reference at {verdict.rescued} "
            "element(s) where eager is not (eager overflowed or lost precision there): compiled "
            "is right"
        )
    if verdict.unjudged:
        parts.append(
            f"not judged at {verdict.unjudged} element(s) where eager is non-finite and compiled "
            f"is not: {case.e.dtype} has no wider reference to tell which is right (an overflow "
            "at the dtype's range only one side makes)"
        )
    return "; ".join(parts)


def _noise_note(case: Case, judged: Outcome) -> str:
    """Rule 3's excuse: the boundary elements eager's noise crosses too, and the rms."""
    evidence = "; ".join(line.strip() for line in judged.lines[1:])
    return f"{_outside(case, case.plain)}; excused by eager's rounding noise: {evidence}"
