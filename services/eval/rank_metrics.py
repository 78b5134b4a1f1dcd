"""The per-query retrieval measures (pure): the gold-aware rank of the predictions, hit@k, recall@k, precision@k,
reciprocal rank and nDCG@k, as :mod:`services.eval.metrics` aggregates them (rules in its docstring)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Literal

Ties = Literal["given", "pessimistic"]


RANK_CUTOFF = 10


def rank(
    ids: Sequence[str],
    scores: Sequence[float] | None = None,
    *,
    relevant: Iterable[str] = (),
    ties: Ties = "given",
) -> list[str]:
    """De-duplicate (first occurrence wins) and, when scores are given, sort by score."""
    first: dict[str, int] = {}
    for i, doc in enumerate(ids):
        first.setdefault(doc, i)
    unique = sorted(first, key=first.__getitem__)
    if scores is None:
        return unique
    if len(scores) != len(ids):
        raise ValueError(f"one score per id expected ({len(scores)} != {len(ids)})")
    rel = frozenset(relevant)

    def key(doc: str) -> tuple[float, int, int]:
        position = first[doc]
        tie_rank = (1 if doc in rel else 0) if ties == "pessimistic" else 0
        return (-scores[position], tie_rank, position)

    return sorted(unique, key=key)


def _hits(ranked: Sequence[str], relevant: frozenset[str], k: int) -> int:
    return sum(1 for doc in ranked[:k] if doc in relevant)


def hit_at(ranked: Sequence[str], relevant: frozenset[str], k: int) -> float:
    return 1.0 if _hits(ranked, relevant, k) else 0.0


def recall_at(ranked: Sequence[str], relevant: frozenset[str], k: int) -> float:
    return _hits(ranked, relevant, k) / len(relevant) if relevant else 0.0


def precision_at(ranked: Sequence[str], relevant: frozenset[str], k: int) -> float:
    return _hits(ranked, relevant, k) / k if k > 0 else 0.0


def reciprocal_rank(ranked: Sequence[str], relevant: frozenset[str], cutoff: int = RANK_CUTOFF) -> float:
    for position, doc in enumerate(ranked[:cutoff], start=1):
        if doc in relevant:
            return 1.0 / position
    return 0.0


def ndcg_at(ranked: Sequence[str], relevant: frozenset[str], k: int = RANK_CUTOFF) -> float:
    if not relevant:
        return 0.0
    dcg = sum(1.0 / math.log2(pos + 1) for pos, doc in enumerate(ranked[:k], start=1) if doc in relevant)
    idcg = sum(1.0 / math.log2(pos + 1) for pos in range(1, min(len(relevant), k) + 1))
    return dcg / idcg
