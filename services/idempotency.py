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
# the HTTP door binds an id to its content when it accepts it (before ingest has seen it): same table, own stage
DOOR_STAGE = "ingress"


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


async def _bound(conn: asyncpg.Connection, keys: list[str]) -> dict[str, bytes]:
    """The content each id is bound to: what ingest applied wins over what the door accepted."""
    rows = await conn.fetch(
        "SELECT event_key, digest FROM processed_events WHERE stage = ANY($1::text[]) AND event_key = ANY($2::text[])"
        " AND digest IS NOT NULL ORDER BY stage = $3",
        [INGEST_STAGE, DOOR_STAGE],
        keys,
        INGEST_STAGE,
    )
    return {r["event_key"]: bytes(r["digest"]) for r in rows}  # ingest's row last: it overwrites the door's


def _clashes(envs: Sequence[ChangeEnvelope], digests: list[bytes], bound: dict[str, bytes]) -> list[int]:
    out: list[int] = []
    for i, (env, digest) in enumerate(zip(envs, digests, strict=True)):
        if bound.setdefault(str(env.envelope_id), digest) != digest:
            out.append(i)
    return out


async def conflicting_envelopes(conn: asyncpg.Connection, envs: Sequence[ChangeEnvelope]) -> list[int]:
    """Indexes of ``envs`` whose id is already bound to different content (ingested before, accepted by the
    door before, or earlier in ``envs``). Read only."""
    digests = [envelope_digest(e) for e in envs]
    return _clashes(envs, digests, await _bound(conn, list({str(e.envelope_id) for e in envs})))


async def bind_at_door(conn: asyncpg.Connection, envs: Sequence[ChangeEnvelope]) -> tuple[list[int], list[str]]:
    """Bind every id of ``envs`` to its content before the door produces them, so a second, different content
    under the same id is refused (409) even before ingest has applied the first. Returns the indexes that
    clash (nothing is bound then) and the ids bound now (``release_door_binding`` them if producing fails).
    Two requests racing with one id: the insert decides, the loser re-reads and clashes."""
    digests = [envelope_digest(e) for e in envs]
    keys = list(dict.fromkeys(str(e.envelope_id) for e in envs))
    clashes = _clashes(envs, digests, await _bound(conn, keys))
    if clashes:
        return clashes, []
    first: dict[str, bytes] = {}
    for env, digest in zip(envs, digests, strict=True):
        first.setdefault(str(env.envelope_id), digest)
    rows = await conn.fetch(
        "INSERT INTO processed_events (stage, event_key, digest)"
        " SELECT $1, k, d FROM unnest($2::text[], $3::bytea[]) AS t(k, d)"
        " ON CONFLICT DO NOTHING RETURNING event_key",
        DOOR_STAGE,
        list(first),
        list(first.values()),
    )
    fresh = [r["event_key"] for r in rows]
    if len(fresh) < len(first):  # bound meanwhile (a concurrent request, or accepted earlier): compare again
        clashes = _clashes(envs, digests, await _bound(conn, keys))
        if clashes:
            await release_door_binding(conn, fresh)
            return clashes, []
    return [], fresh


async def release_door_binding(conn: asyncpg.Connection, keys: Sequence[str]) -> None:
    """Forget door bindings of envelopes that were never produced (the broker refused them)."""
    if keys:
        await conn.execute(
            "DELETE FROM processed_events WHERE stage = $1 AND event_key = ANY($2::text[])", DOOR_STAGE, list(keys)
        )
