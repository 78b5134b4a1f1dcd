"""Write path on real Kafka + Postgres + S3: envelopes -> ingest -> embed -> projection."""

from __future__ import annotations

from typing import Any

from services.settings import Settings
from tests.integration.helpers import envelope, eventually, fetch, fetchval, principal, produce


async def test_direct_produce_reaches_projection_with_vectors(settings: Settings, pipeline: Any) -> None:
    await pipeline("ingest", "embed")
    g = principal()
    await produce(settings, envelope("C1/1", "Priya reports to Dana since the reorg.", principals=[g]))
    rows = await eventually(lambda: fetch(settings, "SELECT * FROM chunks WHERE NOT is_parent AND embedding IS NOT NULL"))
    assert rows[0]["principals"] == [g]
    assert rows[0]["embedding_model"] == "hash/v1-384"
    assert await fetchval(settings, "SELECT count(*) FROM documents") == 1
