"""The re-run broker: the re-runs one call's judges may consult, each run lazily, at most once.

A leaf outside the plain tolerance is judged by rules that need evidence beyond the two sides
(`judges.Evidence`): the float64 reference, eager again (and a few more samples, for eager's own
spread), the rounding-noise runs and the control. `Reruns` holds them for one call, runs each
only when first asked, finds a leaf in its result by name, and keeps their time within the
call's re-run bound (`samples.Bound`): a leaf whose full noise runs would pass it is judged on a
sample of its rows. Which leaf asks, and what an answer means, is the judges' and `parity`'s.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable, Mapping
from typing import Any

import torch
from torch import Tensor

from pytest_torchcompile.judging import rules, samples
from pytest_torchcompile.judging.closeness import dense, distance, is_inexact, num, same_nonfinite
from pytest_torchcompile.judging.judges import Noise, NoiseSample, Reproduction, RowSample
from pytest_torchcompile.running import trees
from pytest_torchcompile.running.sides import SideResult, Stopwatch
from pytest_torchcompile.running.snapshot import Unfaithful
from pytest_torchcompile.running.ties import TIE_ORDERS, TieOrder

RowRuns = Callable[[int, Tensor], dict[str, Callable[[], SideResult]]]
"""The re-runs on some rows (indices along the first dimension) of a call whose batch has that
many rows: eager plainly ("plain") and the rounding-noise runs; {} where the call's batch has
another length."""

Tolerances = Callable[[torch.dtype], tuple[float, float]]
"""(rtol, atol) for a dtype: the comparison's tolerances (`parity.CompareOptions.tolerances`)."""

_EXCEPTION_TEXT_LIMIT = 2000


class _Rerun:
    """A lazily called, memoised re-run (reference or second eager), indexed by leaf name."""

    def __init__(self, thunk: Callable[[], SideResult] | None) -> None:
        self._thunk = thunk
        self._result: SideResult | None = None
        self._index: dict[str, Any] = {}
        self._watch = Stopwatch()

    @property
    def given(self) -> bool:
        return self._thunk is not None

    @property
    def ran(self) -> bool:
        return self._result is not None

    @property
    def seconds(self) -> float:
        """What running it took (on a GPU, until the device finished it); 0 before it ran."""
        return self._watch.seconds if self.ran else 0.0

    def result(self) -> SideResult:
        if self._result is None:
            assert self._thunk is not None
            with self._watch.timing():
                try:
                    self._result = self._thunk()
                except Exception as exc:  # the re-run failed: report it, never crash the check
                    self._result = SideResult(None, exc, {}, {})
            self._index = nodes_by_name(self._result)
        return self._result

    def get(self, name: str) -> tuple[bool, Any]:
        """(found, value) of the node called `name` in the re-run."""
        self.result()
        return name in self._index, self._index.get(name)

    def leaf(self, name: str, e: Tensor) -> Tensor | None:
        """This leaf in the re-run in eager's dtype, if it is there and shaped like eager's, on
        the device `e` is judged on."""
        _, value = self.get(name)
        if isinstance(value, float | complex):
            value = torch.tensor(value, dtype=e.dtype)
        if not isinstance(value, Tensor) or value.shape != e.shape:
            return None
        return dense(value).to(e.device)


_NONDETERMINISM_ALERTS = ("does not have a deterministic implementation", "is not deterministic")


def _nondeterminism_alerts(run: Callable[[], Any]) -> bool:
    """Whether `run` uses an operation torch knows to be nondeterministic: run under
    `torch.use_deterministic_algorithms(True, warn_only=True)`, whose alerts are warnings with
    these texts (torch/csrc and ATen's alertNotDeterministic, CuBLAS's workspace alert). The
    previous deterministic setting is restored; what `run` raises is ignored."""
    enabled = torch.are_deterministic_algorithms_enabled()
    warn_only = torch.is_deterministic_algorithms_warn_only_enabled()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.use_deterministic_algorithms(True, warn_only=True)
        try:
            run()
        except Exception:
            pass
        finally:
            torch.use_deterministic_algorithms(enabled, warn_only=warn_only)
    return any(alert in str(w.message) for w in caught for alert in _NONDETERMINISM_ALERTS)


LATE_SAMPLES = 4
"""More eager runs, at most, where a failing leaf's second run happened to reproduce eager: an
atomic accumulation ordered one of two ways lands alike in five runs once in 32."""


class _EagerRuns:
    """Eager re-run plainly from the call's snapshot: the second run (does it reproduce
    eager?), a third (eager's own spread, or a call the snapshot did not rebuild), up to
    LATE_SAMPLES more (nondeterminism that landed alike), and one under torch's nondeterminism
    alerts. The leaves share them."""

    def __init__(self, thunk: Callable[[], SideResult] | None) -> None:
        self.again = _Rerun(thunk)
        self.third = _Rerun(thunk)  # the same plain re-run once more
        self.late = [_Rerun(thunk) for _ in range(LATE_SAMPLES)]
        self._thunk = thunk
        self._alerted: bool | None = None

    @property
    def runs(self) -> list[_Rerun]:
        return [self.again, self.third, *self.late]

    def spread_samples(self, name: str, e: Tensor) -> list[Tensor] | None:
        """The second and third eager runs of this leaf, where eager's second run does not
        reproduce it; None where the third raised or lacks the leaf."""
        second = self.again.leaf(name, e)
        third = self.third.leaf(name, e)
        if second is None or third is None or self.third.result().exception is not None:
            return None
        return [second, third]

    def late_samples(self, name: str, e: Tensor) -> tuple[list[Tensor], str]:
        """Where a leaf still fails after the rules though the second eager run reproduced
        eager within the tolerance: eager's runs of it, once one differs from eager bit for bit
        (the second, or one of up to LATE_SAMPLES more), and how; ([], "") when every run is
        eager's to the bit (then eager is deterministic here, as far as runs can show)."""
        samples: list[Tensor] = []
        for rerun in [self.again, *self.late]:
            if not rerun.given or rerun.result().exception is not None:
                return [], ""
            value = rerun.leaf(name, e)
            if value is None:
                return [], ""
            samples.append(value)
            if not rules.identical(value, e):
                differing = int((~same_nonfinite(value, e)).sum())
                worst = num(distance(value, e).value)
                return samples, f"eager runs differ at {differing} element(s) by up to {worst}"
        return [], ""

    def alerted(self) -> bool:
        """Whether torch alerts that the call is nondeterministic: one more eager run under
        `torch.use_deterministic_algorithms(True, warn_only=True)` (not a sample: kernels with
        a deterministic alternative switch to it there), its warnings read. Run once a call."""
        if self._alerted is None:
            self._alerted = self._thunk is not None and _nondeterminism_alerts(self._thunk)
        return self._alerted


class Reruns:
    """The re-runs one call's judges may consult (`judges.Evidence`), each run lazily and at most
    once: the float64 reference, eager again (twice: a third run tells eager's spread from an
    unrebuilt call, and a few more samples where the rules fail), the rounding-noise pair, and
    the control."""

    def __init__(
        self,
        tolerances: Tolerances,
        reference: Callable[[], SideResult] | None,
        eager_again: Callable[[], SideResult] | None,
        perturbed: Callable[[], SideResult] | None,
        noise_base: Callable[[], SideResult] | None,
        mirrored: Callable[[], SideResult] | None = None,
        *,
        ties: Mapping[TieOrder, Callable[[], SideResult]] | None = None,
        control: Callable[[], SideResult] | None = None,
        rebuilt: bool = False,
        on_rows: RowRuns | None = None,
        eager_time: Stopwatch | None = None,
    ) -> None:
        self.tolerances = tolerances
        self.on_rows = on_rows
        self._eager_time = eager_time
        self._sampled: list[_Rerun] = []  # re-runs on samples of rows, counted in the bound
        self.assumed = rebuilt  # a plain re-run rebuilt this call's kind before: not run again
        self.reproduced: bool | None = None  # whether every leaf asked about was reproduced
        self.reference_run = _Rerun(reference)
        self.eager = _EagerRuns(eager_again)
        self.eager_again = self.eager.again
        self.perturbed = _Rerun(perturbed)
        self.mirrored = _Rerun(mirrored)
        self.ties: dict[NoiseSample, _Rerun] = {
            order: _Rerun((ties or {}).get(order)) for order in TIE_ORDERS
        }
        self.noise_base = _Rerun(noise_base)
        self.control = _Rerun(control)

    # --- judges.Evidence -------------------------------------------------------------------

    @property
    def reference_given(self) -> bool:
        return self.reference_run.given

    @property
    def noise_given(self) -> bool:
        return self.perturbed.given

    def reproduction(self, name: str, e: Tensor) -> Reproduction:
        """Whether a plain eager re-run reproduces floating leaf `e`: up to the tolerance and the
        reduction-order noise floor, NaN and inf in the same places. The rules that excuse a
        difference use re-runs; one that does not even reproduce eager (a nondeterministic op,
        or a call the snapshot could not rebuild) proves nothing about the compiler. Without a
        plain re-run (hand-built comparisons), or where one rebuilt this kind of call before in
        the test (`assumed`, until a leaf fails), eager is taken as reproduced."""
        if self.assumed or not self.eager_again.given:
            return Reproduction("reproduced")
        found = self._reproduction(name, e)
        self.reproduced = found.kind == "reproduced" and self.reproduced is not False
        return found

    def _reproduction(self, name: str, e: Tensor) -> Reproduction:
        again = self.eager_again.result()
        if isinstance(again.exception, Unfaithful):
            return Reproduction("unavailable", str(again.exception))
        if again.exception is not None:
            return Reproduction("differs", f"a second eager run raised {exc_text(again.exception)}")
        found, value = self.eager_again.get(name)
        if isinstance(value, float | complex | int | bool):
            value = torch.tensor(value, dtype=e.dtype)
        if not isinstance(value, Tensor) or value.shape != e.shape or value.dtype != e.dtype:
            what = "has something else at" if found else "lacks"
            return Reproduction("differs", f"a second eager run {what} this leaf")
        value = dense(value).to(e.device)
        if not is_inexact(e):
            same = rules.identical(value, e)
            return (
                Reproduction("reproduced")
                if same
                else Reproduction("differs", "two eager runs differ")
            )
        how = rules.reproduces(value, e, *self.tolerances(e.dtype))
        return Reproduction("differs", how) if how else Reproduction("reproduced")

    def reference(self, name: str, e: Tensor) -> tuple[Tensor | None, str]:
        """The float64 reference for this leaf, or None and the reason there is none."""
        result = self.reference_run.result()
        if result.exception is not None:
            return None, f"the reference run raised {exc_text(result.exception)}"
        found, value = self.reference_run.get(name)
        if isinstance(value, float | complex):
            value = torch.tensor(value, dtype=torch.complex128 if e.is_complex() else torch.float64)
        if not isinstance(value, Tensor):
            return None, f"the reference run has no {'tensor at this' if found else 'such'} leaf"
        if value.shape != e.shape:
            return None, f"the reference has shape {tuple(value.shape)}, eager {tuple(e.shape)}"
        return dense(value).to(e.device), ""

    def noise(self, name: str, e: Tensor, *, sample: NoiseSample) -> Noise | None:
        """A rounding-noise sample of this leaf (`NoiseSample`), with its noiseless base (eager
        itself where no base re-run is given, and for the ties sample, which is not decomposed);
        None where that sample is not given."""
        runs: dict[NoiseSample, _Rerun] = {
            "perturbed": self.perturbed,
            "mirrored": self.mirrored,
            **self.ties,
        }
        noisy_run = runs[sample]
        if not noisy_run.given:
            return None
        if sample in self.ties:
            raised = noisy_run.result().exception
            return (
                Noise(None, None, exc_text(raised)) if raised else Noise(noisy_run.leaf(name, e), e)
            )
        for rerun in (noisy_run, self.noise_base):
            raised = rerun.result().exception if rerun.given else None
            if raised is not None:
                return Noise(None, None, exc_text(raised))
        base = self.noise_base.leaf(name, e) if self.noise_base.given else e
        return Noise(noisy_run.leaf(name, e), base)

    def noise_rows(self, name: str, e: Tensor, c: Tensor) -> RowSample | None:
        """Where the full rounding-noise runs would pass the call's re-run bound: this leaf's
        rows to judge, and the evidence of the call re-run on them alone. None where the full
        runs fit, were run already, or no sample of rows can stand for the leaf (it is not
        along the call's batch, or the rows do not re-run alone as they ran in the call)."""
        if self._eager_time is None or self.on_rows is None or self.perturbed.ran:
            return None
        if e.dim() == 0 or not e.is_floating_point() or not self.reference_run.given:
            return None
        bound = self.bound
        plain = self.eager_again.seconds or bound.eager_seconds
        count = bound.rows(e.shape[0], self.spent, plain)
        if count >= e.shape[0]:
            return None
        r, _ = self.reference(name, e)
        if r is None:
            return None
        rtol, atol = self.tolerances(e.dtype)
        slack = rules.reference_slack(e, r)
        excess = rules.reference_excess(c, r, rtol, atol, slack)
        rows, worst = samples.choose_rows(excess, count)
        spent = self.spent
        runs = {key: _Rerun(thunk) for key, thunk in self.on_rows(e.shape[0], rows).items()}
        if not runs:  # the leaf is not along the call's batch
            return None
        self._sampled += runs.values()
        eager_rows = e[rows.to(e.device)]
        again = runs["plain"].leaf(name, eager_rows)
        if again is None or not rules.identical(again, eager_rows):
            return None
        text = samples.sample_text(
            rows.numel(), e.shape[0], worst, bound, spent, bound.estimate(plain)
        )
        evidence = _RowReruns(self.tolerances, runs, r[rows.to(r.device)])
        return RowSample(rows, evidence, slack, text)

    @functools.cached_property
    def bound(self) -> samples.Bound:
        """The call's re-run bound, from its eager side's time (read once, when first asked)."""
        assert self._eager_time is not None
        return samples.Bound(self._eager_time.seconds)

    @property
    def spent(self) -> float:
        """What this call's re-runs took so far."""
        ran = [
            self.reference_run,
            *self.eager.runs,
            self.perturbed,
            self.mirrored,
            *self.ties.values(),
            self.noise_base,
            self.control,
            *self._sampled,
        ]
        return sum(rerun.seconds for rerun in ran)

    def spread_samples(self, name: str, e: Tensor) -> list[Tensor] | None:
        return self.eager.spread_samples(name, e)

    def late_samples(self, name: str, e: Tensor) -> tuple[list[Tensor], str]:
        return self.eager.late_samples(name, e)

    def alerted(self) -> bool:
        return self.eager.alerted()


class _RowReruns(Reruns):
    """The evidence on a sample of a leaf's rows: the noise runs on those rows alone, and the
    float64 reference's rows (a plain re-run on them reproduced eager's: taken as reproduced)."""

    def __init__(self, tolerances: Tolerances, runs: dict[str, _Rerun], reference: Tensor):
        super().__init__(tolerances, None, None, None, None, rebuilt=True)
        self.perturbed, self.mirrored, self.noise_base = (
            runs["perturbed"],
            runs["mirrored"],
            runs["noise_base"],
        )
        self._reference = reference

    @property
    def reference_given(self) -> bool:
        return True

    def reference(self, name: str, e: Tensor) -> tuple[Tensor | None, str]:
        return self._reference, ""


# --- shared with parity's walk ------------------------------------------------------------


def nodes_by_name(side: SideResult) -> dict[str, Any]:
    """Every node of a side (containers and leaves) by display name."""
    index: dict[str, Any] = {}

    def add(name: str, value: Any) -> None:
        index[name] = value
        for suffix, child in trees.children(value, inner_tensors=True) or []:
            add(name + suffix, child)

    if side.exception is None:
        for name, value in [("output", side.output), *side.after.items(), *side.grads.items()]:
            add(name, value)
    return index


def exc_text(exc: BaseException) -> str:
    """`Type: message`, cut at _EXCEPTION_TEXT_LIMIT characters."""
    text = f"{type(exc).__name__}: {exc}"
    if len(text) > _EXCEPTION_TEXT_LIMIT:
        return text[:_EXCEPTION_TEXT_LIMIT] + " [...]"
    return text
