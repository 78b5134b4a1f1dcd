"""The processed-event record every stage writes in the same transaction as its effects."""

from __future__ import annotations

from collections.abc import Sequence

import asyncpg

from services.replaying import REPLAYING


async def claim_events(conn: asyncpg.Connection, stage: str, keys: Sequence[str]) -> set[str]:
    """Record ``keys`` as processed by ``stage``; returns the ones that were NOT processed before.

    A redelivered event is therefore skipped (its effects are already committed). In replay mode
    (``orgmem replay``) every key counts as new: the stage's apply logic is idempotent.
    """
    rows = await conn.fetch(
        "INSERT INTO processed_events (stage, event_key) SELECT $1, k FROM unnest($2::text[]) AS k"
        " ON CONFLICT DO NOTHING RETURNING event_key",
        stage,
        list(keys),
    )
    if REPLAYING.get():
        return set(keys)
    return {r["event_key"] for r in rows}
