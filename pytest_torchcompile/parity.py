"""Comparing what the eager and compiled runs produced: pytrees, metadata, tolerances, messages.

The verdict follows `torch.testing.assert_close` (same per-dtype tolerances, NaN equal to NaN,
infinities equal only to themselves, integers and bools exact). Exceptions are compared as the user
sees them: Dynamo's and Inductor's wrappers are unwrapped first, and raising is parity when compiled
raised eager's exception type or a subclass of it. A leaf that fails the plain tolerance is judged
again, in this order, and only if a plain eager re-run from the same snapshot reproduces eager's
first result (otherwise a re-run proves nothing about the compiler, and nothing is excused):

* A float64 reference `r` (eager re-run on inputs and state upcast to float64, aliasing kept). With
  ``E = max|eager - r|`` (eager's own worst error on the leaf) and ``rms(r)`` the leaf's typical
  magnitude, every element where compiled and the reference are finite must satisfy::

      |compiled - r| <= atol + rtol * |r| + REFERENCE_SLACK * E + NOISE_ULPS * eps * rms(r)

  with REFERENCE_SLACK = 3 (PyTorch's accuracy benchmarks allow 2-3x eager's RMS error) and
  NOISE_ULPS = 128 units of the accumulation precision `eps` (float32's for float16, bfloat16 and
  float32 leaves, float64's for float64). The first term is assert_close's; the second lets the
  compiler be as far from the exact answer as eager is; the third is reduction order: Inductor sums
  in a different order than ATen (vector lanes, or one lane over a non-contiguous input, instead of
  a cascade), which on long or cancelling reductions costs ulps of the leaf's magnitude, even where
  eager happened to be closer. Calibrated on the zoo and examples over seeds 0-4 and op_db: the
  largest seen is 59 ulps (a 3900-term float32 sum of wide values, summed in one lane). A 1e-3
  error in one element or a 1% gradient scale are tens to hundreds of times above it.
  Non-finite values are judged against the reference rounded to the leaf's dtype: where eager is
  non-finite but the reference finite, compiled passes by agreeing with the reference (it is right
  and eager overflowed); where the reference is non-finite too and eager is non-finite, the kinds
  (nan, +inf, -inf) may differ; compiled non-finite where the reference is finite fails.
* Eager's own rounding noise. Some leaves are ill-conditioned: a result that cancels (the bias
  gradient of a convolution followed by BatchNorm in training is exactly zero), or a normalisation
  that divides a mean's rounding error by a tiny standard deviation (a near-constant channel),
  carries the rounding of intermediate values amplified, and eager's one error sample bounds
  nothing; and some programs are discontinuous at rounding level (a ReLU, max or comparison whose
  input sits within an ulp of its kink turns the other way on one side). Where a floating leaf
  still fails and a `perturbed` re-run is given, the leaf passes iff
  ``rms(compiled - eager) <= SENSITIVITY_SLACK * rms(perturbed - noise_base)``
  (SENSITIVITY_SLACK = 3): the compiler may move the result no further than rounding-level
  changes move eager. The runner's `perturbed` re-run nudges inputs and state by one unit in the
  last place and rounds every operation's result to a neighbouring value (a reduction's by about
  sqrt(terms) units of its accumulation precision), with fused operations decomposed as Inductor
  decomposes them; `noise_base` is the same decomposed re-run without the noise, so a
  decomposition's own difference from the fused kernel is never counted as noise (rounding.py). Where the result is well conditioned
  that spread is a few ulps and the rule excuses nothing a planted bug makes. NaN/inf placement
  is never excused by it.

Differences are computed in float64 in chunks, so a large leaf never needs more than a few
chunk-sized float64 temporaries.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor

from pytest_torchcompile import _compat
from pytest_torchcompile.errors import ParityError

REFERENCE_SLACK = 3.0
"""k in the float64-reference rule: compiled may be this many times eager's own worst error away."""

NOISE_ULPS = 128.0
"""Reduction-order noise the reference rule allows: this many ulps (of the accumulation precision)
of the leaf's RMS magnitude."""

SENSITIVITY_SLACK = 3.0
"""k in the rounding-noise rule: compiled may move this many times as far as rounding noise does."""

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

_CHUNK = 1 << 22  # elements per float64 working chunk (32 MiB per temporary)
_EXCEPTION_TEXT_LIMIT = 2000


class RerunUnavailable(Exception):
    """A re-run could not be built faithfully; it says nothing about eager or the compiler."""


@dataclass
class SideResult:
    """What one side (eager, compiled, or the float64 reference) produced in one checker call."""

    output: Any  # returned pytree; None when the call raised
    exception: BaseException | None  # what the call raised, if anything
    after: dict[str, Any]  # named state after the call, ordered; keys are display names
    grads: dict[str, Any]  # "grad of input 0" -> Tensor or None
    raised_in_backward: bool = False  # the exception came from the backward, not the call


@dataclass(frozen=True)
class CompareOptions:
    """How strictly to compare; rtol/atol of None mean assert_close's per-dtype defaults."""

    rtol: float | None = None
    atol: float | None = None
    check_strides: bool = True  # strides of output tensors, in dims of size > 1
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
    ok: bool
    max_abs: float  # greatest |compiled - eager| over finite elements (0.0 for non-tensors)
    max_rel: float  # greatest |compiled - eager| / |eager| over finite, nonzero eager elements
    message: str  # empty when ok; otherwise the full explanation, context line included
    nondeterministic: bool = False  # two eager runs already disagree at this leaf
    note: str = ""  # what a passing leaf's verdict rested on that the reader should know


@dataclass
class ParityReport:
    """Every leaf compared in one checker call, in order: exception, outputs, after, grads."""

    leaves: list[LeafComparison]
    exception_note: str  # "" or e.g. "both raised ValueError"
    context: str = ""

    @property
    def ok(self) -> bool:
        return all(leaf.ok for leaf in self.leaves)

    @property
    def notes(self) -> list[str]:
        return [leaf.note for leaf in self.leaves if leaf.note]

    @property
    def failures(self) -> list[LeafComparison]:
        """Failing leaves, most important first: ones eager agrees with itself on come first."""
        failed = [leaf for leaf in self.leaves if not leaf.ok]
        return sorted(failed, key=lambda leaf: leaf.nondeterministic)

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
) -> ParityReport:
    """Compare the compiled side against eager, leaf by leaf.

    `reference`, `perturbed`, `noise_base` and `eager_again` are expensive re-runs; each is
    called at most once, and only when some leaf fails the plain tolerance (reference), still
    fails after the reference (perturbed, and noise_base: the same re-run without the noise, which
    the noise is measured from; without it, from eager), or fails outright (eager_again).
    """
    comparer = _Comparer(options, reference, eager_again, perturbed, noise_base)
    note = comparer.exceptions(eager, compiled)
    if eager.exception is None and compiled.exception is None:
        comparer.settle_plainly(eager, compiled)
        comparer.walk("output", eager.output, compiled.output, "output")
        comparer.sections(eager.after, compiled.after, "after")
        comparer.sections(eager.grads, compiled.grads, "grad")
    return ParityReport(comparer.leaves, note, options.context)


def compare_metadata(
    eager: SideResult, compiled: SideResult, options: CompareOptions
) -> ParityReport:
    """Compare only what a different random stream cannot change: raising (and the exception's
    type), pytree structure, and each tensor leaf's metadata (shape, dtype, device, layout,
    requires_grad, output strides where significant). Values are not compared."""
    comparer = _MetadataComparer(options, None, None)
    note = comparer.exceptions(eager, compiled)
    if eager.exception is None and compiled.exception is None:
        comparer.walk("output", eager.output, compiled.output, "output")
        comparer.sections(eager.after, compiled.after, "after")
        comparer.sections(eager.grads, compiled.grads, "grad")
    return ParityReport(comparer.leaves, note, options.context)


# --- the walk over both sides ---------------------------------------------------------------


class _Rerun:
    """A lazily called, memoised re-run (reference or second eager), indexed by leaf name."""

    def __init__(self, thunk: Callable[[], SideResult] | None) -> None:
        self._thunk = thunk
        self._result: SideResult | None = None
        self._index: dict[str, Any] = {}

    @property
    def given(self) -> bool:
        return self._thunk is not None

    def result(self) -> SideResult:
        if self._result is None:
            assert self._thunk is not None
            try:
                self._result = self._thunk()
            except Exception as exc:  # the re-run itself failed: report it, never crash the check
                self._result = SideResult(None, exc, {}, {})
            self._index = _index(self._result)
        return self._result

    def get(self, name: str) -> tuple[bool, Any]:
        """(found, value) of the node called `name` in the re-run."""
        self.result()
        return name in self._index, self._index.get(name)


class _Comparer:
    """One comparison: walks both sides in report order and collects a verdict per leaf."""

    def __init__(
        self,
        options: CompareOptions,
        reference: Callable[[], SideResult] | None,
        eager_again: Callable[[], SideResult] | None,
        perturbed: Callable[[], SideResult] | None = None,
        noise_base: Callable[[], SideResult] | None = None,
    ) -> None:
        self.options = options
        self.reference = _Rerun(reference)
        self.eager_again = _Rerun(eager_again)
        self.perturbed = _Rerun(perturbed)
        self.noise_base = _Rerun(noise_base)
        self.leaves: list[LeafComparison] = []
        self._settled: dict[str, _Settled] = {}  # plain verdicts of the tensor leaves, by name

    def settle_plainly(self, eager: SideResult, compiled: SideResult) -> None:
        """Judge every tensor leaf both sides hold alike by the plain tolerance at once, where
        reading a value waits for a device.

        Reading a verdict off a GPU is a host sync (the device must drain its queue); one per
        leaf made a passing call's comparison cost more than its kernels. On the CPU a read
        costs nothing, and leaf by leaf (torch.equal first) is fewer ops. `_values` then takes
        the verdicts from here."""
        # A call's tensors share a device as a rule; in a mixed call whose first tensor found
        # is on the CPU, leaves are read one by one: slower on the GPU, the same verdicts.
        if not _reads_wait(next(_tensors(eager), None)):
            return
        found, given = _index(eager), _index(compiled)
        pairs = [
            (name, given[name].detach(), e.detach(), *self.options.tolerances(e.dtype))
            for name, e in found.items()
            if _reads_wait(e) and _plain_pair(e, given.get(name))
        ]
        self._settled = {
            name: _Settled(c, e, rtol, atol, *verdicts)
            for (name, c, e, rtol, atol), verdicts in zip(
                pairs, _plainly_close_all([pair[1:] for pair in pairs]), strict=True
            )
        }

    def _plainly_close(
        self, name: str, c: Tensor, e: Tensor, rtol: float, atol: float
    ) -> tuple[float, float] | None:
        """`_plainly_close`, read from `settle_plainly`'s verdicts where they hold this leaf."""
        settled = self._settled_for(name, c, e, rtol, atol)
        return settled.verdict if settled else _plainly_close(c, e, rtol, atol)

    def _within_noise_floor(
        self, name: str, c: Tensor, e: Tensor, rtol: float, atol: float
    ) -> tuple[float, float] | None:
        """`_plainly_close` with the reduction-order noise floor of `e` added to atol."""
        settled = self._settled_for(name, c, e, rtol, atol)
        if settled:
            return settled.within_floor
        return _plainly_close(c, e, rtol, atol + _noise_floor(e, e.dtype))

    def _settled_for(
        self, name: str, c: Tensor, e: Tensor, rtol: float, atol: float
    ) -> _Settled | None:
        settled = self._settled.get(name)
        return settled if settled is not None and settled.judges(c, e, rtol, atol) else None

    # -- exceptions --

    def exceptions(self, eager: SideResult, compiled: SideResult) -> str:
        """Record an 'exception' leaf when the sides disagree on raising; return the note."""
        e, c = eager.exception, compiled.exception
        if e is None and c is None:
            return ""
        e_user = None if e is None else _compat.user_exception(e)
        c_user = None if c is None else _compat.user_exception(c)
        if e_user is not None and c is not None and isinstance(c_user, type(e_user)):
            # What the user sees: Dynamo's wrappers unwrapped. A subclass of eager's type is
            # parity too: code catching what eager raised catches it.
            note = f"both raised {_type_name(e_user)}"
            if c_user is not c:
                return f"{note} (compiled: inside torch.compile's {_type_name(c)})"
            return note if type(c_user) is type(e_user) else f"{note} (compiled: {_type_name(c)})"
        body = (
            f"exception: eager {_outcome(e, eager.raised_in_backward)}, "
            f"compiled {_outcome(c, compiled.raised_in_backward)}"
        )
        self._fail("exception", body, "exception", eager_value=e)
        return ""

    # -- structure --

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
        e_node, c_node = _children(e), _children(c)
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
            self._values(name, e_t, c_t, [], section)
        else:
            try:
                equal = bool(e == c)
            except Exception as exc:
                body = f"{name}: cannot compare {type(e).__name__} values: {_exc_text(exc)}"
                self._fail(name, body, section, eager_value=e)
                return
            if equal:
                self.leaves.append(LeafComparison(name, True, 0.0, 0.0, ""))
            else:
                body = f"{name}: eager has {e!r}, compiled has {c!r}."
                self._fail(name, body, section, eager_value=e)

    # -- tensors --

    def _tensor(self, name: str, e: Tensor, c: Tensor, section: str) -> None:
        problems = [
            f"{what}: eager {ev}, compiled {cv}"
            for what, ev, cv in _metadata(e, c, self.options.check_strides and section == "output")
        ]
        if (e.shape, e.dtype, e.device, e.layout) != (c.shape, c.dtype, c.device, c.layout):
            body = f"{name}: tensor metadata differs between eager and compiled.\n" + "\n".join(
                f"  {p}" for p in problems
            )
            self._fail(name, body, section, eager_value=e)
            return
        self._values(name, _dense(e), _dense(c), problems, section)

    def _values(self, name: str, e: Tensor, c: Tensor, problems: list[str], section: str) -> None:
        rtol, atol = self.options.tolerances(e.dtype)
        passed = None if problems else self._plainly_close(name, c, e, rtol, atol)
        if passed is None and not problems and self.options.rtol is None and _is_inexact(e):
            # Within reduction-order noise of eager: the reference rule would pass it (with r the
            # reference, |c - r| <= |c - e| + |e - r|), so no re-run is needed to say so.
            passed = self._within_noise_floor(name, c, e, rtol, atol)
        if passed is not None:
            self.leaves.append(LeafComparison(name, True, *passed, ""))
            return
        scan = _scan(c, e, rtol, atol)
        verdict, reference_lines, note = scan, list[str](), ""
        rules = self.reference.given or self.perturbed.given
        differs = (
            self._rerun_differs(name, e) if scan.mismatched and rules and _is_inexact(e) else ""
        )
        if differs.startswith("no faithful re-run"):
            reference_lines.append(
                f"  Not judged by the float64 reference or eager's rounding noise: {differs}."
            )
        if scan.mismatched and rules and _is_inexact(e) and not differs:
            if self.reference.given:
                verdict, reference_lines = self._judge_by_reference(name, e, c, rtol, atol, scan)
            if (
                verdict.mismatched
                and verdict.mismatched == verdict.value_mismatches
                and self.perturbed.given
            ):
                verdict, noise_lines = self._judge_by_rounding_noise(name, e, c, verdict)
                reference_lines += noise_lines
            if verdict.rescued and not verdict.mismatched:
                note = (
                    f"{name}: compiled is finite and agrees with the float64 reference at "
                    f"{verdict.rescued} element(s) where eager is not (eager overflowed or lost "
                    "precision there): compiled is right"
                )
        max_abs, max_rel = scan.abs_all.value, scan.rel_all.value
        if not verdict.mismatched and not problems:
            self.leaves.append(LeafComparison(name, True, max_abs, max_rel, "", note=note))
            return
        exact = rtol == 0 and atol == 0
        headline = f"values are not {'equal' if exact else 'close'}" if verdict.mismatched else ""
        lines = [f"{name}: {headline or 'tensor metadata differs'}"]
        lines += [f"  {p}" for p in problems]
        if problems and problems[-1].startswith("memory layout"):
            lines.append("  (check_strides=False ignores strides)")
        if verdict.mismatched:
            lines += _value_lines(verdict, e, c, rtol, atol) + reference_lines
        self._fail(
            name,
            "\n".join(lines),
            section,
            max_abs,
            max_rel,
            eager_value=e,
            values_differ=bool(verdict.mismatched),
        )

    def _judge_by_reference(
        self, name: str, e: Tensor, c: Tensor, rtol: float, atol: float, plain: _Scan
    ) -> tuple[_Scan, list[str]]:
        """Re-judge a leaf that failed the plain tolerance against the float64 reference."""
        r, why_not = self._reference_leaf(name, e)
        if r is None:
            return plain, [
                f"  No float64 reference here ({why_not}): judged by the plain tolerance."
            ]
        eager_error = _distance(e, r)
        compiled_error = _distance(c, r)
        floor = _noise_floor(r, e.dtype)
        slack = REFERENCE_SLACK * eager_error.value + floor
        verdict = _scan(c, e, rtol, atol, reference=r, slack=slack)
        lines = [
            "  Judged against a float64 reference (eager re-run on inputs and state upcast):",
            f"    eager vs compiled:             {_peak_text(plain.abs_all, e)}"
            f"{_nonfinite_text(e, c, ('eager', 'compiled'))}",
            f"    eager vs float64 reference:    {_peak_text(eager_error, e)}"
            f"{_nonfinite_text(e, r, ('eager', 'reference'))}",
            f"    compiled vs float64 reference: {_peak_text(compiled_error, e)}"
            f"{_nonfinite_text(c, r, ('compiled', 'reference'))}",
            f"    allowed: |compiled - reference| <= atol + rtol * |reference| + "
            f"{REFERENCE_SLACK:g} * {_num(eager_error.value)} (eager's own error) + "
            f"{_num(floor)} (reduction-order noise: {NOISE_ULPS:g} ulps of the leaf's rms) "
            f"with atol={_num(atol)}, rtol={_num(rtol)}",
        ]
        return verdict, lines

    def _judge_by_rounding_noise(
        self, name: str, e: Tensor, c: Tensor, verdict: _Scan
    ) -> tuple[_Scan, list[str]]:
        """Re-judge a leaf that still fails against how far rounding noise moves eager."""
        noisy = self._rerun_leaf(self.perturbed, name, e)
        base = self._rerun_leaf(self.noise_base, name, e) if self.noise_base.given else e
        for rerun in (self.perturbed, self.noise_base):
            raised = rerun.result().exception if rerun.given else None
            if raised is not None:
                return verdict, [
                    f"  Not judged by eager's rounding noise: it raised {_exc_text(raised)}."
                ]
        if noisy is None or base is None:
            return verdict, []
        moved_by_compiler, moved_by_noise = _rms(c, e), _rms(noisy, base)
        bound = SENSITIVITY_SLACK * moved_by_noise
        lines = [
            "  Judged by eager's rounding noise (eager re-run with every operation's result "
            "rounded to a neighbouring value, reductions by sqrt(terms) ulps, fused operations "
            "decomposed, inputs and state nudged by one ulp):",
            f"    rms |compiled - eager| {_num(moved_by_compiler)}, rms |noisy - noiseless "
            f"re-run| {_num(moved_by_noise)}; allowed: {SENSITIVITY_SLACK:g} * "
            f"{_num(moved_by_noise)}",
        ]
        if moved_by_compiler <= bound:
            return dataclasses.replace(verdict, mismatched=0, value_mismatches=0), lines
        return verdict, lines

    @staticmethod
    def _rerun_leaf(rerun: _Rerun, name: str, e: Tensor) -> Tensor | None:
        """This leaf in a re-run in eager's dtype, if it is there and shaped like eager's."""
        _, value = rerun.get(name)
        if isinstance(value, float | complex):
            value = torch.tensor(value, dtype=e.dtype)
        return _dense(value) if isinstance(value, Tensor) and value.shape == e.shape else None

    def _reference_leaf(self, name: str, e: Tensor) -> tuple[Tensor | None, str]:
        """The float64 reference for this leaf, or None and the reason there is none."""
        result = self.reference.result()
        if result.exception is not None:
            return None, f"the reference run raised {_exc_text(result.exception)}"
        found, value = self.reference.get(name)
        if isinstance(value, float | complex):
            value = torch.tensor(value, dtype=torch.complex128 if e.is_complex() else torch.float64)
        if not isinstance(value, Tensor):
            return None, f"the reference run has no {'tensor at this' if found else 'such'} leaf"
        if value.shape != e.shape:
            return None, f"the reference has shape {tuple(value.shape)}, eager {tuple(e.shape)}"
        return _dense(value), ""

    # -- failures and eager's own nondeterminism --

    def _fail(
        self,
        name: str,
        body: str,
        section: str,
        max_abs: float = 0.0,
        max_rel: float = 0.0,
        *,
        eager_value: Any,
        values_differ: bool = True,
    ) -> None:
        # A second eager run can explain differing values, never differing metadata.
        ask = self.eager_again.given and values_differ
        note = self._nondeterminism(name, eager_value, section) if ask else ""
        message = body + (f"\n  {note}" if note else "") + _context_suffix(self.options.context)
        self.leaves.append(LeafComparison(name, False, max_abs, max_rel, message, bool(note)))

    def _nondeterminism(self, name: str, eager_value: Any, section: str) -> str:
        """A note when a plain eager re-run does not reproduce the first at this leaf, else ""."""
        again = self.eager_again.result()
        if isinstance(again.exception, RerunUnavailable):
            return ""  # no faithful re-run: nothing is known about eager's determinism
        if section == "exception":
            if type(again.exception) is type(eager_value):
                return ""
            how = f"a second eager run {_outcome(again.exception, again.raised_in_backward)}"
        elif isinstance(eager_value, Tensor) and _is_inexact(eager_value):
            how = self._rerun_differs(name, eager_value)
        elif again.exception is not None:
            how = f"a second eager run raised {_exc_text(again.exception)}"
        else:
            found, again_value = self.eager_again.get(name)
            if found != (eager_value is not _ABSENT):
                how = "a second eager run " + ("has" if found else "lacks") + " this leaf"
            elif not found:
                return ""
            else:
                check = _Comparer(self.options, None, None)
                check.walk(name, eager_value, again_value, section)
                failed = [leaf for leaf in check.leaves if not leaf.ok]
                if not failed:
                    return ""
                worst = max(leaf.max_abs for leaf in failed)
                how = "two eager runs differ" + (f" by {_num(worst)}" if worst else "")
        if not how:
            return ""
        return (
            f"A plain eager re-run from the same inputs and state does not reproduce eager's "
            f"result here ({how}): eager is nondeterministic, or the call could not be rebuilt "
            "exactly, so no rule excuses this difference. Seed the random number generators, or "
            "call torch.use_deterministic_algorithms(True)."
        )

    def _rerun_differs(self, name: str, e: Tensor) -> str:
        """How a plain eager re-run fails to reproduce floating leaf `e`; "" when it does.

        The rules that excuse a difference use re-runs; one that does not even reproduce eager
        (a nondeterministic op, or a call the snapshot could not rebuild: lost aliasing, a
        changed storage offset) proves nothing about the compiler. Reproducing means agreeing
        up to the tolerance and the reduction-order noise floor, NaN and inf in the same places.
        """
        if not self.eager_again.given:
            return ""
        again = self.eager_again.result()
        if isinstance(again.exception, RerunUnavailable):
            return f"no faithful re-run: {again.exception}"
        if again.exception is not None:
            return f"a second eager run raised {_exc_text(again.exception)}"
        found, value = self.eager_again.get(name)
        if isinstance(value, float | complex):
            value = torch.tensor(value, dtype=e.dtype)
        if not isinstance(value, Tensor) or value.shape != e.shape or value.dtype != e.dtype:
            return f"a second eager run {'has something else at' if found else 'lacks'} this leaf"
        rtol, atol = self.options.tolerances(e.dtype)
        value = _dense(value)
        scan = _scan(value, e, rtol, atol, reference=e, slack=_noise_floor(e, e.dtype))
        if not scan.mismatched:
            return ""
        worst = f" by up to {_num(scan.abs_bad.value)}" if scan.value_mismatches else ""
        return f"two eager runs differ at {scan.mismatched} element(s){worst}"


class _MetadataComparer(_Comparer):
    """The walk of compare_metadata: leaves judged by kind and metadata, never by value."""

    def _leaf(self, name: str, e: Any, c: Any, section: str) -> None:
        if isinstance(e, Tensor) and isinstance(c, Tensor):
            self._tensor(name, e, c, section)
        elif type(e) is not type(c):
            self._fail(name, _kind_mismatch(name, e, c, section), section, eager_value=e)
        else:
            self.leaves.append(LeafComparison(name, True, 0.0, 0.0, ""))

    def _tensor(self, name: str, e: Tensor, c: Tensor, section: str) -> None:
        problems = _metadata(e, c, self.options.check_strides and section == "output")
        if not problems:
            self.leaves.append(LeafComparison(name, True, 0.0, 0.0, ""))
            return
        body = f"{name}: tensor metadata differs between eager and compiled.\n" + "\n".join(
            f"  {what}: eager {ev}, compiled {cv}" for what, ev, cv in problems
        )
        self._fail(name, body, section, eager_value=e, values_differ=False)


class _Absent:
    """Marks a leaf one side does not have (distinct from a leaf whose value is None)."""


_ABSENT = _Absent()


# --- pytrees and descriptions ---------------------------------------------------------------


def _children(value: Any) -> list[tuple[str, Any]] | None:
    """A container's children with the suffix each adds to its parent's name; None for a leaf."""
    if isinstance(value, Tensor | torch.Size):
        return None
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return [(f".{f.name}", getattr(value, f.name)) for f in dataclasses.fields(value)]
    if isinstance(value, tuple):
        # namedtuples have _fields; torch.return_types (structseqs) have __match_args__
        cls = type(value)
        names: tuple[str, ...] = getattr(cls, "_fields", ()) or getattr(cls, "__match_args__", ())
        if len(names) == len(value):
            return [(f".{n}", v) for n, v in zip(names, value, strict=True)]
        return [(f"[{i}]", v) for i, v in enumerate(value)]
    if isinstance(value, list):
        return [(f"[{i}]", v) for i, v in enumerate(value)]
    if isinstance(value, dict):
        return [(f"[{k!r}]", v) for k, v in value.items()]
    return None


def _index(side: SideResult) -> dict[str, Any]:
    """Every node of a side (containers and leaves) by display name."""
    index: dict[str, Any] = {}

    def add(name: str, value: Any) -> None:
        index[name] = value
        for suffix, child in _children(value) or []:
            add(name + suffix, child)

    if side.exception is None:
        for name, value in [("output", side.output), *side.after.items(), *side.grads.items()]:
            add(name, value)
    return index


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


def _metadata(e: Tensor, c: Tensor, check_strides: bool) -> list[tuple[str, str, str]]:
    """(what, eager's, compiled's) for each piece of tensor metadata that differs."""
    pairs: list[tuple[str, Any, Any]] = [
        ("shape", tuple(e.shape), tuple(c.shape)),
        ("dtype", e.dtype, c.dtype),
        ("device", e.device, c.device),
        ("layout", e.layout, c.layout),
        ("requires_grad", e.requires_grad, c.requires_grad),
    ]
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


def _dense(t: Tensor) -> Tensor:
    """The strided, plain-valued form that values are compared in."""
    t = t.detach()
    if t.is_quantized:
        return t.dequantize()
    return t.to_dense() if t.layout != torch.strided else t


def _type_name(exc: BaseException) -> str:
    return type(exc).__name__


def _exc_text(exc: BaseException) -> str:
    text = f"{_type_name(exc)}: {exc}"
    if len(text) > _EXCEPTION_TEXT_LIMIT:
        return text[:_EXCEPTION_TEXT_LIMIT] + " [...]"
    return text


def _outcome(exc: BaseException | None, in_backward: bool = False) -> str:
    """What one side did, as the user would see it; a compiler failure is named as one."""
    if exc is None:
        return "returned normally"
    where = "in the backward " if in_backward else ""
    user = _compat.user_exception(exc)
    if user is not exc:
        return f"raised {where}{_exc_text(user)} (inside torch.compile's {_type_name(exc)})"
    if _compat.is_compile_wrapper(exc):
        return f"failed to compile {where}with {_exc_text(exc)}"
    return f"raised {where}{_exc_text(exc)}"


def _context_suffix(context: str) -> str:
    return f"\n\n{context}" if context else ""


def _num(x: float) -> str:
    return f"{x:.4g}"


# --- element-wise numerics, in float64 chunks -----------------------------------------------


@dataclass
class _Peak:
    """The greatest value seen and its flat index."""

    value: float = 0.0
    at: int = 0

    def update(self, values: Tensor, start: int) -> None:
        best, where = torch.max(values, 0)
        if best.item() > self.value:
            self.value, self.at = float(best.item()), start + int(where.item())


@dataclass
class _Scan:
    """Element-wise verdict of compiled against eager over one leaf."""

    numel: int
    mismatched: int = 0  # all failing elements
    value_mismatches: int = 0  # failing elements where both sides are finite
    first_placement: int = -1  # flat index of the first NaN/inf placement difference
    abs_all: _Peak = field(default_factory=_Peak)  # |c - e| over finite pairs
    rel_all: _Peak = field(default_factory=_Peak)  # |c - e| / |e| over finite pairs, e != 0
    abs_bad: _Peak = field(default_factory=_Peak)  # as abs_all, over value mismatches only
    rel_bad: _Peak = field(default_factory=_Peak)
    rescued: int = 0  # elements eager has non-finite where compiled agrees with a finite reference


def _is_inexact(t: Tensor) -> bool:
    return t.is_floating_point() or t.is_complex()


def _chunks(*tensors: Tensor) -> Iterator[tuple[int, list[Tensor]]]:
    """Aligned slices of the flattened tensors (row-major, as indices are reported)."""
    flat = [t.reshape(-1) for t in tensors]
    for start in range(0, flat[0].numel(), _CHUNK):
        yield start, [f[start : start + _CHUNK] for f in flat]


def _widen(t: Tensor, device: torch.device) -> Tensor:
    return t.to(device=device, dtype=torch.complex128 if t.is_complex() else torch.float64)


def _finite_diff(x: Tensor, y: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """x and y widened to float64/complex128, where both are finite, and |x - y| there (else 0)."""
    xw, yw = _widen(x, x.device), _widen(y, x.device)
    finite = xw.isfinite() & yw.isfinite()
    return xw, yw, finite, torch.where(finite, (xw - yw).abs(), 0.0)


def _rms(a: Tensor, b: Tensor) -> float:
    """Root mean square of a - b over elements where both are finite."""
    total, count = 0.0, 0
    for _, (x, y) in _chunks(a, b):
        _, _, finite, diff = _finite_diff(x, y)
        total += float((diff * diff).sum())
        count += int(finite.sum())
    return (total / count) ** 0.5 if count else 0.0


def _distance(a: Tensor, b: Tensor) -> _Peak:
    """Greatest |a - b| over elements where both are finite."""
    peak = _Peak()
    for start, (x, y) in _chunks(a, b):
        peak.update(_finite_diff(x, y)[3], start)
    return peak


def _plainly_close(c: Tensor, e: Tensor, rtol: float, atol: float) -> tuple[float, float] | None:
    """(max_abs, max_rel) of a leaf that passes the plain tolerance with every element finite, as
    `_scan` would find them; None when it may not, and `_scan` must judge it.

    Most leaves of a passing call are equal (state the call did not change) or close and finite;
    this settles them with one equality test, or a few fused float64 ops per chunk and a single
    device sync, instead of the scan's per-element bookkeeping and dozens of syncs.
    """
    if e.dtype != torch.complex32 and torch.equal(c, e):  # complex32 has no equal kernel
        return 0.0, 0.0  # NaN never equals NaN here unless c is e, where the scan passes too
    if not _is_inexact(e):
        return None
    return _verdict(*_closeness(c, e, rtol, atol).tolist()[:3])


def _plainly_close_all(
    pairs: list[tuple[Tensor, Tensor, float, float]],
) -> list[tuple[tuple[float, float] | None, tuple[float, float] | None]]:
    """For each (c, e, rtol, atol): `_plainly_close`, and the same within the noise floor (as
    `_within_noise_floor`), with two host syncs per device in all.

    First which leaves differ at all (most state a call leaves alone is equal), then the fused
    verdicts of the inexact ones that do; exact dtypes that differ are the scan's to judge.
    """
    differs = _read_all([(c != e).any() for c, e, _, _ in pairs])
    equal = (0.0, 0.0)
    verdicts: list[tuple[tuple[float, float] | None, tuple[float, float] | None]] = [
        (None, None) if d else (equal, equal) for d in differs
    ]
    inexact = [i for i, d in enumerate(differs) if d and _is_inexact(pairs[i][1])]
    rows = _read_all(
        [_closeness(*pairs[i], floor=_floor_of(pairs[i][1], pairs[i][1].dtype)) for i in inexact]
    )
    for i, row in zip(inexact, rows, strict=True):
        far, max_abs, max_rel, far_beyond_floor = row
        verdicts[i] = _verdict(far, max_abs, max_rel), _verdict(far_beyond_floor, max_abs, max_rel)
    return verdicts


def _read_all(values: list[Tensor]) -> list[Any]:
    """Each tensor's value as Python numbers, with one host sync per device."""
    by_device: dict[torch.device, list[int]] = {}
    for i, value in enumerate(values):
        by_device.setdefault(value.device, []).append(i)
    read: list[Any] = [None] * len(values)
    for indices in by_device.values():
        stacked = torch.stack([values[i].to(torch.float64) for i in indices]).tolist()
        for i, value in zip(indices, stacked, strict=True):
            read[i] = value
    return read


@dataclass(frozen=True)
class _Settled:
    """A leaf's plain verdict, computed ahead, and the exact pair and tolerances it was for."""

    c: Tensor
    e: Tensor
    rtol: float
    atol: float
    verdict: tuple[float, float] | None
    within_floor: tuple[float, float] | None

    def judges(self, c: Tensor, e: Tensor, rtol: float, atol: float) -> bool:
        views = [(t.data_ptr(), t.shape, t.stride(), t.dtype) for t in (c, e, self.c, self.e)]
        return (rtol, atol) == (self.rtol, self.atol) and views[:2] == views[2:]


def _reads_wait(t: Any) -> bool:
    """Whether reading a value of `t` into Python waits for a device (not on the CPU)."""
    return isinstance(t, Tensor) and t.device.type != "cpu"


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


def _plain_pair(e: Any, c: Any) -> bool:
    """Both plain dense tensors alike in shape, dtype and device: comparable value by value."""
    return (
        type(e) in _PLAIN_TENSORS
        and type(c) in _PLAIN_TENSORS
        and e.layout == c.layout == torch.strided
        and not (e.is_quantized or c.is_quantized)
        and (e.shape, e.dtype, e.device) == (c.shape, c.dtype, c.device)
        and e.dtype != torch.complex32  # no kernel compares it: left to _plainly_close
    )


_PLAIN_TENSORS = (Tensor, torch.nn.Parameter)  # not subclasses, whose storage may be elsewhere


def _verdict(far: float, max_abs: float, max_rel: float) -> tuple[float, float] | None:
    # A NaN or infinity on either side makes some diff NaN or inf, and so max_abs.
    if far or not math.isfinite(max_abs):
        return None
    return max_abs, max_rel


def _closeness(
    c: Tensor, e: Tensor, rtol: float, atol: float, floor: Tensor | None = None
) -> Tensor:
    """[far, max_abs, max_rel, far_beyond_floor] of compiled against eager in float64 on their
    device, unread: far is 1 where some element is outside atol + rtol * |e| or not finite;
    far_beyond_floor the same with `floor` (a noise floor, unread) added to atol, else far."""
    verdicts = [torch.zeros(4, dtype=torch.float64, device=e.device)]  # an empty leaf is equal
    for _, (x, y) in _chunks(c, e):
        # In place where a temporary is the checker's own, so at most three chunk-sized
        # float64 temporaries are alive at once.
        xw, yw = _widen(x, x.device), _widen(y, x.device)
        diff = xw - yw
        diff = diff.abs() if diff.is_complex() else diff.abs_()
        del xw
        magnitude = yw.abs_() if yw is not y and not yw.is_complex() else yw.abs()
        del yw
        allowed = magnitude.mul(rtol).add_(atol)
        far = ~(diff <= allowed).all()
        far_beyond_floor = far if floor is None else ~(diff <= allowed.add_(floor)).all()
        max_abs = diff.amax()
        rel = diff.div_(magnitude).masked_fill_(magnitude == 0, 0.0)
        verdicts.append(
            torch.stack([far.to(rel.dtype), max_abs, rel.amax(), far_beyond_floor.to(rel.dtype)])
        )
    return torch.stack(verdicts).amax(0)


def _scan(
    c: Tensor,
    e: Tensor,
    rtol: float,
    atol: float,
    *,
    reference: Tensor | None = None,
    slack: float = 0.0,
) -> _Scan:
    """Compare compiled against eager element by element.

    Integers and bools must be equal. A floating element passes when both sides are the same
    NaN/inf, or both are finite and |c - e| <= atol + rtol*|e| (torch.isclose). With a
    reference `r` it also passes when compiled agrees with `r` rounded to the leaf's dtype:
    both finite and |c - r| <= atol + rtol*|r| + slack, or both non-finite and either eager is
    non-finite too (the result is undefined there: any kind) or the kinds are the same.
    """
    scan = _Scan(e.numel())
    exact = not _is_inexact(e)
    for start, chunk in _chunks(c, e) if reference is None else _chunks(c, e, reference):
        cw, ew, finite, diff = _finite_diff(chunk[0], chunk[1])
        if exact:
            ok = chunk[0] == chunk[1]
        else:
            ok = torch.where(finite, diff <= atol + rtol * ew.abs(), _same_nonfinite(cw, ew))
            if reference is not None:
                rw = _widen(chunk[2], cw.device)
                rounded = _widen(chunk[2].to(e.dtype), cw.device)  # the exact answer in e's dtype
                c_finite, e_finite, r_finite = cw.isfinite(), ew.isfinite(), rounded.isfinite()
                close = (cw - rw).abs() <= atol + rtol * rw.abs() + slack
                agrees = torch.where(
                    c_finite,
                    r_finite & close,
                    ~r_finite & (~e_finite | _same_nonfinite(cw, rounded)),
                )
                scan.rescued += int((agrees & ~ok & ~e_finite & c_finite).sum())
                ok |= agrees
        bad = ~ok
        value_bad = bad & finite
        placement = bad & ~finite
        scan.mismatched += int(bad.sum())
        scan.value_mismatches += int(value_bad.sum())
        if scan.first_placement < 0 and bool(placement.any()):
            scan.first_placement = start + int(placement.nonzero()[0, 0])
        magnitude = ew.abs()
        rel = diff / magnitude
        scan.abs_all.update(diff, start)
        scan.rel_all.update(torch.where(finite & (magnitude > 0), rel, 0.0), start)
        scan.abs_bad.update(torch.where(value_bad, diff, 0.0), start)
        scan.rel_bad.update(torch.where(value_bad, rel, 0.0), start)
    return scan


def _same_nonfinite(x: Tensor, y: Tensor) -> Tensor:
    """Where x and y are the same NaN or the same infinity (or equal)."""
    return (x.isnan() & y.isnan()) | (x == y)


def _noise_floor(r: Tensor, dtype: torch.dtype) -> float:
    """NOISE_ULPS ulps of the accumulation precision of `dtype`, times the rms of `r`'s finite
    elements: what reordering a reduction may cost a correct compiler on this leaf."""
    return float(_floor_of(r, dtype))


def _floor_of(r: Tensor, dtype: torch.dtype) -> Tensor:
    """`_noise_floor` as a float64 tensor on `r`'s device, unread."""
    wide = dtype in (torch.float64, torch.complex128)
    eps = torch.finfo(torch.float64 if wide else torch.float32).eps
    total = torch.zeros((), dtype=torch.float64, device=r.device)
    count = torch.zeros((), dtype=torch.float64, device=r.device)
    for _, (x,) in _chunks(r):
        xw = _widen(x, x.device)
        finite = xw.isfinite()
        total += torch.where(finite, xw.abs() ** 2, 0.0).sum()
        count += finite.sum()
    return NOISE_ULPS * eps * (total / count.clamp_min(1)).sqrt()


def _unravel(flat: int, shape: torch.Size) -> tuple[int, ...]:
    index = []
    for size in reversed(shape):
        flat, rest = divmod(flat, size)
        index.append(rest)
    return tuple(reversed(index))


def _where(flat: int, t: Tensor) -> str:
    return f" at index {_unravel(flat, t.shape)}" if t.dim() else ""


def _peak_text(peak: _Peak, t: Tensor) -> str:
    where = _where(peak.at, t) if peak.value else ""  # a 0 is everywhere, not at the first index
    return f"greatest |difference| {_num(peak.value)}{where}"


def _nonfinite_text(a: Tensor, b: Tensor, names: tuple[str, str]) -> str:
    """Where a and b differ in NaN/inf, which a distance over finite pairs cannot show ("" if
    nowhere): without it, a leaf that fails only on NaN/inf placement reads "difference 0"."""
    count, first = 0, -1
    for start, (x, y) in _chunks(a, b):
        xw, yw, finite, _ = _finite_diff(x, y)
        differ = ~finite & ~_same_nonfinite(xw, yw)
        count += int(differ.sum())
        if first < 0 and bool(differ.any()):
            first = start + int(differ.nonzero()[0, 0])
    if not count:
        return ""
    return (
        f" where both are finite; NaN/inf differ at {count} element(s), first{_where(first, a)}: "
        f"{names[0]} {_element(a, first)}, {names[1]} {_element(b, first)}"
    )


def _element(t: Tensor, flat: int) -> Any:
    return t.reshape(-1)[flat].item()


def _value_lines(scan: _Scan, e: Tensor, c: Tensor, rtol: float, atol: float) -> list[str]:
    """assert_close-style statistics of a failing leaf: how many, how far, where, what allowed."""
    exact = rtol == 0 and atol == 0
    share = scan.mismatched / scan.numel
    lines = [f"  Mismatched elements: {scan.mismatched} / {scan.numel} ({share:.1%})"]
    if scan.first_placement >= 0:
        i = scan.first_placement
        lines.append(
            f"  NaN/inf in different places, first{_where(i, e)}: "
            f"eager {_element(e, i)}, compiled {_element(c, i)}"
        )
    if scan.value_mismatches:
        for kind, peak, tol in (("absolute", scan.abs_bad, atol), ("relative", scan.rel_bad, rtol)):
            allowed = "" if exact else f" (up to {_num(tol)} allowed)"
            lines.append(
                f"  Greatest {kind} difference: {_num(peak.value)}{_where(peak.at, e)}{allowed}"
            )
    if e.dim() == 0:
        lines.append(f"  eager {e.item()}, compiled {c.item()}")
    return lines
