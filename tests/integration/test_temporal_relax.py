"""A date the planner read from the question never empties the answer (issue 26): when its window or a state
question's ``as_of`` leaves no passage, the search runs again without it and the date only boosts. A host's own
date filters and an explicit "as of A" stay hard."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from retriever.compose import resolve_time
from retriever.wiring import get_service
from schemas.tools import PassageFilters
from services.settings import Settings
from services.viewer import Principals
from tests.integration.helpers import envelope, eventually, fetchval, later, principal, produce

NOW = datetime(2026, 1, 1, tzinfo=UTC)


async def test_a_planner_window_that_matches_nothing_is_relaxed_to_a_boost(settings: Settings, pipeline: Any) -> None:
    rt = await pipeline("ingest", "embed")
    g = principal()
    await produce(
        settings,
        envelope("m1", "Melanie painted a lake at sunrise", principals=[g], event_time=later(0)),
        envelope("m2", "Caroline went to the pottery fair", principals=[g], event_time=later(5)),
    )
    await eventually(
        lambda: fetchval(settings, "SELECT count(*) FROM chunks WHERE NOT is_parent AND embedding IS NOT NULL"),
        until=lambda n: n == 2,
    )
    passages = get_service(rt).passages

    async def search(query: str, filters: PassageFilters) -> Any:
        axes = resolve_time(query, filters, as_of=None, believed_as_of=None, grain=None, now=NOW)
        return await passages.search(
            query=query,
            workspace="default",
            filters=filters,
            limit=10,
            arms="full",
            viewer=Principals((g,)),
            own=[g],
            axes=axes,
            now=NOW,
        )

    # the messages are from May 2024: each of these planner filters alone would leave nothing
    for query in (
        "what did Melanie paint after March 16, 2025?",  # window (since)
        "What was Melanie painting on 16.03.2022?",  # a state question: as_of
        "what did Melanie paint between 01.01.2025 and 10.01.2025",
    ):
        found = await search(query, PassageFilters())
        assert found.ranked, query
        assert found.diagnostics["temporal_relaxed"] is True, query
        assert found.ranked[0].hit.text == "Melanie painted a lake at sunrise"
    # an explicit "as of A" is the state at A: nothing then is the answer (no relaxing)
    point = await search("what did Melanie paint as of March 2022", PassageFilters())
    assert point.ranked == [] and "temporal_relaxed" not in point.diagnostics
    # a window that holds passages is kept as a filter
    kept = await search("what did Melanie paint after March 16, 2024?", PassageFilters())
    assert kept.ranked and "temporal_relaxed" not in kept.diagnostics
    # the host's own filter is never relaxed
    host = PassageFilters(date_from=datetime(2025, 3, 16, tzinfo=UTC))
    assert (await search("what did Melanie paint?", host)).ranked == []
    assert (await search("what did Melanie paint after March 16, 2025?", host)).ranked == []
