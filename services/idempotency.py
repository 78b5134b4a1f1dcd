"""The envelope's idempotency key: ``envelope_id``. The same id with the same content is a duplicate (applied
once); the same id with different content is a client error (dead letter on Kafka, 409 at HTTP), whether the
two arrive in one batch or in two. Content = the envelope as validated, serialised canonically (so formatting
of the raw bytes does not matter)."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import asyncpg

from schemas.envelope import ChangeEnvelope
from services.replaying import REPLAYING

INGEST_STAGE = "ingest"


def envelope_digest(env: ChangeEnvelope) -> bytes:
    return hashlib.sha256(env.model_dump_json().encode()).digest()


async def claim_envelopes(
    conn: asyncpg.Connection, items: Sequence[tuple[str, bytes]], *, stage: str = INGEST_STAGE
) -> tuple[set[str], dict[str, bytes]]:
    """Claim ``(envelope_id, digest)`` pairs in ``processed_events``.

    Returns the ids claimed now (in replay mode: every id, the apply logic is idempotent) and the digest each
    id is bound to (the stored one, or the first in ``items`` for a new id) — a caller compares its own
    digest with it to find conflicts.
    """
    first: dict[str, bytes] = {}
    for key, digest in items:
        first.setdefault(key, digest)
    rows = await conn.fetch(
        "INSERT INTO processed_events (stage, event_key, digest)"
        " SELECT $1, k, d FROM unnest($2::text[], $3::bytea[]) AS t(k, d)"
        " ON CONFLICT DO NOTHING RETURNING event_key",
        stage,
        list(first),
        list(first.values()),
    )
    fresh = {r["event_key"] for r in rows}
    bound = {k: first[k] for k in fresh}
    seen = [k for k in first if k not in fresh]
    if seen:
        for r in await conn.fetch(
            "SELECT event_key, digest FROM processed_events WHERE stage = $1 AND event_key = ANY($2::text[])",
            stage,
            seen,
        ):
            if r["digest"] is not None:
                bound[r["event_key"]] = bytes(r["digest"])
    if REPLAYING.get():
        fresh = set(first)
    return fresh, bound


async def conflicting_envelopes(conn: asyncpg.Connection, envs: Sequence[ChangeEnvelope]) -> list[int]:
    """Indexes of ``envs`` whose id is already bound to different content (ingested before, or earlier in
    ``envs``)."""
    digests = [envelope_digest(e) for e in envs]
    rows = await conn.fetch(
        "SELECT event_key, digest FROM processed_events WHERE stage = $1 AND event_key = ANY($2::text[])"
        " AND digest IS NOT NULL",
        INGEST_STAGE,
        list({str(e.envelope_id) for e in envs}),
    )
    bound: dict[str, bytes] = {r["event_key"]: bytes(r["digest"]) for r in rows}
    out: list[int] = []
    for i, (env, digest) in enumerate(zip(envs, digests, strict=True)):
        if bound.setdefault(str(env.envelope_id), digest) != digest:
            out.append(i)
    return out
