"""Judging a call: the walk over both sides' leaves (parity), the judges that each try one rule
in the order docs/compared.md lists, the closeness they measure with, the edge values, and the
failure text they leave.
"""
