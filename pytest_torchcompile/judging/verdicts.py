"""The one outcome type of judging: what a rule or a judge answers on one leaf.

Every rule (rules.py) and every judge (judges.py) answers in an `Outcome`, as each check of
torch's `testing/_comparison.py` signals one error type; only parity turns the leaves' outcomes
into the report the user sees.
"""

from __future__ import annotations

import dataclasses
import enum
from dataclasses import dataclass
from typing import Literal

from torch import Tensor

from pytest_torchcompile.judging.boundaries import Boundaries
from pytest_torchcompile.judging.closeness import Scan
from pytest_torchcompile.running.ties import TieOrder


class Verdict(enum.Enum):
    PASSED = "passed"  # within the plain tolerance (from a rule: within what the rule allows)
    EXCUSED = "excused"  # outside it, passed by a named rule (the note names it and its evidence)
    FAILED = "failed"
    NOT_JUDGED = "not judged"  # the checker cannot judge it (the note says why): no verdict


NoiseSample = Literal["perturbed", "mirrored", TieOrder]
"""The samples of eager's own noise, in the order the rules ask for them: every value moved one
way, every value moved the other way (rule 3), and near-equal values taken in each other order
(rule 4, `running.ties.TIE_ORDERS`)."""


class JudgingError(AssertionError):
    """An internal error of the checker: a verdict no rule stands behind. Please report it."""


@dataclass(frozen=True)
class Outcome:
    """One rule's or judge's answer on one leaf. A rule answers PASSED (nothing outside what it
    allows) or FAILED; the judge that asked it names the excuse (EXCUSED, with the note)."""

    verdict: Verdict
    rule: str  # the rule or judge that reached it
    scan: Scan | None = None  # the element-wise verdict after this rule
    lines: tuple[str, ...] = ()  # FAILED: what the failure message says of this rule
    note: str = ""  # EXCUSED and NOT_JUDGED: the rule and its evidence, for the report
    final: bool = False  # FAILED: no later rule may excuse it
    nondeterministic: bool = False  # eager itself varies at this leaf
    boundaries: Boundaries = dataclasses.field(default_factory=Boundaries)
    largest: tuple[float, float] = (0.0, 0.0)  # greatest |compiled - eager|, and relative
    unexcused: int = 0  # crossed boundary elements no rounding explains: no rule excuses them
    # the boundary elements rounding noise explained, for the mirrored sample
    explained: Tensor | None = None

    def __post_init__(self) -> None:
        if self.verdict in (Verdict.EXCUSED, Verdict.NOT_JUDGED) and not (self.rule and self.note):
            raise JudgingError(
                f"a leaf {self.verdict.value} by {self.rule or 'no rule'} without a note saying "
                "why: an internal error of the checker, please report it"
            )

    @property
    def passed(self) -> bool:
        return self.verdict in (Verdict.PASSED, Verdict.EXCUSED)
