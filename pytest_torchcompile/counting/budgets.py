"""The budget file: per-test graph-break, recompile and fallback counts that CI holds a suite to.

A team records today's counts once (``--compile-budgets-update``). From then on a count above its
entry fails the test, and a count below it passes with a note to lower the budget, so budgets only
ratchet down. Pure (no torch, no pytest): the plugin turns `BudgetFileError` into a usage error and
a regressed `BudgetVerdict` into a test failure. What an update keeps and removes (`updated`,
`Collected.whole`, `write_update`) is decided here alone, for a pytest session and for the merged
reports of a suite run in shards (merge.py) alike.

The file (format 1) is what `dumps` writes: sorted, indented, one count per line, so a review diff
shows exactly which count of which test moved::

    {
      "format": 1,
      "tests": {
        "tests/test_model.py::test_attention[cpu]": {
          "cpu": {
            "fallbacks": 0,
            "graph_breaks": 1,
            "recompiles": 0
          }
        }
      }
    }

Entries are keyed by node id, then by device. A test parametrized by the ``device`` fixture has its
device in the node id as well; the inner key is for tests that are not, whose device depends on the
machine, so that a budget recorded on a GPU runner never judges a CPU run of the same test.
"""

from __future__ import annotations

import json
import os
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pytest_torchcompile.counting.records import (
    CompileCounts,
    ParityRecord,
    break_line,
    fallback_line,
    recompile_line,
)
from pytest_torchcompile.errors import (
    CompileParityFailure,
    EagerFallbackError,
    GraphBreakBudgetExceeded,
    RecompileLimitExceeded,
)

FORMAT = 1
COUNT_NAMES = ("graph_breaks", "recompiles", "fallbacks")
IMPROVED_NOTE = "improved: lower the budget with --compile-budgets-update"

Status = Literal["regressed", "improved", "unchanged", "unrecorded"]

# The failure a grown count raises, most serious first: a fallback means no parity was shown.
_FAILURES: dict[str, type[CompileParityFailure]] = {
    "fallbacks": EagerFallbackError,
    "graph_breaks": GraphBreakBudgetExceeded,
    "recompiles": RecompileLimitExceeded,
}


class BudgetFileError(ValueError):
    """The budget file cannot be used; the message names the file and what is wrong with it."""


class _Malformed(Exception):
    """A problem found while parsing; `load` prefixes it with the file name."""


@dataclass(frozen=True)
class Budget:
    """The counts one test may reach on one device."""

    graph_breaks: int = 0
    recompiles: int = 0
    fallbacks: int = 0

    @classmethod
    def of(cls, counts: CompileCounts) -> Budget:
        """The budget a test would need for exactly these counts."""
        return cls(
            graph_breaks=len(counts["graph_breaks"]),
            recompiles=len(counts["recompiles"]),
            fallbacks=len(counts["fallbacks"]),
        )

    def as_dict(self) -> dict[str, int]:
        return {name: getattr(self, name) for name in COUNT_NAMES}

    def worst(self, other: Budget) -> Budget:
        """Each count at its larger value: what two runs of one test need together."""
        return Budget(
            **{name: max(getattr(self, name), getattr(other, name)) for name in COUNT_NAMES}
        )


@dataclass(frozen=True)
class Budgets:
    """Every entry of a budget file: node id -> device -> budget."""

    tests: Mapping[str, Mapping[str, Budget]] = field(default_factory=dict)

    def entry(self, nodeid: str, device: str) -> Budget | None:
        """The recorded budget of a test on a device, or None when the file has none."""
        return self.tests.get(nodeid, {}).get(device)


@dataclass(frozen=True)
class BudgetVerdict:
    """How one test's counts compare with its recorded budget."""

    status: Status
    budget: Budget | None  # None when unrecorded
    counts: Budget  # what the test reached this run
    message: str  # the failure text when regressed, the note when improved, else ""

    @property
    def grown(self) -> tuple[str, ...]:
        """Names of the counts above the budget (graph_breaks -> GraphBreakBudgetExceeded, ...)."""
        return self._moved(1)

    @property
    def shrunk(self) -> tuple[str, ...]:
        return self._moved(-1)

    def changes(self) -> str:
        """One line for the summary, e.g. ``graph_breaks 1 -> 2, recompiles 3 -> 1``."""
        if self.budget is None:
            return ""
        return ", ".join(
            f"{name} {getattr(self.budget, name)} -> {getattr(self.counts, name)}"
            for name in COUNT_NAMES
            if getattr(self.budget, name) != getattr(self.counts, name)
        )

    def _moved(self, sign: int) -> tuple[str, ...]:
        if self.budget is None:
            return ()
        return tuple(
            name
            for name in COUNT_NAMES
            if (getattr(self.counts, name) - getattr(self.budget, name)) * sign > 0
        )


# --- reading ---


def load(path: str | os.PathLike[str]) -> Budgets:
    """Read a budget file; a missing one is empty budgets (before the first update)."""
    where = Path(path)
    try:
        text = where.read_text(encoding="utf-8")
    except FileNotFoundError:
        return Budgets()
    except (OSError, UnicodeDecodeError) as exc:
        raise BudgetFileError(f"{where}: cannot read the budget file: {exc}") from exc
    try:
        data = json.loads(text, object_pairs_hook=_without_duplicate_keys)
        return _parse(data)
    except json.JSONDecodeError as exc:
        raise BudgetFileError(
            f"{where}:{exc.lineno}:{exc.colno}: not valid JSON: {exc.msg}"
        ) from exc
    except _Malformed as exc:
        raise BudgetFileError(f"{where}: {exc}") from exc


def _without_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    # json keeps the last of duplicate keys silently; in a hand-merged budget file that hides a
    # conflict, so it is an error.
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise _Malformed(f"the key {json.dumps(key)} appears twice in one object")
        result[key] = value
    return result


def _parse(data: object) -> Budgets:
    if not isinstance(data, dict):
        raise _Malformed(f"expected a JSON object at the top, got {_json_type(data)}")
    if "format" not in data:
        raise _Malformed(f'no "format" field; this pytest-torchcompile writes "format": {FORMAT}')
    version = data["format"]
    if type(version) is not int or version != FORMAT:
        newer = type(version) is int and version > FORMAT
        hint = "upgrade pytest-torchcompile" if newer else "re-record with --compile-budgets-update"
        raise _Malformed(
            f"unknown format {json.dumps(version)}; this pytest-torchcompile reads format {FORMAT}"
            f" ({hint})"
        )
    unknown = sorted(set(data) - {"format", "tests"})
    if unknown:
        raise _Malformed(
            f'unknown top-level key {json.dumps(unknown[0])}; expected "format", "tests"'
        )
    if "tests" not in data:
        raise _Malformed('no "tests" field')
    tests = _object(data["tests"], "tests")
    return Budgets(
        {
            nodeid: {
                device: _budget(entry, f"tests[{json.dumps(nodeid)}][{json.dumps(device)}]")
                for device, entry in _object(devices, f"tests[{json.dumps(nodeid)}]").items()
            }
            for nodeid, devices in tests.items()
        }
    )


def _budget(entry: object, where: str) -> Budget:
    fields = _object(entry, where)
    unknown = sorted(set(fields) - set(COUNT_NAMES))
    missing = [name for name in COUNT_NAMES if name not in fields]
    if unknown or missing:
        problem = (
            f"unknown key {json.dumps(unknown[0])}" if unknown else f"no {json.dumps(missing[0])}"
        )
        raise _Malformed(f"{where}: {problem}; an entry holds exactly {', '.join(COUNT_NAMES)}")
    for name in COUNT_NAMES:
        value = fields[name]
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            got = json.dumps(value)
            raise _Malformed(
                f"{where}[{json.dumps(name)}] must be a non-negative integer, got {got}"
            )
    return Budget(**fields)


def _object(value: object, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise _Malformed(f"{where} must be a JSON object, got {_json_type(value)}")
    return value


def _json_type(value: object) -> str:
    names = {dict: "an object", list: "an array", str: "a string", bool: "a boolean"}
    if value is None:
        return "null"
    return names.get(type(value), f"the number {value}")


# --- checking ---


def check(
    entry: Budget | None, counts: CompileCounts, *, source: str = "the budget file"
) -> BudgetVerdict:
    """Compare one test's counts with its entry (None: unrecorded, the marker/ini budgets apply).

    Pure and cheap, so the xdist controller recomputes verdicts from the records for its summary
    instead of shipping them from the workers. `source` names the file in the failure text.
    """
    now = Budget.of(counts)
    if entry is None:
        return BudgetVerdict("unrecorded", None, now, "")
    verdict = BudgetVerdict("unchanged", entry, now, "")
    if verdict.grown:
        return BudgetVerdict("regressed", entry, now, _regression_text(verdict, counts, source))
    if verdict.shrunk:
        return BudgetVerdict("improved", entry, now, f"{verdict.changes()} ({IMPROVED_NOTE})")
    return verdict


def verdicts(
    budgets: Budgets, records: Iterable[ParityRecord], *, source: str
) -> dict[str, BudgetVerdict]:
    """Node id -> verdict for a session's records (a node id reported twice: its last record)."""
    return {
        r["nodeid"]: check(budgets.entry(r["nodeid"], r["device"]), r["counts"], source=source)
        for r in records
    }


def failure(verdict: BudgetVerdict) -> CompileParityFailure:
    """The test failure for a regressed verdict, typed by the most serious count that grew."""
    kind = next(_FAILURES[name] for name in _FAILURES if name in verdict.grown)
    return kind(verdict.message)


def _regression_text(verdict: BudgetVerdict, counts: CompileCounts, source: str) -> str:
    assert verdict.budget is not None
    width = max(map(len, COUNT_NAMES))
    lines = [f"compile budget exceeded ({source}): recorded -> now"]
    for name in COUNT_NAMES:
        old, new = getattr(verdict.budget, name), getattr(verdict.counts, name)
        delta = f"  (+{new - old})" if new > old else ""
        lines.append(f"  {name:<{width}}  {old} -> {new}{delta}")
    # The file holds counts, not reasons, so all current ones are listed; the new one is among them.
    listed = {
        "graph_breaks": [break_line(b) for b in counts["graph_breaks"]],
        "recompiles": [recompile_line(r) for r in counts["recompiles"]],
        "fallbacks": [fallback_line(f) for f in counts["fallbacks"]],
    }
    for name in verdict.grown:
        lines.append(f"{name.replace('_', ' ')} now ({len(listed[name])}):")
        lines.extend(f"  {i}. {text}" for i, text in enumerate(listed[name], 1))
    lines.append("If the growth is intended, record it with --compile-budgets-update.")
    return "\n".join(lines)


# --- writing ---


def updated(
    old: Budgets,
    records: Iterable[ParityRecord],
    *,
    whole_suite: bool,
    existing: Collection[str] = (),
    uncollected: Collection[str] = (),
) -> Budgets:
    """The budgets ``--compile-budgets-update`` writes: the old file merged with this run's counts.

    Passed tests get their counts (if one test reported several times, e.g. on rerun, the larger of
    each count, so record order never matters). Failed or skipped tests keep their old entry: a
    failing run's counts may be partial. Entries of tests that did not run are kept, unless
    `whole_suite` (the run collected the whole suite), in which case an entry goes when its test
    is of a deleted test: its node id is neither in `existing` (every test collected or reported
    this session, whatever its outcome) nor in a record, nor under a collector in `uncollected`
    (node ids of modules or directories skipped at collection, e.g. by ``pytest.importorskip``).
    Even then only entries for devices this run used go: a CPU runner cannot tell whether a test
    recorded on ``cuda:0`` still exists, so entries for devices absent from this machine stay.
    """
    alive = set(existing)
    used_devices: set[str] = set()
    measured: dict[str, dict[str, Budget]] = {}
    for record in records:
        alive.add(record["nodeid"])
        used_devices.add(record["device"])
        if record["verdict"] != "passed":
            continue
        now = Budget.of(record["counts"])
        devices = measured.setdefault(record["nodeid"], {})
        previous = devices.get(record["device"])
        devices[record["device"]] = now if previous is None else previous.worst(now)
    parents = tuple(f"{node}{sep}" for node in uncollected for sep in ("::", "/"))

    def kept(nodeid: str, device: str) -> bool:
        return (
            not whole_suite
            or nodeid in alive
            or nodeid.startswith(parents)
            or device not in used_devices
        )

    tests = {
        nodeid: {device: budget for device, budget in devices.items() if kept(nodeid, device)}
        for nodeid, devices in old.tests.items()
    }
    tests = {nodeid: devices for nodeid, devices in tests.items() if devices}
    for nodeid, devices in measured.items():
        tests.setdefault(nodeid, {}).update(devices)
    return Budgets(tests)


@dataclass(frozen=True)
class Scope:
    """The paths one session collected from (its arguments, or testpaths), less its ``--ignore``s.

    Paths are relative to the rootdir, ``/``-separated, ``.`` for the rootdir itself, so that the
    scopes of shards run on different machines compare.
    """

    paths: tuple[str, ...]
    ignored: tuple[str, ...] = ()

    def holds(self, path: str) -> bool:
        """Whether the session collected what lies at `path` (a directory or file)."""
        return any(_within(path, p) for p in self.paths) and not any(
            _within(path, i) for i in self.ignored
        )


@dataclass(frozen=True)
class Collected:
    """What one session, or the shards of one suite together, collected: the facts that decide
    which entries an update may remove."""

    suite: tuple[str, ...] = (".",)  # what a plain pytest in the rootdir collects: testpaths, or .
    scopes: tuple[Scope, ...] = ()  # one per session that collected completely
    existing: frozenset[str] = frozenset()  # node ids collected or reported, whatever the outcome
    uncollected: frozenset[str] = frozenset()  # collectors skipped at collection (importorskip)

    @property
    def whole(self) -> bool:
        """Whether every path of the suite lies in some scope, so an entry no test matches is stale.

        Trying the paths the suite and the scopes name is enough: whether a scope holds a file is
        decided by the deepest of those paths above it, so each such path stands for its files.
        """
        named = {*self.suite, *(p for s in self.scopes for p in (*s.paths, *s.ignored))}
        inside = [path for path in named if any(_within(path, root) for root in self.suite)]
        return bool(self.suite) and all(any(s.holds(p) for s in self.scopes) for p in inside)


def joined(parts: Iterable[Collected]) -> Collected:
    """What the shards of one suite collected together (their suites are the same: the caller's
    check, as it knows which report each came from)."""
    parts = list(parts)
    return Collected(
        suite=parts[0].suite if parts else (".",),
        scopes=tuple(scope for part in parts for scope in part.scopes),
        existing=frozenset().union(*(part.existing for part in parts)),
        uncollected=frozenset().union(*(part.uncollected for part in parts)),
    )


def relative_paths(root: Path, paths: Iterable[Path]) -> tuple[str, ...]:
    """Absolute `paths` as scope paths under `root`: ``.`` for `root` or above it; a path beside
    it is left out (it holds nothing of the suite)."""
    found = set()
    for path in paths:
        if path.is_relative_to(root):
            found.add(path.relative_to(root).as_posix())
        elif root.is_relative_to(path):
            found.add(".")
    return tuple(sorted(found))


def _within(path: str, root: str) -> bool:
    return root == "." or path == root or path.startswith(f"{root}/")


def write_update(
    path: str | os.PathLike[str],
    old: Budgets,
    records: Iterable[ParityRecord],
    collection: Collected,
    *,
    name: str,
) -> str:
    """Write the file ``--compile-budgets-update`` writes; return the summary's line about it.

    One function for the plugin and for merging shards' reports, so both keep and remove the
    same entries. `name` is the file as the user named it.
    """
    new = updated(
        old,
        records,
        whole_suite=collection.whole,
        existing=collection.existing,
        uncollected=collection.uncollected,
    )
    save(path, new)
    scope = (
        "the whole suite was collected, so entries of deleted tests were removed"
        if collection.whole
        else "part of the suite was collected, so entries of other tests were kept"
    )
    return f"{name}: {describe_update(old, new)} ({scope})"


def describe_update(old: Budgets, new: Budgets) -> str:
    """What an update changed, per (test, device) entry: e.g. ``2 lowered, 1 added, 1 removed``.

    An entry is raised when any of its counts grew, lowered when some fell and none grew.
    """
    before = {(n, d): b for n, devices in old.tests.items() for d, b in devices.items()}
    after = {(n, d): b for n, devices in new.tests.items() for d, b in devices.items()}
    moved = [
        BudgetVerdict("unchanged", before[key], after[key], "")
        for key in before.keys() & after.keys()
    ]
    moves = {
        "lowered": sum(1 for v in moved if v.shrunk and not v.grown),
        "raised": sum(1 for v in moved if v.grown),
        "added": len(after.keys() - before.keys()),
        "removed": len(before.keys() - after.keys()),
    }
    return ", ".join(f"{n} {word}" for word, n in moves.items() if n) or "no change"


def dumps(budgets: Budgets) -> str:
    """The file's text: the same budgets give the same bytes, however the records arrived."""
    document = {
        "format": FORMAT,
        "tests": {
            nodeid: {device: budget.as_dict() for device, budget in devices.items()}
            for nodeid, devices in budgets.tests.items()
        },
    }
    return json.dumps(document, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def save(path: str | os.PathLike[str], budgets: Budgets) -> None:
    """Write atomically, with ``\\n`` line ends on every platform, so files are byte-identical."""
    where = Path(path)
    partial = where.with_name(f".{where.name}.tmp{os.getpid()}")
    partial.write_bytes(dumps(budgets).encode("utf-8"))
    os.replace(partial, where)
