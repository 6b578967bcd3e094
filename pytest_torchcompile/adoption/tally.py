"""One test's intercepted calls, counted by outcome, and the divergences that fail it."""

from __future__ import annotations

from pytest_torchcompile.adoption.kinds import InterceptedCall
from pytest_torchcompile.counting.costs import CHECK_KINDS
from pytest_torchcompile.counting.records import ModuleCallRecord
from pytest_torchcompile.errors import ParityError
from pytest_torchcompile.outcome import NO_COMPILER
from pytest_torchcompile.settings import CONTROL_BACKEND

Key = tuple[str, str, str, str]  # kind (module, function), name, outcome, reason


class CallTally:
    """Calls by kind, class or function name, outcome and reason: the report's table."""

    def __init__(self) -> None:
        self._counts: dict[Key, int] = {}
        self._last: Key = ("", "", "", "")  # the key counted last

    @property
    def last_skipped(self) -> bool:
        """Whether the call counted last was skipped (its time is "skipped calls")."""
        return self._last[2] == "skipped"

    def count(self, kind: str, name: str, outcome: str, reason: str) -> None:
        key = (kind, name, outcome, reason)
        self._counts[key] = self._counts.get(key, 0) + 1
        self._last = key

    def partly(self, why: str) -> None:
        """The call just counted as checked was checked partly: `why`."""
        kind, name, outcome, reason = self._last
        if outcome not in ("checked", "checked partly"):
            return
        self._counts[self._last] -= 1
        if not self._counts[self._last]:
            del self._counts[self._last]
        self.count(kind, name, "checked partly", f"{reason}; {why}" if reason else why)

    def records(self) -> list[ModuleCallRecord]:
        """The tally by class or function name; a function's rows say `kind: function`."""
        records = []
        for (kind, name, outcome, reason), calls in sorted(
            self._counts.items(), key=lambda item: (item[0][1:], item[0][0])
        ):
            record = ModuleCallRecord(module=name, outcome=outcome, reason=reason, calls=calls)
            if kind == "function":
                record["kind"] = kind
            records.append(record)
        return records


class Divergences:
    """The test's diverging calls, each with what differed and which graphs the compiled side
    ran; after the body they fail the test in one ParityError."""

    def __init__(self) -> None:
        self.messages: list[str] = []
        self._kinds: set[str] = set()  # module, function

    def add(
        self,
        call: InterceptedCall,
        number: int,
        where: str,
        failure: BaseException | None,
        graphs: str,
    ) -> None:
        """Call `number` of the test diverged at `where` (leaves, or the failure's type) with
        `failure`; the compiled side ran `graphs` (CHECK_KINDS, or NO_COMPILER)."""
        self._kinds.add(call.kind)
        ran = _GRAPHS[graphs].format(owner=call.owner)
        self.messages.append(
            f"{call.kind} call {number} ({call.name}), differing at {where}:\n{failure}\n"
            f"(the compiled side {ran})"
        )

    def failure(self) -> ParityError | None:
        if not self.messages:
            return None
        kinds = " and ".join(sorted(self._kinds, reverse=True))
        return ParityError(
            f"{len(self.messages)} intercepted {kinds} call(s) diverged under torch.compile "
            "(--compile-parity=all replays each call from a snapshot, eager vs compiled):\n\n"
            + "\n\n".join(self.messages)
        )


_GRAPHS = {
    **dict(
        zip(
            CHECK_KINDS,
            (
                "ran graphs compiled for this call, with static shapes",
                "ran graphs compiled for this call, with dynamic shapes",
                "reused graphs compiled for an earlier call of {owner} in the session "
                "(--compile-parity-shared kept it; without it each test compiles afresh)",
            ),
            strict=True,
        )
    ),
    NO_COMPILER: f"ran with no compiler (--compile-backend={CONTROL_BACKEND})",
}

__all__ = ["CallTally", "Divergences"]
