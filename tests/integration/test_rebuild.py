"""`orgmem rebuild`: a fresh projection generation built from the log, identical, switched in when caught up."""

from __future__ import annotations

from typing import Any

import pytest

from services import generations
from services.ops.rebuild import rebuild
from services.settings import Settings
from tests.integration.helpers import envelope, eventually, fetch, fetchval, later, principal, produce


async def _projection(settings: Settings) -> list[tuple[Any, ...]]:
    rows = await fetch(
        settings,
        "SELECT d.id, d.current_version, d.content_hash, d.principals, d.deleted_at,"
        " count(c.id) FILTER (WHERE c.embedding IS NOT NULL) AS vectors"
        " FROM documents d LEFT JOIN chunks c ON c.document_id = d.id"
        " GROUP BY d.id ORDER BY d.id",
    )
    return [tuple(r) for r in rows]


@pytest.mark.slow
@pytest.mark.timeout(240)
async def test_rebuild_builds_identical_generation_and_switches(settings: Settings, pipeline: Any) -> None:
    await pipeline("ingest", "embed")
    g = [principal() for _ in range(2)]
    envs = [envelope(f"RB/{i}", f"rebuild me {i}", principals=[g[i % 2]], event_time=later(i)) for i in range(40)]
    envs.append(envelope("RB/3", op="delete", event_time=later(100)))
    await produce(settings, *envs)
    await eventually(
        lambda: fetchval(
            settings,
            "SELECT count(*) FROM chunks WHERE NOT is_parent AND NOT deleted AND embedding IS NOT NULL",
        ),
        until=lambda v: v == 39,
    )
    live = await _projection(settings)

    result = await rebuild(settings, settle_s=0.5)
    assert result.generation == "g1" and result.db_schema == f"{settings.db_schema}_g1"
    active = await generations.resolve(settings)
    assert active.db_schema == result.db_schema and active.group_prefix == f"{settings.group_prefix}g1-"
    assert active.topic("chunks") == f"{settings.topic_namespace}.g1.chunks.v1"
    assert active.topic("envelopes") == settings.topic("envelopes")
    assert await _projection(active) == live
