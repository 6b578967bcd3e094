"""One test's life under the plugin, from its setup to the record its report carries: the
interceptor around its body, its checker's verdicts over all its calls (budgets, misuse), and
triage after a parity failure.

plugin.py's per-test hooks each call a method of the test's `CheckedTest` (kept in `item.stash`),
in pytest-xdist's shape: the hook module registers, the object behaves. No torch at import: the
plugin loads this in every session.
"""

from __future__ import annotations

import sys
import tempfile
from collections.abc import Generator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_torchcompile.counting import budgets
from pytest_torchcompile.counting.records import CoverageRecord, ParityRecord
from pytest_torchcompile.counting.report import junit_properties, section_text
from pytest_torchcompile.errors import NOTE_PREFIX
from pytest_torchcompile.session import session_path
from pytest_torchcompile.settings import Settings
from pytest_torchcompile.stash import (
    CHECKER_KEY,
    CONSTRUCTIONS_KEY,
    COVERAGE_KEY,
    RECORD_KEY,
    RUN_KEY,
    SESSION_KEY,
    TMP_PATHS_KEY,
    settings_of,
)

if TYPE_CHECKING:
    from pytest_torchcompile.adoption.callsites import Constructions
    from pytest_torchcompile.adoption.functions import Found
    from pytest_torchcompile.adoption.intercept import Interceptor
    from pytest_torchcompile.outcome import CheckSummary

MARKER = "compile_parity"


class CheckedTest:
    """A test item's checks: whether its calls are intercepted, the interceptor while its body
    runs, and what is recorded, enforced and triaged after it."""

    def __init__(self, item: pytest.Item) -> None:
        self.item = item
        self.run = item.config.stash[RUN_KEY]
        self.session = item.config.stash[SESSION_KEY]
        self.interceptor: Interceptor | None = None

    @classmethod
    def of(cls, item: pytest.Item) -> CheckedTest:
        """The item's CheckedTest, made at its first hook and kept on it."""
        found = item.stash.get(_KEY, None)
        if found is None:
            found = item.stash[_KEY] = cls(item)
        return found

    @property
    def intercepted(self) -> bool:
        """Whether the test's module calls are intercepted: it does not use the checker, and the
        mode is all or the test is marked."""
        fixturenames = getattr(self.item, "fixturenames", ())
        if self.session.parity == "off" or "compile_parity" in fixturenames:
            return False
        return self.session.parity == "all" or self.item.get_closest_marker(MARKER) is not None

    def setup(self) -> Generator[None, None, None]:
        """An intercepted test's fixtures construct modules too: the coverage table names them.

        Its triage writes under pytest's temporary directory, so the (session-scoped, inert)
        `tmp_path_factory` fixture joins the fixtures it sets up.
        """
        if not self.intercepted:
            return (yield)
        names = getattr(self.item, "fixturenames", None)
        if isinstance(names, list) and "tmp_path_factory" not in names:
            names.append("tmp_path_factory")
        if "torch" not in sys.modules:
            return (yield)
        with self.constructions():
            return (yield)

    def call(self) -> Generator[None, None, None]:
        """Around the test body: intercepted where the mode asks for it; after it, budgets over
        all its calls and misuse (marked but never checked), then triage of a parity failure."""
        __tracebackhide__ = True  # a verdict reached here is the test's failure, not the plugin's
        if self.session.parity == "off":  # the fixture still runs each example
            _relax_hypothesis_for_compiles(self.item, intercepted=False)
            yield
            return
        interceptor = self.interceptor = self._interceptor()
        _relax_hypothesis_for_compiles(self.item, intercepted=interceptor is not None)
        checker = interceptor.checker if interceptor is not None else None
        try:
            if interceptor is None:
                yield
            else:
                with self.constructions(), interceptor:
                    yield
        except BaseException as exc:
            self._finish(check=False)
            _triage(self.item, exc, checker or self.item.stash.get(CHECKER_KEY, None))
            raise
        try:
            self._finish(check=True)
        except BaseException as exc:  # an intercepted test's divergences are raised here
            _triage(self.item, exc, checker)
            raise

    def constructions(self) -> Constructions:
        """The test's record of module classes constructed, kept from setup to the call."""
        found = self.item.stash.get(CONSTRUCTIONS_KEY, None)
        if found is None:
            from pytest_torchcompile.adoption.callsites import Constructions

            found = self.item.stash[CONSTRUCTIONS_KEY] = Constructions()
        return found

    def _interceptor(self) -> Interceptor | None:
        """The Interceptor for a test that does not use the checker, where the mode asks for one."""
        if not self.intercepted:
            return None
        from pytest_torchcompile.adoption.intercept import Interceptor
        from pytest_torchcompile.adoption.selection import Selection

        # A marked test's settings were resolved (and validated) at collection.
        settings, session, run = settings_of(self.item), self.session, self.run
        selection = Selection(
            include=session.parity_include,
            exclude=session.parity_exclude,
            every_call=session.parity_every_call,
        )
        if run.shared_compiles is None and session.parity_shared:
            from pytest_torchcompile.running.shared_compiles import SharedCompiles

            # Without recompile regions a test's own torch.compile would meet the session's
            # entries: each test compiles afresh there.
            run.shared_compiles = SharedCompiles.start() if SharedCompiles.available() else False
        return Interceptor(
            settings,
            selection,
            run.checked_calls,
            self.constructions(),
            shared=run.shared_compiles or None,
            checked_per_class=run.checked_per_class,
            functions=self._functions(settings),
        )

    def _functions(self, settings: Settings) -> Found | None:
        """--compile-parity-functions: its packages' functions."""
        if not settings.parity_functions:
            return None
        from pytest_torchcompile.adoption import functions

        try:
            return functions.find(settings.parity_functions, self.run.functions)
        except ImportError as exc:
            pytest.fail(
                f"Invalid parity_functions={','.join(settings.parity_functions)!r} from "
                f"{settings.source('parity_functions')}: cannot import {exc.name or ''}: {exc}",
                pytrace=False,
            )

    def _finish(self, check: bool) -> None:
        """Record what the test's checker saw; with `check`, also enforce budgets and misuse."""
        __tracebackhide__ = True
        item, interceptor = self.item, self.interceptor
        checker = (
            interceptor.checker if interceptor is not None else item.stash.get(CHECKER_KEY, None)
        )
        marked = item.get_closest_marker(MARKER) is not None
        if interceptor is not None:
            constructed = item.stash.get(CONSTRUCTIONS_KEY, None)
            item.stash[COVERAGE_KEY] = CoverageRecord(
                nodeid=item.nodeid,
                constructed=sorted(constructed.classes) if constructed is not None else [],
                calls=interceptor.module_calls(),
                inside_checked=sorted(interceptor.inside_checked),
            )
            _list_functions(item, interceptor)
        if check and marked and interceptor is not None and interceptor.outermost_calls == 0:
            from pytest_torchcompile.errors import UnusedCheckerError

            raise UnusedCheckerError(
                f"{item.nodeid} is marked compile_parity but neither called the compile_parity "
                "fixture nor made any nn.Module call to intercept (nor a call of a "
                "--compile-parity-functions function): call compile_parity(model, x), or call a "
                "model in the test body"
            )
        if check and marked and interceptor is None and (checker is None or checker.calls == 0):
            from pytest_torchcompile.errors import UnusedCheckerError

            raise UnusedCheckerError(
                f"{item.nodeid} is marked compile_parity but never checked anything: request the "
                "compile_parity fixture and call it, e.g. compile_parity(model, x)"
            )
        if checker is None or (interceptor is not None and interceptor.outermost_calls == 0):
            return
        record = _record(item.nodeid, checker.summary(), "passed" if check else "failed")
        if interceptor is not None:
            record["module_calls"] = item.stash[COVERAGE_KEY]["calls"]  # tallied once, above
        try:
            if check:
                (interceptor or checker).finish()
                _check_budget_file(item.config, record)
        except BaseException:
            record["verdict"] = "failed"
            raise
        finally:
            item.stash[RECORD_KEY] = record
            item.add_report_section("call", "torch.compile", section_text(record))
            item.user_properties.extend(junit_properties(record))  # before the report copies them


_KEY = pytest.StashKey[CheckedTest]()


def _list_functions(item: pytest.Item, interceptor: Interceptor) -> None:
    """Add the functions the test's calls reached inside checked ones, and the functions this
    process has not listed yet, wrapped or not, to its coverage record (once per process, so the
    report does not repeat a package's functions for every test)."""
    record, found = item.stash[COVERAGE_KEY], interceptor.functions
    if interceptor.inside_checked_functions:
        record["inside_checked_functions"] = sorted(interceptor.inside_checked_functions)
    if found is None:
        return
    listed = item.config.stash[RUN_KEY].listed_functions
    wrapped = sorted(set(found.functions) - listed)
    unwrapped = {name: why for name, why in found.unwrapped.items() if name not in listed}
    if wrapped:
        record["functions"] = wrapped
    if unwrapped:
        record["unwrapped"] = dict(sorted(unwrapped.items()))
    listed |= {*wrapped, *unwrapped}


def _check_budget_file(config: pytest.Config, record: ParityRecord) -> None:
    """Fail a test whose counts grew past its --compile-budgets entry (not while updating it)."""
    __tracebackhide__ = True
    run, settings = config.stash[RUN_KEY], config.stash[SESSION_KEY]
    if run.budget_file is None or settings.budgets is None or settings.budgets_update:
        return
    entry = run.budget_file.entry(record["nodeid"], record["device"])
    verdict = budgets.check(entry, record["counts"], source=settings.budgets)
    if verdict.status == "regressed":
        raise budgets.failure(verdict)


def _triage(item: pytest.Item, exc: BaseException, checker: Any) -> None:
    """After a parity failure: the stage that diverged, a repro and the compiler's artifacts,
    added to the failure message (as a note) and to the test's record."""
    recorder = getattr(checker, "recorder", None)
    if checker is None or recorder is None or not recorder.calls or not _parity_failure(exc):
        return
    from pytest_torchcompile.after_failure import triage

    settings = item.config.stash[SESSION_KEY]
    if settings.artifacts is not None:
        root = session_path(item.config, "artifacts", settings.artifacts)
    else:
        factory = item.stash.get(TMP_PATHS_KEY, None) or getattr(item, "funcargs", {}).get(
            "tmp_path_factory"
        )
        if factory is not None:
            root = factory.getbasetemp() / "torchcompile"
        else:  # an item type that takes no fixtures
            root = Path(tempfile.mkdtemp(prefix="pytest-torchcompile-"))
    key = getattr(recorder, "failure_key", None)
    run = item.config.stash[RUN_KEY]
    try:
        if key is not None and key in run.triaged:
            found = triage.reused(*run.triaged[key])
        else:
            budget = settings.triage_budget
            found = triage.triage(
                recorder,
                checker.settings,
                root / triage.directory_name(item.nodeid),
                bisect=settings.bisect,
                title=item.nodeid,
                spent=(run.triage_s, budget) if 0 < budget <= run.triage_s else None,
            )
            run.triage_s += found.time_s
            if key is not None:
                run.triaged[key] = (item.nodeid, found)
    except Exception as error:  # triage must never hide the test's own failure
        exc.add_note(f"{NOTE_PREFIX}triage failed: {type(error).__name__}: {error}")
        return
    exc.add_note(found.message())
    record = item.stash.get(RECORD_KEY, None)
    if record is not None:
        record["stage"] = found.stage
        record["repro"] = found.repro
        record["artifacts"] = found.artifacts
        record["triage_time_s"] = found.time_s
        if "costs" in record:
            record["costs"]["seconds"]["triage"] = found.time_s


def _parity_failure(exc: BaseException) -> bool:
    """Whether `exc` is a ParityError, or a group (Hypothesis's FlakyFailure) holding one."""
    from pytest_torchcompile.errors import ParityError

    if isinstance(exc, BaseExceptionGroup):
        return any(_parity_failure(inner) for inner in exc.exceptions)
    return isinstance(exc, ParityError)


def _record(nodeid: str, summary: CheckSummary, verdict: str) -> ParityRecord:
    """The record the test's report carries: what its checks came to, over all its calls."""
    settings = summary.settings
    record = ParityRecord(
        nodeid=nodeid,
        device=",".join(summary.devices_seen) or "none",  # none: no call was checked
        backend=settings.backend,
        mode=settings.mode,
        dynamic=settings.dynamic,
        verdict=verdict,
        calls=summary.calls,
        counts=summary.counts,
        largest_errors=list(summary.largest_errors),
        wall_time_s=summary.wall_time_s,
        notes=list(summary.notes),
    )
    record["costs"] = summary.costs
    if summary.excused:  # leaves a named rule excused, by rule
        record["excused"] = dict(summary.excused)
    if summary.not_judged:  # leaves the checker could not judge: "checked partly"
        record["not_judged"] = dict(summary.not_judged)
    if summary.rejected:  # Hypothesis examples eager raised on, rejected
        record["rejected"] = summary.rejected
        record["first_rejection"] = summary.first_rejection
    return record


def _relax_hypothesis_for_compiles(item: pytest.Item, *, intercepted: bool) -> None:
    """@given parity tests share one fixture across examples on purpose, and compiles are slow.

    So the function-scoped-fixture health check and the deadline are off for them (and for
    intercepted tests, whose examples now compile), and so is the explain phase: it re-runs the
    shrunk failing example about a hundred times per argument, each a compile traced line by line
    on Python 3.11, to name lines that are the checker's own. Everything else the test or profile
    set is kept.
    """
    function = getattr(item, "obj", None)
    checks = intercepted or "compile_parity" in getattr(item, "fixturenames", ())
    if getattr(function, "is_hypothesis_test", False) is not True or not checks:
        return
    from hypothesis import HealthCheck, Phase
    from hypothesis import settings as hypothesis_settings

    inner: Any = getattr(function, "__func__", function)
    parent = getattr(inner, "_hypothesis_internal_use_settings", None) or hypothesis_settings()
    inner._hypothesis_internal_use_settings = hypothesis_settings(
        parent,
        deadline=None,
        phases=[phase for phase in parent.phases if phase is not Phase.explain],
        suppress_health_check=[
            *parent.suppress_health_check,
            HealthCheck.function_scoped_fixture,
            HealthCheck.too_slow,
        ],
    )


__all__ = ["MARKER", "CheckedTest"]
