"""Counting: graph breaks, recompiles and fallbacks (accounting), their budgets and costs, what
--compile-parity=all reached (coverage), the records that ride on a test report, the text and JSON
report, and the merge of sharded reports.
"""
