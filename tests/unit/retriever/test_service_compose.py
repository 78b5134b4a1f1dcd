"""Pure composition of retrieve_context: time axes, arm presets, packing order, safe diagnostics."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import pytest
from pydantic import ValidationError

from retriever.compose import (
    ARM_PRESETS,
    fact_text,
    fusion_diagnostics,
    pack_context,
    packing_order,
    plan_dict,
    resolve_time,
)
from retriever.hits import DENSE_ONLY, LEXICAL_ONLY
from schemas.graph import EntityBrief, Fact
from schemas.tools import PassageFilters, RetrieveContextRequest

NOW = datetime(2025, 6, 15, 12, tzinfo=UTC)


def test_host_timestamps_win_over_the_planner() -> None:
    host = datetime(2024, 1, 1, tzinfo=UTC)
    axes = resolve_time(
        "what changed in 2023", PassageFilters(), as_of=host, believed_as_of=None, grain="year", now=NOW
    )
    assert (axes.as_of, axes.source, axes.plan, axes.diff_range, axes.grain) == (
        host,
        "host",
        None,
        None,
        "year",
    )
    plan = plan_dict(axes)
    assert plan is not None and plan["source"] == "host"


def test_point_plan_sets_as_of_and_host_grain_wins() -> None:
    axes = resolve_time(
        "pricing as of March 2024", PassageFilters(), as_of=None, believed_as_of=None, grain="day", now=NOW
    )
    assert axes.source == "planner" and axes.as_of is not None and axes.as_of.month == 3
    assert axes.grain == "day"
    assert axes.date_from is None and axes.diff_range is None


def test_range_plan_bounds_passages_unless_host_filters_given() -> None:
    axes = resolve_time(
        "what changed between Q1 2024 and Q3 2024",
        PassageFilters(),
        as_of=None,
        believed_as_of=None,
        grain=None,
        now=NOW,
    )
    assert axes.date_from == datetime(2024, 1, 1, tzinfo=UTC)
    assert axes.date_to == datetime(2024, 10, 1, tzinfo=UTC)
    assert axes.diff_range == (axes.date_from, axes.date_to)
    own = datetime(2024, 2, 1, tzinfo=UTC)
    axes = resolve_time(
        "what changed between Q1 2024 and Q3 2024",
        PassageFilters(date_from=own),
        as_of=None,
        believed_as_of=None,
        grain=None,
        now=NOW,
    )
    assert axes.date_from == own


def test_ambiguous_plan_filters_nothing_and_reports_ambiguity() -> None:
    axes = resolve_time("budget in March", PassageFilters(), as_of=None, believed_as_of=None, grain=None, now=NOW)
    assert axes.as_of is None and axes.date_from is None and axes.diff_range is None
    plan = plan_dict(axes)
    assert plan is not None and plan["ambiguities"]


def test_no_temporal_words_means_no_plan() -> None:
    axes = resolve_time("who owns billing", PassageFilters(), as_of=None, believed_as_of=None, grain=None, now=NOW)
    assert axes.source == "none" and axes.as_of is None


def test_arm_presets() -> None:
    assert ARM_PRESETS["full"][0] == ("dense", "lexical", "semantic", "relational")
    # baselines are the plain arms: only their own weight, no cascade, no autocut
    for arm, base in (("lexical", LEXICAL_ONLY), ("dense", DENSE_ONLY)):
        names, cfg = ARM_PRESETS[arm]
        assert names == (arm,) and dict(cfg.arm_weights) == dict(base.arm_weights)
        assert not cfg.cascade and not cfg.autocut
    assert "relational" not in ARM_PRESETS["hybrid"][0] and not ARM_PRESETS["hybrid"][1].autocut


def test_packing_order_by_mode() -> None:
    p, f, w = [("p1", "a"), ("p2", "b")], [("f1", "c")], [("w1", "d")]
    assert [i.key for i in packing_order("vector_first", p, f, w)] == ["p1", "p2", "f1", "w1"]
    assert [i.key for i in packing_order("graph_first", p, f, w)] == ["f1", "w1", "p1", "p2"]
    assert [i.key for i in packing_order("joint", p, f, w)] == ["p1", "f1", "w1", "p2"]


def test_pack_context_respects_budget() -> None:
    res = pack_context("vector_first", 12, [("p1", "word " * 20)], [("f1", "x" * 8)], [])
    assert res.used_tokens <= 12
    assert res.decisions[0].action == "truncated"


def test_fact_text() -> None:
    def end(name: str) -> EntityBrief:
        return EntityBrief(type="person", id=uuid.UUID(int=len(name)), name=name)

    at = datetime(2024, 1, 1, tzinfo=UTC)
    reports = Fact(
        id=uuid.uuid4(),
        subject=end("Priya"),
        predicate="reports_to",
        object=end("Dana"),
        valid_from=at,
        recorded_at=at,
        confidence=1.0,
    )
    assert fact_text(reports) == "Priya reports_to Dana [2024-01-01T00:00:00Z..…]"
    headcount = reports.model_copy(
        update={"subject": end("Acme"), "predicate": "headcount", "object": None, "value": "120", "valid_to": at}
    )
    assert fact_text(headcount) == "Acme headcount 120 [2024-01-01T00:00:00Z..2024-01-01T00:00:00Z]"
    unnamed = reports.model_copy(update={"object": EntityBrief(type="team", id=uuid.UUID(int=7), name="")})
    assert fact_text(unnamed).startswith("Priya reports_to 00000000-0000-0000-0000-000000000007 [")


def test_fusion_diagnostics_hide_vanished_ids() -> None:
    diag = {
        "missing_hits": ["secret-1", "secret-2"],
        "below_floor": ["a", "secret-3"],
        "dropped_duplicates": [{"chunk_id": "b", "kept": "a"}, {"chunk_id": "secret-4", "kept": "a"}],
        "channels": {"dense": 1},
    }
    out = fusion_diagnostics(diag, {"a", "b"})
    assert out["missing_hits"] == 2
    assert out["below_floor"] == ["a"]
    assert out["dropped_duplicates"] == [{"chunk_id": "b", "kept": "a"}]
    assert "secret" not in repr(out)


def test_request_limits_are_clamped_and_grain_validated() -> None:
    req = RetrieveContextRequest(query="x", limit=1000, max_tokens=10**9)
    assert (req.limit, req.max_tokens) == (50, 100_000)
    assert RetrieveContextRequest(query="x", limit=0).limit == 1
    with pytest.raises(ValidationError, match="as_of_grain"):
        RetrieveContextRequest(query="x", as_of_grain="week")
    with pytest.raises(ValidationError, match="query"):
        RetrieveContextRequest(query="x" * 2001)
    with pytest.raises(ValidationError, match="mode"):
        RetrieveContextRequest(query="x", mode="graph_only")
    naive = RetrieveContextRequest(query="x", as_of=datetime(2024, 1, 1))
    assert naive.as_of is not None and naive.as_of.tzinfo is UTC
