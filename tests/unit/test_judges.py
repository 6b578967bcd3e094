"""Each judge of a tensor leaf on its own, the loop over them, and their order in the docs."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest
import torch
from torch import Tensor

from pytest_torchcompile.judging import judges
from pytest_torchcompile.judging.closeness import plainly_close
from pytest_torchcompile.judging.judges import (
    Case,
    JudgingError,
    Noise,
    NoiseSample,
    Outcome,
    Reproduction,
    RowSample,
    Verdict,
)

F32 = (1.3e-6, 1e-5)  # assert_close's float32 (rtol, atol)
DOCS = Path(__file__).resolve().parents[2] / "docs" / "compared.md"


@dataclasses.dataclass
class Evidence:
    """Re-runs given by hand: what a judge may consult, and what it did consult."""

    reference_run: Tensor | None = None
    noisy: Tensor | None = None
    base: Tensor | None = None
    reproduced: Reproduction = dataclasses.field(default_factory=lambda: Reproduction("reproduced"))
    samples: list[Tensor] | None = None
    late: list[Tensor] = dataclasses.field(default_factory=list)
    asked: list[str] = dataclasses.field(default_factory=list)

    @property
    def reference_given(self) -> bool:
        return self.reference_run is not None

    @property
    def noise_given(self) -> bool:
        return self.noisy is not None

    def reproduction(self, name: str, e: Tensor) -> Reproduction:
        return self.reproduced

    def reference(self, name: str, e: Tensor) -> tuple[Tensor | None, str]:
        self.asked.append("reference")
        return self.reference_run, ""

    def noise(self, name: str, e: Tensor, *, sample: NoiseSample) -> Noise | None:
        self.asked.append("noise" if sample == "perturbed" else sample)
        if sample != "perturbed":
            return None
        return Noise(self.noisy, self.base if self.base is not None else e)

    def noise_rows(self, name: str, e: Tensor, c: Tensor) -> RowSample | None:
        return None  # the bound on re-runs is tested through parity.compare

    def spread_samples(self, name: str, e: Tensor) -> list[Tensor] | None:
        return self.samples

    def late_samples(self, name: str, e: Tensor) -> tuple[list[Tensor], str]:
        return self.late, "eager runs differ" if self.late else ""

    def alerted(self) -> bool:
        return False


def case(e: Tensor, c: Tensor, evidence: Evidence, *, tol: tuple[float, float] = F32) -> Case:
    rtol, atol = tol
    return Case("g", e, c, rtol, atol, (), lambda: plainly_close(c, e, rtol, atol), evidence)


FAILED = Outcome(Verdict.FAILED, "")


def first(c: Case) -> Outcome:
    """What assert_close made of the case: what the judges after it get."""
    outcome = judges.assert_close(c, FAILED)
    assert outcome is not None
    return outcome


def test_the_judges_run_in_the_order_docs_compared_md_lists_them() -> None:
    text = DOCS.read_text(encoding="utf-8").split("## Tolerances that tell noise from bugs")[1]
    listed = re.findall(r"^\d\. \*\*(.+?)\.\*\*", text, flags=re.MULTILINE)
    assert listed == [rule for rule, _ in judges.ORDER] + [judges.CONTROL]


def test_assert_close_passes_within_the_tolerance_and_holds_integers_exact() -> None:
    e = torch.tensor([1.0, 2.0])
    passed = judges.assert_close(case(e, e + 1e-7, Evidence()), FAILED)
    assert passed is not None and passed.verdict is Verdict.PASSED
    failed = first(case(e, e + 1.0, Evidence()))
    assert failed.verdict is Verdict.FAILED and not failed.final
    assert failed.scan is not None and failed.scan.mismatched == 2
    ints = torch.tensor([1, 2])
    exact = first(case(ints, ints + 1, Evidence(), tol=(0.0, 0.0)))
    assert exact.final  # no rule excuses an integer, unless eager itself varies there


def test_float64_reference_excuses_with_its_evidence_and_stops_at_a_wrong_boundary() -> None:
    r = torch.tensor([100.0, 200.0, 300.0], dtype=torch.float64) / 3
    e, c = (r + 3e-5).float(), (r - 6e-5).float()
    leaf = case(e, c, Evidence(reference_run=r))
    excused = judges.float64_reference(leaf, first(leaf))
    assert excused is not None and excused.verdict is Verdict.EXCUSED
    assert excused.note.startswith("g: outside assert_close's tolerance at 1 value(s)")
    assert "excused by the float64 reference: compiled is 6" in excused.note
    # floor of row sums: compiled whole and off the reference where eager is on it.
    floors = case(
        torch.tensor([0.0, 1.0]),
        torch.tensor([1.0, 1.0]),
        Evidence(reference_run=torch.tensor([0.0, 1.0], dtype=torch.float64)),
    )
    wrong = judges.float64_reference(floors, first(floors))
    assert wrong is not None and wrong.verdict is Verdict.FAILED and wrong.final


def test_float64_reference_says_why_it_judged_nothing_without_a_faithful_re_run() -> None:
    e = torch.tensor([1.0])
    unavailable = Reproduction("unavailable", "eager changed input 0 in place")
    leaf = case(e, e + 1, Evidence(reference_run=e.double(), reproduced=unavailable))
    outcome = judges.float64_reference(leaf, first(leaf))
    assert outcome is not None and outcome.verdict is Verdict.FAILED
    assert "no faithful re-run: eager changed input 0 in place" in outcome.lines[0]
    differs = case(e, e + 1, Evidence(reference_run=e.double(), reproduced=Reproduction("differs")))
    assert judges.float64_reference(differs, first(differs)) is None  # the spread's to judge


def test_eager_s_rounding_noise_excuses_within_three_times_the_noise() -> None:
    e = torch.zeros(8)
    leaf = case(e, e + 2.5e-3, Evidence(noisy=e + 1e-3))
    excused = judges.rounding_noise(leaf, first(leaf))
    assert excused is not None and excused.verdict is Verdict.EXCUSED
    assert "excused by eager's rounding noise: rms |compiled - eager| 0.0025" in excused.note
    beyond = case(e, e + 3.5e-3, Evidence(noisy=e + 1e-3))
    failed = judges.rounding_noise(beyond, first(beyond))
    assert failed is not None and failed.verdict is Verdict.FAILED and not failed.final


def test_a_crossed_boundary_no_rounding_explains_fails_finally() -> None:
    # bfloat16 margin_ranking_loss at x1 - x2 == margin: compiled (and float64) mask the
    # gradient, eager's exact hinge input lets it through; eager's noise leaves it alone.
    e = torch.tensor([0.2793, 0.0], dtype=torch.bfloat16)
    c = torch.zeros(2, dtype=torch.bfloat16)
    evidence = Evidence(reference_run=torch.zeros(2, dtype=torch.float64), noisy=e.clone())
    leaf = case(e, c, evidence, tol=(1.6e-2, 1e-5))
    outcome = judges.judge(leaf)
    assert outcome.verdict is Verdict.FAILED and outcome.final
    assert evidence.asked == ["reference", "noise", "mirrored", "reversed"]
    assert any("eager's value is exact" in line for line in outcome.lines)


def test_eager_s_run_to_run_spread_excuses_with_a_note_and_names_the_checker_s_limit() -> None:
    e = torch.tensor([1.0, 2.0])
    jitter = torch.tensor([0.0, 2.0**-12])
    differs = Reproduction("differs", "two eager runs differ")
    spread = case(e, e - jitter, Evidence(reproduced=differs, samples=[e + jitter, e]))
    excused = judges.run_to_run_spread(spread, first(spread))
    assert excused is not None and excused.verdict is Verdict.EXCUSED
    assert excused.nondeterministic and "eager is nondeterministic here" in excused.note
    again = e + 0.5
    limit = case(e, again, Evidence(reproduced=differs, samples=[again, again.clone()]))
    failed = judges.run_to_run_spread(limit, first(limit))
    assert failed is not None and failed.rule == "checker's limit" and failed.final


def test_judge_tries_each_rule_in_turn_and_keeps_every_rule_s_lines() -> None:
    e = torch.tensor([1.0, 2.0, 3.0])
    c = e + torch.tensor([0.0, 0.1, 0.0])
    evidence = Evidence(reference_run=e.double(), noisy=e + 1e-7)
    outcome = judges.judge(case(e, c, evidence))
    assert outcome.verdict is Verdict.FAILED and outcome.largest[0] == pytest.approx(0.1)
    text = "\n".join(outcome.lines)
    assert "Judged against a float64 reference" in text
    assert "Judged by eager's rounding noise" in text


def test_an_excuse_without_a_note_or_a_pass_from_a_later_rule_is_an_internal_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with pytest.raises(JudgingError, match="without a note"):
        Outcome(Verdict.EXCUSED, "float64 reference")

    def lenient(c: Case, so_far: Outcome) -> Outcome:
        return Outcome(Verdict.PASSED, "lenient")

    monkeypatch.setattr(judges, "ORDER", (judges.ORDER[0], ("lenient", lenient)))
    e = torch.tensor([1.0])
    with pytest.raises(JudgingError, match="the lenient rule passed g outside the plain"):
        judges.judge(case(e, e + 1, Evidence()))


def test_the_excuse_audit_fails_every_excused_leaf(monkeypatch: pytest.MonkeyPatch) -> None:
    e = torch.zeros(8)
    leaf = case(e, e + 2.5e-3, Evidence(noisy=e + 1e-3))
    assert judges.judge(leaf).verdict is Verdict.EXCUSED
    monkeypatch.setenv(judges.AUDIT_ENVIRONMENT, "1")
    audited = judges.judge(case(e, e + 2.5e-3, Evidence(noisy=e + 1e-3)))
    assert audited.verdict is Verdict.FAILED
    assert "Excused by the eager's rounding noise rule, failed by" in audited.lines[0]


def test_compiled_nan_is_noise_only_where_eager_is_finite_and_its_noise_overflows() -> None:
    nan, inf = float("nan"), float("inf")
    overflows = Evidence(noisy=torch.tensor([nan, 1.0]))
    leaf = case(torch.tensor([17.5, 1.0]), torch.tensor([nan, 1.0]), overflows)
    excused = judges.rounding_noise(leaf, first(leaf))
    assert excused is not None and excused.verdict is Verdict.EXCUSED
    # NaN against eager's inf is another kind of placement: the noise is not asked.
    other = case(torch.tensor([inf, 1.0]), torch.tensor([nan, 1.0]), overflows)
    assert judges.rounding_noise(other, first(other)) is None
