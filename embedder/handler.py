"""Embedder handler: ``om.chunks.v1`` batch -> vectors for chunks that still need them.

Vectors are computed outside any transaction (vendor calls can be slow), then one short
transaction stores them, fills the cache and records the processed positions and the spend.
A chunk replaced meanwhile (new text or deleted) is skipped: the UPDATE matches id AND content hash.
Vendor failures propagate as ``VendorError``: retried by the delivery layer, then dead-lettered —
a vector is never made up.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Sequence

import asyncpg
from pydantic import ValidationError

from embedder import repository as repo
from embedder.port import Embedder
from ingest.handler import embedding_input
from schemas.events import ChunksToEmbed
from services.errors import InvalidPayloadError
from services.kafka.delivery import DeadLetters
from services.kafka.records import Record
from services.metrics import EMBED_TEXTS, EMBED_TOKENS

log = logging.getLogger("orgmem.embed")


class EmbedHandler:
    def __init__(self, *, pool: asyncpg.Pool, embedder: Embedder, provider: str, dead_letters: DeadLetters) -> None:
        self.pool = pool
        self.embedder = embedder
        self.provider = provider
        self.dead_letters = dead_letters
        self.embedded_total = 0

    async def __call__(self, records: Sequence[Record]) -> None:
        events: list[tuple[Record, ChunksToEmbed]] = []
        for record in records:
            try:
                events.append((record, ChunksToEmbed.model_validate_json(record.value)))
            except ValidationError as exc:
                loc = ".".join(str(p) for p in exc.errors()[0]["loc"]) or "body"
                await self.dead_letters.send(record, InvalidPayloadError(f"{loc}: {exc.errors()[0]['msg']}", field=loc))
        model = self.embedder.model
        ids = list(dict.fromkeys(cid for _, ev in events for cid in ev.chunk_ids))
        async with self.pool.acquire() as conn:
            pending = await repo.load_pending(conn, ids, model) if ids else []
            cached = await repo.cached_vectors(conn, sorted({c.content_hash for c in pending}), model)
        todo: dict[str, str] = {}
        for c in pending:
            if c.content_hash not in cached:
                todo.setdefault(c.content_hash, embedding_input(c.title, c.text))
        new_cache: dict[str, list[float]] = {}
        tokens = calls = 0
        if todo:
            hashes = list(todo)
            vectors = await self.embedder.embed([todo[h] for h in hashes])
            usage = self.embedder.last_usage
            tokens, calls = usage.tokens, usage.calls
            EMBED_TEXTS.labels(model).inc(len(hashes))
            EMBED_TOKENS.labels(model).inc(tokens)
            new_cache = dict(zip(hashes, vectors, strict=True))
        all_vectors: dict[str, object] = {**cached, **new_cache}
        workspaces = Counter(ev.workspace for _, ev in events)
        async with self.pool.acquire() as conn, conn.transaction():
            await repo.store_vectors(conn, model, new_cache, [(c.id, c.content_hash) for c in pending], all_vectors)
            await conn.execute(
                "INSERT INTO processed_events (stage, event_key) SELECT $1, k FROM unnest($2::text[]) AS k"
                " ON CONFLICT DO NOTHING",
                repo.STAGE,
                [r.position for r in records],
            )
            if todo:
                total = sum(workspaces.values())
                for ws, n in workspaces.items():
                    await repo.record_spend(
                        conn,
                        ws,
                        self.provider,
                        model,
                        "embed",
                        round(calls * n / total),
                        round(len(todo) * n / total),
                        round(tokens * n / total),
                    )
        self.embedded_total += len(pending)
