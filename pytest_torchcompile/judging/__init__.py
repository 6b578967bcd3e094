"""Judging a call: the walk over both sides' leaves (parity), the judges that each try one rule
in the order docs/compared.md lists, the closeness and rounding they measure with, the trees they
walk, the edge values, and the failure text they leave.
"""
