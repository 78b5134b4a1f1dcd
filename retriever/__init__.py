"""Retriever stage: pure ranking, scope, packing and query-understanding logic for the read path."""
