"""Adoption: checking a suite that was never written for the plugin, by intercepting its top-level
module calls and telling their call sites apart.
"""
