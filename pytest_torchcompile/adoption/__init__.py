"""Adoption: checking a suite that was never written for the plugin, by intercepting its top-level
module calls, telling their call sites apart, selecting which to check and counting what was
covered.
"""
