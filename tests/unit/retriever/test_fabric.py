"""The fabric's pure join (seed 003): hints, cross-source dedup, the cross-reference boost, the final score and the
graph-unavailable fallback."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest

from retriever.fabric import Candidate, FabricConfig, entity_hints, join, similarity
from schemas.graph import EntityBrief, Fact

pytestmark = pytest.mark.unit

NOW = datetime(2025, 6, 1, tzinfo=UTC)


def fact(subject: str, predicate: str, obj: str) -> Fact:
    def end(name: str) -> EntityBrief:
        return EntityBrief(type="entity", id=uuid.uuid5(uuid.NAMESPACE_URL, name), name=name)

    return Fact(
        id=uuid.uuid4(),
        subject=end(subject),
        predicate=predicate,
        object=end(obj),
        valid_from=NOW,
        recorded_at=NOW,
        confidence=1.0,
    )


def test_entity_hints() -> None:
    assert entity_hints("What pagination approach did database-engineer recommend?") == ["database-engineer"]
    assert entity_hints('Who at Northwind Labs owns "Project Atlas"?') == ["Project Atlas", "Northwind Labs"]
    assert entity_hints("where does @sam.k work") == ["sam.k"]
    assert entity_hints("what changed last week") == []


def test_similarity_is_a_case_folded_bag_cosine() -> None:
    assert similarity("Dana works_at Initech", "dana WORKS_AT initech") == pytest.approx(1.0)
    assert similarity("a b", "c d") == 0.0


def test_a_passage_naming_a_graph_entity_is_boosted_and_carries_its_relations() -> None:
    passages = [
        Candidate("p1", "Quarterly numbers are due.", 1.0, NOW),
        Candidate("p2", "Dana joined the billing team at Initech.", 0.9, NOW),
    ]
    out = join(passages, [fact("Dana", "works_at", "Initech")], now=NOW)
    assert out.order == ["p2", "p1"]  # 0.9 x 1.2 relevance + authority beats 1.0
    assert out.diagnostics["boosted"] == {"p2": 1.2}
    assert out.relations["p2"] == [{"from": "Dana", "relation": "works_at", "to": "Initech"}] * 2  # both names
    base = join(passages, [], now=NOW)
    assert base.order == ["p1", "p2"]  # no graph result: nothing to boost


def test_a_fact_restated_by_a_passage_is_merged_and_the_passage_cross_validated() -> None:
    restated = "Dana works_at Initech since 2025-06-01T00:00:00Z"  # a real fact always has its valid_from
    passages = [Candidate("p1", restated, 0.5, NOW), Candidate("p2", "unrelated text", 1.0, NOW)]
    out = join(passages, [fact("Dana", "works_at", "Initech")], now=NOW)
    assert out.cross_validated == {"p1"} and out.facts == [] and out.diagnostics["facts_merged"] == 1
    strict = join(passages, [fact("Dana", "works_at", "Initech")], now=NOW, config=FabricConfig(dedup_threshold=1.01))
    assert strict.cross_validated == set() and len(strict.facts) == 1


def test_recency_weighs_in() -> None:
    old = Candidate("old", "same words here", 1.0, NOW - timedelta(days=720))
    new = Candidate("new", "same words here", 1.0, NOW)
    assert join([old, new], [], now=NOW).order == ["new", "old"]


def test_graph_unavailable_keeps_the_search_order_and_says_so() -> None:
    passages = [Candidate("a", "x", 0.2, NOW), Candidate("b", "Dana", 0.9, NOW)]
    out = join(passages, [fact("Dana", "works_at", "Initech")], now=NOW, graph_ok=False)
    assert out.order == ["a", "b"] and out.diagnostics["graph_unavailable"] is True
