"""Extractor handler: ``om.documents.v1`` batch -> one ``GraphEvent`` per touched document on ``om.graph.v1``.

Order (docs/architecture.md "Delivery"):
1. parse events (invalid -> dead letter); one extraction per document, from its CURRENT projection state
   (an older event of a document re-derives the current state: the result is the same event id);
2. read the archived envelope (text, author and participant identity keys in source order) and the child
   chunk spans; run the zero-LLM extraction (and the optional LLM path); resolve identity keys of
   mentioned people through ``person_aliases``; registry-bound structured fields become claims of the
   author (an unresolved author is a permanent error -> dead letter, never a partial write);
3. ONE transaction records the processed events (and LLM spend); after commit the graph events are
   published — also for redelivered duplicates, so a crash between commit and publish loses nothing
   (steps 1-2 are ``prepare``, step 3 ``apply`` of ``services.unit_of_work``).
Deleted documents produce a tombstone event; ACL changes need no event (reads join live ACLs).
"""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field

import asyncpg
from pydantic import ValidationError

from extractor import repository as repo
from extractor.assemble import (
    ChunkIndex,
    DocInfo,
    assemble,
    deleted_event,
    document_ref,
    meeting_ref,
    participant_ids,
)
from extractor.links import HERB_EID_NAMESPACE, ExtractedLink, dedup_links
from extractor.mentions import attendance_links
from extractor.patterns import extract_links
from extractor.port import LinkSource
from extractor.structured import StructuredClaim, structured_claims
from schemas.envelope import ChangeEnvelope
from schemas.events import DocumentChange, DocumentEvent
from schemas.graph import GraphEvent
from services.errors import UnresolvedAuthorError
from services.kafka.app import BrokerPublisher
from services.kafka.delivery import DeadLetters
from services.kafka.records import Record
from services.objectstore.port import ObjectStore
from services.people import resolve_keys as resolve_person_keys
from services.taxonomy.registry import Registry
from services.unit_of_work import Claim, Decoded, Outcome, UnitOfWork, decoded

log = logging.getLogger("orgmem.extract")
BLOB_CONCURRENCY = 16
OBJECT_CACHE = 8


@dataclass
class ExtractStats:
    documents: int = 0
    links: int = 0
    seconds: float = 0.0
    events: list[str] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Extracted:
    """What ``prepare`` derived, outside the transaction: the graph events to publish and the LLM spend."""

    graph: list[GraphEvent]
    spend: list[tuple[object, ...]]


Item = Decoded[DocumentEvent]


class ExtractHandler(UnitOfWork[Item, Extracted]):
    """``apply`` publishes a graph event for every document the batch names, redelivered ones too (the event
    derives from the current state: the same event id), so a crash between commit and publish loses nothing."""

    def __init__(
        self,
        *,
        pool: asyncpg.Pool,
        store: ObjectStore,
        publisher: BrokerPublisher,
        dead_letters: DeadLetters,
        graph_topic: str,
        registry: Registry,
        llm: LinkSource | None = None,
    ) -> None:
        super().__init__(stage=repo.STAGE, pool=pool, dead_letters=dead_letters, publisher=publisher)
        self.store = store
        self.graph_topic = graph_topic
        self.registry = registry
        self.llm = llm
        self.stats = ExtractStats()
        self._objects: dict[str, list[bytes]] = {}

    def parse(self, record: Record) -> Item:
        return decoded(record, DocumentEvent)

    def key(self, item: Item) -> str:
        return str(item.value.event_id)

    async def prepare(self, items: list[Item]) -> Extracted:
        """One extraction per document, from its current projection state (reads and LLM calls: no transaction)."""
        latest: dict[uuid.UUID, DocumentEvent] = {i.value.document_id: i.value for i in items}
        wanted = [d for d, ev in latest.items() if ev.change is not DocumentChange.ACL_CHANGED]
        async with self.pool.acquire() as conn:
            graph = await self._graph(conn, latest, wanted)
        return Extracted(graph, self.llm.take_spend() if self.llm else [])

    async def apply(self, conn: asyncpg.Connection, claim: Claim[Item], prepared: Extracted) -> Outcome:
        await repo.record_spend(conn, prepared.spend)
        graph = prepared.graph
        return Outcome(
            publish=[
                (self.graph_topic, g.model_dump_json().encode(), g.key.encode(), {"x-event-type": "graph"})
                for g in graph
            ],
            done=lambda: self._count(graph),
        )

    async def _count(self, graph: list[GraphEvent]) -> None:
        self.stats.documents += len(graph)
        self.stats.links += sum(len(g.facts) for g in graph)

    async def _graph(
        self, conn: asyncpg.Connection, latest: dict[uuid.UUID, DocumentEvent], wanted: list[uuid.UUID]
    ) -> list[GraphEvent]:
        docs = await repo.load_documents(conn, wanted)
        live = [d for d in wanted if d in docs and docs[d]["deleted_at"] is None]
        spans = await repo.child_spans(conn, live)
        envelopes = await self._envelopes([docs[d] for d in live])
        texts = await self._texts(conn, live, envelopes)
        graph: list[GraphEvent] = []
        derived: list[tuple[DocInfo, list[ExtractedLink], list[StructuredClaim], ChangeEnvelope | None]] = []
        for d in wanted:
            if d not in docs:
                continue
            info = _info(docs[d], latest[d])
            if docs[d]["deleted_at"] is not None:
                graph.append(deleted_event(info))
                continue
            links, claims = await self._extract(conn, info, docs[d], texts[d] or "", envelopes.get(d))
            derived.append((info, links, claims, envelopes.get(d)))
        resolved = await self._resolve(conn, derived)
        for info, links, claims, env in derived:
            graph.append(
                assemble(
                    info,
                    links=links,
                    claims=claims,
                    resolved=resolved.get(info.workspace, {}),
                    chunks=ChunkIndex(spans.get(info.id, [])),
                    envelope=env,
                )
            )
        return graph

    @staticmethod
    async def _texts(
        conn: asyncpg.Connection, live: list[uuid.UUID], envelopes: dict[uuid.UUID, ChangeEnvelope | None]
    ) -> dict[uuid.UUID, str | None]:
        """The archived envelope's text, else the document's chunk text."""
        texts: dict[uuid.UUID, str | None] = {}
        for d in live:
            env = envelopes[d]
            texts[d] = env.document.text if env is not None and env.document is not None else None
            if texts[d] is None:
                texts[d] = await repo.document_text(conn, d)
        return texts

    async def _extract(
        self,
        conn: asyncpg.Connection,
        info: DocInfo,
        row: asyncpg.Record,
        text: str,
        env: ChangeEnvelope | None,
    ) -> tuple[list[ExtractedLink], list[StructuredClaim]]:
        links = extract_links(text, registry=self.registry, document=document_ref(info))
        if info.kind == "meeting":
            links += attendance_links(
                text,
                meeting_ref(info),
                registry=self.registry,
                participants=participant_ids(env, HERB_EID_NAMESPACE),
            )
        if self.llm is not None and text.strip():
            links += await self.llm.extract(conn, info.workspace, text)
        fields = json.loads(row["structured_fields"] or "{}")
        claims = structured_claims(fields, self.registry) if fields else []
        if claims and info.author_person_id is None:
            raise UnresolvedAuthorError(
                "structured_fields need an author that resolves to a person", document_id=str(info.id)
            )
        return dedup_links(links), claims

    @staticmethod
    async def _resolve(
        conn: asyncpg.Connection,
        derived: Sequence[tuple[DocInfo, list[ExtractedLink], list[StructuredClaim], ChangeEnvelope | None]],
    ) -> dict[str, dict[tuple[str, str], uuid.UUID]]:
        """Identity keys of mentioned people -> person ids, one query per workspace."""
        keys: dict[str, set[tuple[str, str]]] = {}
        for info, links, claims, _ in derived:
            ws = keys.setdefault(info.workspace, set())
            ws |= {
                ref.identity
                for link in links
                for ref in (link.subject, link.object)
                if ref is not None and ref.type == "person" and ref.identity is not None
            }
            ws |= {c.object.identity for c in claims if c.object is not None and c.object.identity is not None}
        return {ws: await resolve_person_keys(conn, ws, k) for ws, k in keys.items()}

    async def _envelopes(self, rows: Sequence[asyncpg.Record]) -> dict[uuid.UUID, ChangeEnvelope | None]:
        """Archived envelopes (``<object>#<line>`` keys): each batch object is fetched once, a few cached."""
        objects = sorted({r["blob_key"].partition("#")[0] for r in rows if r["blob_key"]})
        sem = asyncio.Semaphore(BLOB_CONCURRENCY)

        async def fetch(key: str) -> None:
            if key not in self._objects:
                async with sem:  # ObjectStoreError is transient: retried, then dead-lettered
                    self._objects[key] = (await self.store.get(key)).split(b"\n")

        await asyncio.gather(*(fetch(k) for k in objects))
        out: dict[uuid.UUID, ChangeEnvelope | None] = {}
        for r in rows:
            out[r["id"]] = None
            if r["blob_key"]:
                key, _, line = r["blob_key"].partition("#")
                try:
                    out[r["id"]] = ChangeEnvelope.model_validate_json(self._objects[key][int(line or 0)])
                except (ValidationError, IndexError, ValueError):
                    log.warning("archived envelope %s unreadable; using the chunk text", r["blob_key"])
        while len(self._objects) > OBJECT_CACHE:
            self._objects.pop(next(iter(self._objects)))
        return out


def _info(row: asyncpg.Record, ev: DocumentEvent) -> DocInfo:
    return DocInfo(
        id=row["id"],
        workspace=row["workspace"],
        key=f"{row['workspace']}/{row['source_system']}/{row['external_id']}",
        kind=row["kind"],
        title=row["title"],
        version=row["current_version"],
        event_time=row["event_time"],
        author_person_id=row["author_person_id"],
        participant_ids=tuple(ev.participant_person_ids),
    )
