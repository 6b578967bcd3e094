"""Read every excuse in a false-alarm sweep's logs once: how many of each rule, and how close each
came to its limit: the excuse audit.

    python3 scripts/false_alarm_sweep.py --logs LOGS ...     # its runs print every note (-rA)
    python3 scripts/excuse_audit.py LOGS [LOGS ...]

Each excused leaf's note names its rule and evidence. For the float64 reference rule the ratio is
|compiled - reference| / |eager - reference| (the limit is 3, plus reduction-order noise); for
eager's rounding noise, rms |compiled - eager| / rms |noisy - plain| (limit 3); boundary elements
the noise explains are counted apart. The largest ratios are printed with their leaves: a real
divergence hidden by a rule would sit there, near its limit.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Sequence
from pathlib import Path

_NOTE = re.compile(
    r"^\s*(?:\d+\.\s+)?(?P<leaf>.+?): outside assert_close's tolerance.*?excused by (?P<rule>.+?): (?P<evidence>.*)$"
)
_REFERENCE = re.compile(r"compiled is (?P<c>[-+0-9.e]+) from it where eager is (?P<e>[-+0-9.e]+)")
_NOISE = re.compile(
    r"rms \|compiled - eager\| (?P<c>[-+0-9.e]+), rms \|noisy - noiseless re-run\| (?P<e>[-+0-9.e]+)"
)
_BOUNDARY = re.compile(r"at (?P<n>\d+) boundary element\(s\)")


def audit(paths: Sequence[Path]) -> list[tuple[str, float | None, str, str]]:
    """(rule, ratio or None, leaf, log file) for each excused leaf in the logs under `paths`."""
    found = []
    logs = [p for path in paths for p in (sorted(path.glob("*.log")) if path.is_dir() else [path])]
    for log in logs:
        seen = set()
        for line in log.read_text(errors="replace").splitlines():
            match = _NOTE.match(line)
            if match is None or line in seen:
                continue
            seen.add(line)  # a note printed in the report and in -rA's section alike
            rule, evidence = match["rule"], match["evidence"]
            ratio = None
            for pattern in (_REFERENCE, _NOISE):
                numbers = pattern.search(evidence)
                if numbers:
                    c, e = float(numbers["c"]), float(numbers["e"])
                    ratio = c / e if e else (0.0 if c == 0 else float("inf"))
            if ratio is None and _BOUNDARY.search(evidence):
                rule += " (boundary elements)"
            found.append((rule, ratio, match["leaf"].strip(), log.name))
    return found


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("logs", type=Path, nargs="+", help="sweep log folders or log files")
    parser.add_argument("--top", type=int, default=5, help="largest ratios listed per rule")
    args = parser.parse_args(argv)
    found = audit(args.logs)
    print("| rule | excused leaves | ratio to the rule's evidence: median | largest |")
    print("| --- | --- | --- | --- |")
    for rule in sorted({f[0] for f in found}):
        ratios = sorted(r for f in found if f[0] == rule and (r := f[1]) is not None)
        count = sum(f[0] == rule for f in found)
        median = f"{ratios[len(ratios) // 2]:.3g}" if ratios else "-"
        largest = f"{ratios[-1]:.3g}" if ratios else "-"
        print(f"| {rule} | {count} | {median} | {largest} |")
    for rule in sorted({f[0] for f in found}):
        ranked = sorted(
            ((r, leaf, log) for name, r, leaf, log in found if name == rule and r is not None),
            key=lambda f: -f[0],
        )
        for ratio, leaf, log in ranked[: args.top]:
            print(f"  {rule}: {ratio:.3g}  {leaf}  ({log})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
