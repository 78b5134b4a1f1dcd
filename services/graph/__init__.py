"""Graph reads: viewer-scoped facts, diffs, paths, cards (ACL and temporal filters in SQL)."""
