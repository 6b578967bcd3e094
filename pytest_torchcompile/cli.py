"""``python -m pytest_torchcompile``: one budget file, one budget check and one summary from the
JSON reports of a suite run in shards (each shard's ``--compile-report``)::

    python -m pytest_torchcompile budgets check --from-reports 'reports/*.json' compile-budgets.json
    python -m pytest_torchcompile budgets update --from-reports 'reports/*.json' compile-budgets.json
    python -m pytest_torchcompile report --from-reports 'reports/*.json' --output compile-report.json

Each prints the torch.compile section one pytest run of the whole suite prints, and writes the
budget file (and, with ``--output``, the report) that run would have written. Exit status: 0; 1
when ``budgets check`` finds a count above its budget; 2 when the reports or the budget file
cannot be used. It imports no torch: a merge job need not install it.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from collections.abc import Sequence

from pytest_torchcompile.counting import budgets, merge
from pytest_torchcompile.counting.report import json_report, save_json, session_summary

PROG = "python -m pytest_torchcompile"


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        status: int = args.command(args)
    except (merge.ReportError, budgets.BudgetFileError) as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 2
    return status


def parser() -> argparse.ArgumentParser:
    """The command line (its help is the reference; the docs' examples are checked against it)."""
    command_line = argparse.ArgumentParser(
        prog=PROG,
        description="Merge the --compile-report files of a suite run in shards: check or update "
        "the budget file, print the summary, write one report.",
    )
    commands = command_line.add_subparsers(required=True, metavar="COMMAND")
    report = commands.add_parser(
        "report", help="print the torch.compile summary of the shards, as one run prints it"
    )
    _takes_reports(report)
    report.set_defaults(command=_report)
    budget_file = commands.add_parser("budgets", help="check or update a budget file")
    actions = budget_file.add_subparsers(required=True, metavar="ACTION")
    for name, command, text in (
        ("check", _check, "fail (exit 1) where a test's count grew past its budget"),
        ("update", _update, "write what --compile-budgets-update over the whole run would"),
    ):
        action = actions.add_parser(name, help=text, description=text)
        _takes_reports(action)
        action.add_argument("budgets", metavar="BUDGET_FILE", help="the --compile-budgets file")
        action.set_defaults(command=command)
    return command_line


def _takes_reports(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--from-reports",
        metavar="PATTERN",
        action="append",
        required=True,
        dest="patterns",
        help="a shard's --compile-report file, or a glob pattern (quoted) naming several; repeat "
        "it for more",
    )
    parser.add_argument("--output", metavar="PATH", help="also write the merged JSON report")


def _report(args: argparse.Namespace) -> int:
    session = _merged(args.patterns)
    _show(session, session.verdicts, [], args.output)
    return 0


def _check(args: argparse.Namespace) -> int:
    session = _merged(args.patterns)
    verdicts = budgets.verdicts(budgets.load(args.budgets), session.records, source=args.budgets)
    regressed = {node: v for node, v in sorted(verdicts.items()) if v.status == "regressed"}
    for node, verdict in regressed.items():
        print(f"{node}: {verdict.message}")
    _show(session, verdicts, [], args.output)
    return 1 if regressed else 0


def _update(args: argparse.Namespace) -> int:
    session = _merged(args.patterns)
    old = budgets.load(args.budgets)
    line = budgets.write_update(
        args.budgets, old, session.records, session.collected, name=args.budgets
    )
    _show(session, None, [f"compile budgets updated: {line}"], args.output)
    return 0


def _merged(patterns: list[str]) -> merge.Session:
    paths = merge.report_paths(patterns)
    print(f"merging {len(paths)} report(s): {', '.join(map(str, paths))}")
    return merge.merge([merge.read(path) for path in paths])


def _show(
    session: merge.Session,
    verdicts: dict[str, budgets.BudgetVerdict] | None,
    written: list[str],
    output: str | None,
) -> None:
    """The torch.compile section a pytest run with --compile-report ends with."""
    lines = session_summary(session.records, session.coverage, verdicts) + written
    if output is not None:
        document = json_report(
            session.records,
            versions=session.versions,
            collected=session.collected,
            coverage_records=session.coverage,
            budget_verdicts=verdicts,
        )
        save_json(output, document)
        lines.append(f"compile report written to {output}")
    print(f"{' torch.compile ':=^{shutil.get_terminal_size().columns}}")
    print("\n".join(lines))
