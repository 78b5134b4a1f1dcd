"""Embedder handler: ``om.chunks.v1`` batch -> vectors for chunks that still need them.

Vectors are computed outside any transaction (vendor calls can be slow), in groups of the provider's
batch size; each group's vectors are stored (cache + chunks, one short transaction) while the model
already works on the next group, so the database writes hide behind the model work. A last short
transaction stores the cache hits, records the processed positions and the spend. A crash between
groups is safe: the stored groups are not pending any more on redelivery, or come from the cache.
A chunk replaced meanwhile (new text or deleted) is skipped: the UPDATE matches id AND content hash.
The text embedded is ``services.chunk_embedding.embedding_input``, the one ingest hashed. Model work is
``prepare`` (outside the transaction), the last transaction ``apply`` (``services.unit_of_work``).
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
from dataclasses import dataclass, field

import asyncpg

from embedder import repository as repo
from schemas.events import ChunksToEmbed
from services.chunk_embedding import cached_vectors, load_pending
from services.kafka.delivery import DeadLetters
from services.kafka.records import Record
from services.metrics import EMBED_TEXTS, EMBED_TOKENS
from services.ports import Embedder
from services.unit_of_work import Claim, Decoded, Outcome, UnitOfWork, decoded

log = logging.getLogger("orgmem.embed")


@dataclass(slots=True)
class Embedded:
    """What ``prepare`` did outside the transaction: the vectors it stored and what is left for ``apply``."""

    pending: int = 0
    cached: dict[str, object] = field(default_factory=dict)
    hits: list[tuple[uuid.UUID, str]] = field(default_factory=list)
    """Chunks whose vector is in the cache: assigned in the final transaction."""
    texts: int = 0
    tokens: int = 0
    calls: int = 0
    model_s: float = 0.0


Item = Decoded[ChunksToEmbed]


class EmbedHandler(UnitOfWork[Item, Embedded]):
    """Keyed by record position (``processed_events``); a redelivered record finds nothing pending."""

    def __init__(
        self,
        *,
        pool: asyncpg.Pool,
        embedder: Embedder,
        provider: str,
        dead_letters: DeadLetters,
        group_batches: int = 1,
    ) -> None:
        super().__init__(stage=repo.STAGE, pool=pool, dead_letters=dead_letters)
        self.group_batches = group_batches  # model batches per stored group
        self.embedder = embedder
        self.provider = provider
        self.embedded_total = 0
        self._store_s = 0.0  # seconds spent storing groups in the current batch (hidden behind the model)

    def parse(self, record: Record) -> Item:
        return decoded(record, ChunksToEmbed)

    def key(self, item: Item) -> str:
        return item.record.position

    async def prepare(self, items: list[Item]) -> Embedded:
        """Embed every pending chunk without a cached vector, storing each group as the model runs the next."""
        model = self.embedder.model
        ids = list(dict.fromkeys(cid for i in items for cid in i.value.chunk_ids))
        async with self.pool.acquire() as conn:
            pending = await load_pending(conn, ids, model) if ids else []
            cached = await cached_vectors(conn, sorted({c.content_hash for c in pending}), model)
        todo: dict[str, str] = {}
        by_hash: dict[str, list[tuple[uuid.UUID, str]]] = {}
        for c in pending:
            if c.content_hash not in cached:
                todo.setdefault(c.content_hash, c.input)
            by_hash.setdefault(c.content_hash, []).append((c.id, c.content_hash))
        done = Embedded(len(pending), cached, [a for h in cached for a in by_hash.get(h, [])], len(todo))
        await self._embed_groups(model, todo, by_hash, done)
        return done

    async def _embed_groups(
        self, model: str, todo: dict[str, str], by_hash: dict[str, list[tuple[uuid.UUID, str]]], done: Embedded
    ) -> None:
        # shortest first, so each model batch holds texts of similar length: padding to a batch's longest text
        # (and attention, quadratic in it) is what a mixed batch wastes; the provider alone sorts the same way
        hashes = sorted(todo, key=lambda h: len(todo[h]))
        group = max(1, self.embedder.max_batch * self.group_batches)
        writing: asyncio.Task[int] | None = None
        self._store_s = 0.0
        try:
            for start in range(0, len(hashes), group):
                part = hashes[start : start + group]
                t_model = time.perf_counter()
                vectors = await self.embedder.embed([todo[h] for h in part])  # the previous group is being stored
                done.model_s += time.perf_counter() - t_model
                usage = self.embedder.last_usage
                done.tokens, done.calls = done.tokens + usage.tokens, done.calls + usage.calls
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

    async def apply(self, conn: asyncpg.Connection, claim: Claim[Item], prepared: Embedded) -> Outcome:
        """The cache hits and the spend, in the transaction that records the positions."""
        model = self.embedder.model
        await repo.store_vectors(conn, model, {}, prepared.hits, prepared.cached)
        if prepared.texts:
            workspaces = Counter(i.value.workspace for i in claim.items)
            total = sum(workspaces.values())
            for ws, n in workspaces.items():
                await repo.record_spend(
                    conn,
                    ws,
                    self.provider,
                    model,
                    "embed",
                    round(prepared.calls * n / total),
                    round(prepared.texts * n / total),
                    round(prepared.tokens * n / total),
                )
        return Outcome(done=lambda: self._count(len(claim.items), prepared))

    async def _count(self, records: int, done: Embedded) -> None:
        self.embedded_total += done.pending
        log.debug(
            "embed batch: %d records, %d pending chunks, %d texts to the model in %d calls, model %.3fs"
            " (vector writes %.3fs, overlapping the model)",
            records,
            done.pending,
            done.texts,
            done.calls,
            done.model_s,
            self._store_s,
        )

    async def _store(self, model: str, fresh: dict[str, list[float]], assign: list[tuple[uuid.UUID, str]]) -> int:
        began = time.perf_counter()
        try:
            async with self.pool.acquire() as conn, conn.transaction():
                return await repo.store_vectors(conn, model, fresh, assign, dict(fresh))
        finally:
            self._store_s += time.perf_counter() - began
