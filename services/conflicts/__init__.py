"""Conflicts stage (group ``om-conflicts`` on ``om.graph.v1``): identity merge, entity dedup, exclusivity,
bi-temporal close, tombstones. Pure rules live in ``resolution``."""
