"""SQL fragments of the chunk vectors, shared by the embedder (builds the HNSW index) and the retriever
(queries it): both must spell the indexed expression identically, or the planner skips the index."""

from __future__ import annotations


def sql_literal(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def vector_expr(dim: int) -> str:
    """The expression the HNSW index is built on; queries must use exactly this to hit the index."""
    return f"(embedding::vector({int(dim)}))"
