"""Collaboration handler: ``om.documents.v1`` batch -> documents' contributions replaced, edges refreshed.

Idempotent per document: a document's contributions are recomputed from its current state and replace the
previous ones (keyed by document id), then only the touched edges are re-aggregated — replays and
redeliveries never double count, deletes remove the document's share. One transaction per batch, together
with the processed events (``services.unit_of_work``). Nothing is published downstream.
"""

from __future__ import annotations

import uuid
from typing import Any

import asyncpg

from schemas.events import DocumentEvent
from services.collaboration import repository as repo
from services.collaboration.weights import document_pairs
from services.decay import HALF_LIFE_DAYS
from services.kafka.delivery import DeadLetters
from services.kafka.records import Record
from services.unit_of_work import Claim, Decoded, Outcome, Transactional, decoded

Item = Decoded[DocumentEvent]


class CollabHandler(Transactional[Item]):
    """``apply`` recomputes every document the batch names (redelivered ones too: the result is the same)."""

    def __init__(
        self, *, pool: asyncpg.Pool, dead_letters: DeadLetters, half_life_days: float = HALF_LIFE_DAYS
    ) -> None:
        super().__init__(stage=repo.STAGE, pool=pool, dead_letters=dead_letters)
        self.half_life_days = half_life_days
        self.documents = 0

    def parse(self, record: Record) -> Item:
        return decoded(record, DocumentEvent)

    def key(self, item: Item) -> str:
        return str(item.value.event_id)

    async def apply(self, conn: asyncpg.Connection, claim: Claim[Item], prepared: None) -> Outcome:
        ids = list(dict.fromkeys(i.value.document_id for i in claim.items))
        await conn.execute("SELECT pg_advisory_xact_lock(hashtextextended('collab-edges', 0))")
        docs = await repo.load_documents(conn, ids)
        rows: list[tuple[Any, ...]] = []
        for d in sorted(docs, key=lambda r: r["event_time"]):
            if d["deleted_at"] is not None:
                continue
            thread = await repo.thread_authors(conn, d)
            participants: list[uuid.UUID] = list(d["participants"])
            for a, b, reason, w in document_pairs(d["author"], participants, thread):
                rows.append((d["id"], d["workspace"], a, b, reason, w, d["event_time"]))
        pairs = await repo.replace_contributions(conn, [d["id"] for d in docs], rows)
        await repo.refresh_edges(conn, pairs, self.half_life_days)
        return Outcome(done=lambda: self._count(len(docs)))

    async def _count(self, documents: int) -> None:
        self.documents += documents
