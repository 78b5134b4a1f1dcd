"""RM3-style pseudo-relevance feedback weights (retriever.lexical_math.prf_expansion, pure)."""

from __future__ import annotations

from retriever.lexical_math import LexemeStats, prf_expansion

STATS = LexemeStats({"team": 0.2, "atlas": 0.004, "compass": 0.003, "renam": 0.001}, unlisted=0.0005)


def test_expansion_prefers_rare_terms_of_high_scoring_docs_and_skips_query_terms() -> None:
    docs = [
        (9.0, [("atlas", 2), ("compass", 1), ("renam", 1), ("team", 3), ("project", 1)], 8),
        (3.0, [("atlas", 1), ("2024", 1), ("ok", 1), ("heron", 1)], 4),
    ]
    out = prf_expansion(docs, ["project"], STATS, max_terms=3, weight=0.5)
    terms = [t for t, _ in out]
    assert "project" not in terms  # a query term is never an expansion
    assert "team" not in terms  # too common (share 0.2 > 0.02)
    assert "2024" not in terms and "ok" not in terms  # numbers and short lexemes
    assert len(out) == 3 and out[0][1] == 0.5 and all(0 < w <= 0.5 for _, w in out)
    assert [w for _, w in out] == sorted((w for _, w in out), reverse=True)


def test_no_feedback_without_positive_scores() -> None:
    assert prf_expansion([(0.0, [("atlas", 1)], 1)], [], STATS) == []
    assert prf_expansion([], [], STATS) == []
