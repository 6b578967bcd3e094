"""Which intercepted calls are checked: the session's signature policy.

A call is checked unless its class or function is left out (selection.py), it cannot be
replayed, its signature (class or function, structure, inputs, modes) was checked already in the
session, its class or function diverged already in this test (both unless
--compile-parity-every-call: the test fails on the first divergence, and each later signature
would cost a compile and a triage that change no verdict), or its class reached the cap on
signatures (parity_signatures).
"""

from __future__ import annotations

from collections.abc import Hashable

from pytest_torchcompile.adoption.kinds import InterceptedCall
from pytest_torchcompile.adoption.selection import Selection, call_signature
from pytest_torchcompile.adoption.stand_ins import ModuleCopies
from pytest_torchcompile.counting.records import ALREADY_CHECKED
from pytest_torchcompile.running.signatures import Skip
from pytest_torchcompile.settings import Settings

CAPPED = "the cap on input signatures per module class or function is reached"
DIVERGED_BEFORE = "already diverged in this test"


class SignaturePolicy:
    """Selects the calls to check by signature; told which it checked and which diverged."""

    def __init__(
        self,
        settings: Settings,
        selection: Selection,
        checked: set[Hashable],
        checked_per_class: dict[str, set[Hashable]] | None = None,
    ) -> None:
        self.settings = settings
        self.selection = selection
        self._checked = checked  # session-wide: signatures already checked
        # session-wide: signatures checked or diverged per class (--compile-parity-signatures)
        self._per_class = {} if checked_per_class is None else checked_per_class
        self._diverged: set[str] = set()  # this test's classes and functions: others still check

    def select(self, call: InterceptedCall, copies: ModuleCopies) -> Hashable:
        """The call's signature, or Skip with the reason it is not checked."""
        reason = self.selection.skips(call.name) or call.refusal()
        if reason is not None:
            raise Skip(reason)
        signature = call_signature(call.name, call.program(copies), call.args, call.kwargs)
        structure = call.signed_by
        if not self.selection.every_call and signature in self._checked:
            raise Skip(f"{ALREADY_CHECKED}{structure} and input signature")
        cap = self.settings.parity_signatures
        counted = self._per_class.setdefault(call.name, set())
        if cap is not None and signature not in counted and len(counted) >= cap:
            source = self.settings.source("parity_signatures")
            raise Skip(f"{CAPPED}: {cap} input signatures of it checked ({source})")
        if not self.selection.every_call and call.name in self._diverged:
            raise Skip(f"{DIVERGED_BEFORE}: its later calls change no verdict")
        return signature

    def checked(self, name: str, signature: Hashable) -> None:
        self._per_class[name].add(signature)
        self._checked.add(signature)

    def diverged(self, name: str, signature: Hashable) -> None:
        self._per_class[name].add(signature)
        self._diverged.add(name)


__all__ = ["CAPPED", "DIVERGED_BEFORE", "SignaturePolicy"]
