"""Issue 20 §4: a connector's structured field no registry predicate binds (``priority: p1``) is kept with the
document and ignored by extraction — never a dead letter of the whole document. Through the pipeline."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from services.ops.dlq import read_dead_letters, read_stored_letters
from services.settings import Settings
from tests.integration.graph_helpers import facts_of
from tests.integration.helpers import envelope, eventually, fetchval, principal, produce


async def test_an_unbound_structured_field_is_kept_and_ignored_not_dead_lettered(
    settings: Settings, pipeline: Any
) -> None:
    await pipeline("ingest", "extract", "conflicts")
    g = principal()
    await produce(
        settings,
        envelope(
            "tickets/T-1",
            "Checkout fails for EU cards.",
            principals=[g],
            author_email="ana@corp.example",
            author_name="Ana Ruiz",
            system="jira",
            structured_fields={"priority": "p1", "title": "Support Engineer", "labels": ["eu", "payments"]},
        ),
    )
    [title] = await eventually(lambda: facts_of(settings, "Ana Ruiz", [g], "has_title"), timeout=60)
    assert title.value == "Support Engineer"  # the bound field still becomes a claim
    await eventually(
        lambda: fetchval(settings, "SELECT count(*) FROM processed_events WHERE stage = 'extract'"),
        until=lambda n: n >= 1,
    )
    kept = json.loads(await fetchval(settings, "SELECT structured_fields FROM documents"))
    assert kept["priority"] == "p1" and kept["labels"] == ["eu", "payments"]  # kept with the document
    await asyncio.sleep(1.0)
    for stage in ("ingest", "extract", "conflicts"):
        assert not await read_dead_letters(settings, stage), stage
        assert not await read_stored_letters(settings, stage), stage
