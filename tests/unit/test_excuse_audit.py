"""scripts/excuse_audit.py reads each excused leaf of a sweep's logs once, with its rule and how
close it came to the rule's limit."""

from __future__ import annotations

import importlib.util
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "excuse_audit.py"

LOG = """\
  1. grad of parameter 'bn.bias': outside assert_close's tolerance at 3 value(s), greatest \
|compiled - eager| 0.5 of 8 element(s); excused by the float64 reference: compiled is 0.29 from \
it where eager is 0.1 (allowed: 3x eager's error and reduction-order noise)
  2. output: outside assert_close's tolerance at 1 value(s), greatest |compiled - eager| 0.01 of \
4 element(s); excused by eager's rounding noise: rms |compiled - eager| 0.002, rms |noisy - \
noiseless re-run| 0.004; allowed: 3 * 0.004
  3. grad of input 0: outside assert_close's tolerance at 1 value(s), greatest |compiled - eager| \
0.28 of 2 element(s); excused by eager's rounding noise: at 1 boundary element(s) eager's \
rounding noise crosses the boundary too: within rounding, excused
"""


def test_each_excuse_is_read_once_with_its_rule_and_ratio(tmp_path: Path) -> None:
    spec = importlib.util.spec_from_file_location("excuse_audit", SCRIPT)
    assert spec is not None and spec.loader is not None
    audit = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(audit)
    # the same notes twice: once in the failure report's section, once in -rA's
    (tmp_path / "inductor-0-test_x.log").write_text(LOG + LOG)
    found = sorted(audit.audit([tmp_path]), key=lambda f: f[0])
    rules = [
        (rule, None if ratio is None else round(ratio, 3), leaf) for rule, ratio, leaf, _ in found
    ]
    assert rules == [
        ("eager's rounding noise", 0.5, "output"),
        ("eager's rounding noise (boundary elements)", None, "grad of input 0"),
        ("the float64 reference", 2.9, "grad of parameter 'bn.bias'"),
    ]
