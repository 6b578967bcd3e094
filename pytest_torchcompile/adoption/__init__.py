"""Adoption: checking a suite that was never written for the plugin, by intercepting its top-level
module and function calls (the wrappers, the call's kind), telling their call sites apart, and
choosing which calls are checked (selection, the signature policy).
"""
