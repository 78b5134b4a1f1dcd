"""The embed handler stores one group of vectors while the model works on the next (real Postgres).

Every chunk gets exactly its own text's vector, cache hits are assigned in the final transaction, and a model
failure in a later group leaves the earlier groups stored but the batch unrecorded, so redelivery finishes it.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import asyncpg
import numpy as np
import pytest

from embedder.handler import EmbedHandler
from embedder.hashing import HashingEmbedder
from embedder.repository import STAGE
from schemas.events import ChunksToEmbed
from services.db.pool import create_pool
from services.errors import VendorError
from services.kafka.records import Record
from services.settings import Settings


class SlowHashing(HashingEmbedder):
    """Hash vectors, small model batches; optionally fails on the n-th call; logs call order."""

    def __init__(self, fail_on_call: int | None = None) -> None:
        super().__init__(dim=16, max_batch=3)
        self.calls = 0
        self.fail_on_call = fail_on_call

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.calls += 1
        if self.fail_on_call == self.calls:
            raise VendorError("model down", provider="test")
        return await super().embed(texts)


class NoDeadLetters:
    async def send(self, record: Record, exc: BaseException, **_: Any) -> None:
        raise AssertionError(f"unexpected dead letter: {exc}")


async def _seed(pool: asyncpg.Pool, n: int) -> tuple[uuid.UUID, list[uuid.UUID]]:
    doc = uuid.uuid4()
    ids = [uuid.uuid4() for _ in range(n)]
    async with pool.acquire() as conn:
        await conn.execute(
            "INSERT INTO documents (id, workspace, source_system, external_id, kind, event_time)"
            " VALUES ($1, 'w', 's', 'x', 'message', now())",
            doc,
        )
        await conn.executemany(
            "INSERT INTO chunks (id, document_id, workspace, is_parent, ordinal, char_start, char_end, text,"
            " content_hash, event_time, source_system, kind)"
            " VALUES ($1, $2, 'w', false, $3, 0, 1, $4, $5, $6, 's', 'message')",
            [(cid, doc, i, f"text {_text_no(i)}", f"h{_text_no(i)}", datetime.now(UTC)) for i, cid in enumerate(ids)],
        )
        # one text already has a vector in the cache: its chunks are assigned in the final transaction
        cached = (await HashingEmbedder(dim=16).embed(["text 0"]))[0]
        await conn.execute(
            "INSERT INTO embedding_cache (content_hash, embedding_model, embedding) VALUES ('h0', 'hash/v1-16', $1)",
            cached,
        )
    return doc, ids


def _text_no(i: int) -> int:
    return i % 4 if i % 5 == 0 else i  # chunks 5, 10, 15 repeat the texts of chunks 1, 2, 3


def _records(doc: uuid.UUID, ids: list[uuid.UUID], per_event: int) -> list[Record]:
    out = []
    for k, start in enumerate(range(0, len(ids), per_event)):
        ev = ChunksToEmbed(workspace="w", document_id=doc, version=1, chunk_ids=ids[start : start + per_event])
        out.append(Record("t.chunks", 0, k, None, ev.model_dump_json().encode()))
    return out


async def _vectors(pool: asyncpg.Pool) -> dict[uuid.UUID, tuple[str, str, Any]]:
    async with pool.acquire() as conn:
        rows = await conn.fetch("SELECT id, text, content_hash, embedding FROM chunks WHERE embedding IS NOT NULL")
    return {r["id"]: (r["text"], r["content_hash"], r["embedding"]) for r in rows}


async def test_groups_are_stored_while_the_next_is_embedded_and_every_chunk_gets_its_vector(
    settings: Settings,
) -> None:
    pool = await create_pool(settings)
    try:
        doc, ids = await _seed(pool, 20)
        model = SlowHashing()
        handler = EmbedHandler(pool=pool, embedder=model, provider="hash", dead_letters=NoDeadLetters())  # type: ignore[arg-type]
        await handler(_records(doc, ids, 4))
        # 20 chunks, 17 distinct texts, one cached: 16 texts in model batches of 3 = 6 groups
        assert model.calls == 6
        got = await _vectors(pool)
        assert set(got) == set(ids)
        for text, _, vec in got.values():
            want = (await HashingEmbedder(dim=16).embed([text]))[0]
            assert np.allclose(np.asarray(vec.to_list()), want, atol=1e-6), text
        async with pool.acquire() as conn:
            processed = await conn.fetchval("SELECT count(*) FROM processed_events WHERE stage = $1", STAGE)
            cache = await conn.fetchval("SELECT count(*) FROM embedding_cache")
        assert processed == 5 and cache == len({h for _, h, _ in got.values()}) == 17
    finally:
        await pool.close()


async def test_a_model_failure_in_a_later_group_keeps_earlier_groups_and_redelivery_finishes(
    settings: Settings,
) -> None:
    pool = await create_pool(settings)
    try:
        doc, ids = await _seed(pool, 20)
        records = _records(doc, ids, 4)
        failing = SlowHashing(fail_on_call=3)
        handler = EmbedHandler(pool=pool, embedder=failing, provider="hash", dead_letters=NoDeadLetters())  # type: ignore[arg-type]
        with pytest.raises(VendorError):
            await handler(records)
        partial = await _vectors(pool)
        assert 0 < len(partial) < 20  # the first two groups were stored before the third failed
        async with pool.acquire() as conn:
            assert await conn.fetchval("SELECT count(*) FROM processed_events WHERE stage = $1", STAGE) == 0
        healthy = SlowHashing()
        retry = EmbedHandler(pool=pool, embedder=healthy, provider="hash", dead_letters=NoDeadLetters())  # type: ignore[arg-type]
        await retry(records)
        assert len(await _vectors(pool)) == 20
        async with pool.acquire() as conn:
            assert await conn.fetchval("SELECT count(*) FROM processed_events WHERE stage = $1", STAGE) == 5
    finally:
        await pool.close()
