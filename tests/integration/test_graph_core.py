"""Graph pipeline on real Kafka + Postgres + S3: ingest -> extract -> conflicts -> viewer-scoped reads."""

from __future__ import annotations

from typing import Any

from services.settings import Settings
from tests.integration.graph_helpers import entity_id, facts_by_id, facts_of, paths_from
from tests.integration.helpers import envelope, eventually, fetch, fetchval, later, principal, produce

STAGES = ("ingest", "extract", "conflicts")


async def test_relationship_from_message_has_evidence(settings: Settings, pipeline: Any) -> None:
    await pipeline(*STAGES)
    g = principal()
    await produce(settings, envelope("C1/1", "Priya Shah reports to Dana Lee.", principals=[g]))
    facts = await eventually(lambda: facts_of(settings, "Priya Shah", [g], "reports_to"))
    [fact] = facts
    assert fact.object is not None and fact.object.name == "Dana Lee"
    assert fact.invalidated_at is None and fact.valid_to is None
    [ev] = fact.evidence
    doc = await fetchval(settings, "SELECT id FROM documents WHERE external_id = 'C1/1'")
    assert ev.document_id == doc
    chunk = await fetch(settings, "SELECT char_start, char_end, is_parent FROM chunks WHERE id = $1", ev.chunk_id)
    assert not chunk[0]["is_parent"] and chunk[0]["char_start"] <= ev.span_start < chunk[0]["char_end"]
    # a viewer without the document's principal sees nothing; an empty viewer sees nothing
    assert await facts_of(settings, "Priya Shah", [principal()]) == []
    assert await facts_of(settings, "Priya Shah", []) == []


async def test_exclusive_change_keeps_both_winners_for_as_of(settings: Settings, pipeline: Any) -> None:
    await pipeline(*STAGES)
    g = principal()
    await produce(settings, envelope("C1/1", "Priya Shah reports to Dana Lee.", principals=[g], event_time=later(0)))
    await eventually(lambda: facts_of(settings, "Priya Shah", [g], "reports_to"))
    await produce(settings, envelope("C1/2", "Priya Shah reports to Sam Ortiz.", principals=[g], event_time=later(60)))

    async def current_is_sam() -> bool:
        facts = await facts_of(settings, "Priya Shah", [g], "reports_to")
        return len(facts) == 1 and facts[0].object is not None and facts[0].object.name == "Sam Ortiz"

    await eventually(current_is_sam)
    before = await facts_of(settings, "Priya Shah", [g], "reports_to", as_of=later(30))
    after = await facts_of(settings, "Priya Shah", [g], "reports_to", as_of=later(90))
    assert [f.object.name for f in before if f.object] == ["Dana Lee"]
    assert [f.object.name for f in after if f.object] == ["Sam Ortiz"]
    assert before[0].valid_to == later(60) and before[0].invalidated_at is None  # superseded, still believed
    rows = await fetch(settings, "SELECT status FROM facts WHERE predicate = 'reports_to' ORDER BY valid_from")
    assert [r["status"] for r in rows] == ["superseded", "active"]
    # month grain: both winners overlap May 2024
    month = await facts_of(settings, "Priya Shah", [g], "reports_to", as_of=later(30), as_of_grain="month")
    assert len(month) == 2


async def test_out_of_order_exclusive_is_chained(settings: Settings, pipeline: Any) -> None:
    await pipeline(*STAGES)
    g = principal()
    await produce(settings, envelope("C1/2", "Priya Shah reports to Sam Ortiz.", principals=[g], event_time=later(60)))
    await eventually(lambda: facts_of(settings, "Priya Shah", [g], "reports_to"))
    await produce(settings, envelope("C1/1", "Priya Shah reports to Dana Lee.", principals=[g], event_time=later(0)))
    await eventually(lambda: fetchval(settings, "SELECT count(*) = 2 FROM facts WHERE predicate = 'reports_to'"))
    now = await facts_of(settings, "Priya Shah", [g], "reports_to")
    assert [f.object.name for f in now if f.object] == ["Sam Ortiz"]
    early = await facts_of(settings, "Priya Shah", [g], "reports_to", as_of=later(30))
    assert [f.object.name for f in early if f.object] == ["Dana Lee"]


async def test_delete_of_only_evidence_retracts(settings: Settings, pipeline: Any) -> None:
    await pipeline(*STAGES)
    g = principal()
    await produce(settings, envelope("C1/1", "Priya Shah reports to Dana Lee.", principals=[g]))
    await eventually(lambda: facts_of(settings, "Priya Shah", [g], "reports_to"))
    await produce(settings, envelope("C1/1", op="delete", principals=[g], event_time=later(5)))
    await eventually(
        lambda: fetchval(
            settings,
            "SELECT bool_and(invalidated_at IS NOT NULL AND status = 'retracted') FROM facts"
            " WHERE predicate = 'reports_to'",
        )
    )
    assert await fetchval(settings, "SELECT count(*) FROM fact_evidence") == 0
    assert await facts_of(settings, "Priya Shah", [g]) == []


async def test_fact_needs_every_evidence_document_visible(settings: Settings, pipeline: Any) -> None:
    await pipeline(*STAGES)
    g1, g2 = principal(), principal()
    await produce(
        settings,
        envelope("C1/1", "Priya Shah reports to Dana Lee.", principals=[g1]),
        envelope("C2/1", "As noted, Priya Shah reports to Dana Lee.", principals=[g2]),
    )
    await eventually(
        lambda: fetchval(
            settings,
            "SELECT count(*) = 2 FROM fact_evidence e JOIN facts f"
            " ON f.id = e.fact_id WHERE f.predicate = 'reports_to'",
        )
    )
    assert await fetchval(settings, "SELECT count(*) FROM facts WHERE predicate = 'reports_to'") == 1
    priya = await entity_id(settings, "Priya Shah", [g1, g2])
    assert priya is not None
    assert await facts_by_id(settings, priya, [g1], "reports_to") == []
    assert await facts_by_id(settings, priya, [g2], "reports_to") == []
    assert len(await facts_by_id(settings, priya, [g1, g2], "reports_to")) == 1


async def test_path_walk_never_crosses_invisible_edge(settings: Settings, pipeline: Any) -> None:
    await pipeline(*STAGES)
    g1, g2 = principal(), principal()
    await produce(
        settings,
        envelope("C1/1", "Ann Lee reports to Bob Ray.", principals=[g1]),
        envelope("C2/1", "Bob Ray reports to Cid Moss.", principals=[g2]),
    )
    await eventually(lambda: fetchval(settings, "SELECT count(*) = 2 FROM facts WHERE predicate = 'reports_to'"))
    ann = await entity_id(settings, "Ann Lee", [g1])
    assert ann is not None
    limited = await paths_from(settings, ann, [g1], max_depth=3)
    names = {n.name for p in limited for n in p.nodes}
    assert "Bob Ray" in names and "Cid Moss" not in names
    full = await paths_from(settings, ann, [g1, g2], max_depth=3)
    deepest = max(full, key=lambda p: len(p.nodes))
    assert [n.name for n in deepest.nodes] == ["Ann Lee", "Bob Ray", "Cid Moss"]
    assert [s.predicate in ("reports_to", "manages") for s in deepest.steps] == [True, True]
    # fan-out 1 at depth 1 still reaches only the visible neighbour
    assert {n.name for p in await paths_from(settings, ann, [g1], max_depth=1, max_fanout=1) for n in p.nodes} == {
        "Ann Lee",
        "Bob Ray",
    }
