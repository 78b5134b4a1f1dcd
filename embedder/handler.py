"""Embedder handler: ``om.chunks.v1`` batch -> vectors for chunks that still need them.

Vectors are computed outside any transaction (vendor calls can be slow), in groups of the provider's
batch size; each group's vectors are stored (cache + chunks, one short transaction) while the model
already works on the next group, so the database writes hide behind the model work. A last short
transaction stores the cache hits, records the processed positions and the spend. A crash between
groups is safe: the stored groups are not pending any more on redelivery, or come from the cache.
A chunk replaced meanwhile (new text or deleted) is skipped: the UPDATE matches id AND content hash.
Vendor failures propagate as ``VendorError``: retried by the delivery layer, then dead-lettered —
a vector is never made up.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections import Counter
from collections.abc import Sequence

import asyncpg

from embedder import repository as repo
from schemas.events import ChunksToEmbed
from services.embedding_input import embedding_input
from services.kafka.decode import decode_or_dead_letter
from services.kafka.delivery import DeadLetters
from services.kafka.records import Record
from services.metrics import EMBED_TEXTS, EMBED_TOKENS
from services.ports import Embedder

log = logging.getLogger("orgmem.embed")


class EmbedHandler:
    def __init__(
        self,
        *,
        pool: asyncpg.Pool,
        embedder: Embedder,
        provider: str,
        dead_letters: DeadLetters,
        group_batches: int = 1,
    ) -> None:
        self.pool = pool
        self.group_batches = group_batches  # model batches per stored group
        self.embedder = embedder
        self.provider = provider
        self.dead_letters = dead_letters
        self.embedded_total = 0
        self._store_s = 0.0  # seconds spent storing groups in the current batch (hidden behind the model)

    async def __call__(self, records: Sequence[Record]) -> None:
        events = await decode_or_dead_letter(records, ChunksToEmbed, self.dead_letters)
        began = time.perf_counter()
        model = self.embedder.model
        ids = list(dict.fromkeys(cid for _, ev in events for cid in ev.chunk_ids))
        async with self.pool.acquire() as conn:
            pending = await repo.load_pending(conn, ids, model) if ids else []
            cached = await repo.cached_vectors(conn, sorted({c.content_hash for c in pending}), model)
        todo: dict[str, str] = {}
        for c in pending:
            if c.content_hash not in cached:
                todo.setdefault(c.content_hash, embedding_input(c.title, c.text))
        by_hash: dict[str, list[tuple[uuid.UUID, str]]] = {}
        for c in pending:
            by_hash.setdefault(c.content_hash, []).append((c.id, c.content_hash))
        tokens = calls = 0
        # shortest first, so each model batch holds texts of similar length: padding to a batch's longest text
        # (and attention, quadratic in it) is what a mixed batch wastes; the provider alone sorts the same way
        hashes = sorted(todo, key=lambda h: len(todo[h]))
        group = max(1, self.embedder.max_batch * self.group_batches)
        writing: asyncio.Task[int] | None = None
        model_s = 0.0
        self._store_s = 0.0
        try:
            for start in range(0, len(hashes), group):
                part = hashes[start : start + group]
                t_model = time.perf_counter()
                vectors = await self.embedder.embed([todo[h] for h in part])  # the previous group is being stored
                model_s += time.perf_counter() - t_model
                usage = self.embedder.last_usage
                tokens, calls = tokens + usage.tokens, calls + usage.calls
                EMBED_TEXTS.labels(model).inc(len(part))
                EMBED_TOKENS.labels(model).inc(usage.tokens)
                fresh = dict(zip(part, vectors, strict=True))
                if writing is not None:
                    await writing
                writing = asyncio.create_task(self._store(model, fresh, [a for h in part for a in by_hash[h]]))
            if writing is not None:
                await writing
                writing = None
        finally:
            if writing is not None:  # the model failed while a group was being stored: finish or cancel it
                writing.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await writing
        workspaces = Counter(ev.workspace for _, ev in events)
        hits = [a for h in cached for a in by_hash.get(h, [])]
        async with self.pool.acquire() as conn, conn.transaction():
            await repo.store_vectors(conn, model, {}, hits, cached)
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
        log.debug(
            "embed batch: %d records, %d pending chunks, %d texts to the model in %d calls, model %.3fs of %.3fs"
            " (vector writes %.3fs, overlapping the model)",
            len(records),
            len(pending),
            len(todo),
            calls,
            model_s,
            time.perf_counter() - began,
            self._store_s,
        )

    async def _store(self, model: str, fresh: dict[str, list[float]], assign: list[tuple[uuid.UUID, str]]) -> int:
        began = time.perf_counter()
        try:
            async with self.pool.acquire() as conn, conn.transaction():
                return await repo.store_vectors(conn, model, fresh, assign, dict(fresh))
        finally:
            self._store_s += time.perf_counter() - began
