"""Judging a call: the walk over both sides' leaves (parity), the judges that each try one rule
in the order docs/compared.md lists (judges, rules, boundaries), all answering in one outcome
type (verdicts), the closeness they measure with, and the re-runs they consult (reruns, bounded
by samples).
"""
