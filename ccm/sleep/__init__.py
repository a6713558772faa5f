"""Nightly consolidation: conclusions linked into a graph, conflicts settled, trust scored."""
