"""Ingest handler: one batch of envelope records -> one Postgres transaction -> archived blobs -> events.

Order (docs/architecture.md "Delivery" and "Write-path rules"):
1. parse/validate every record; invalid ones are dead-lettered with the field at fault;
2. in ONE transaction: claim the envelope ids in ``processed_events`` with their content digest
   (redeliveries are skipped; an id re-used with different content is dead-lettered after commit,
   ``IdempotencyConflictError`` — the same whether the two arrive in one batch or two),
   apply the envelopes to the documents in log order, rebuild chunks of changed documents, then
   write the raw envelope bytes to the object store; commit. A blob failure rolls the transaction
   back; if the commit fails after blobs were written they are deleted (best effort);
3. after commit, (re-)emit ``om.documents.v1`` and ``om.chunks.v1`` for every document the batch
   touched — also for redelivered duplicates, so a crash between commit and publish loses nothing.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import asyncpg

from ingest import context as index_context
from ingest import repository as repo
from ingest.apply import DocState, Outcome, apply_envelope
from ingest.archive import batch_key, encode_batch, line_key
from ingest.chunking import ChunkPlan, content_hash, plan_chunks
from ingest.membership import apply_memberships, is_membership
from ingest.people import PersonInput, person_input, replace_alias_sources, resolve_people
from schemas.envelope import ChangeEnvelope, envelope_from_json
from schemas.events import ChunksToEmbed, DocumentChange, DocumentEvent
from schemas.validation import Rejected
from services import procedures
from services.embedding_input import embedding_input
from services.errors import IdempotencyConflictError, InvalidPayloadError, ObjectStoreError, UnresolvedAuthorError
from services.governance.acl_history import record_acl_states
from services.governance.purged import is_purged, purged_through
from services.idempotency import claim_envelopes, envelope_digest
from services.ids import chunk_id, document_id, event_id
from services.kafka.app import BrokerPublisher
from services.kafka.decode import check_headers
from services.kafka.delivery import DeadLetters
from services.kafka.records import Record
from services.objectstore.port import ObjectStore
from services.replaying import REPLAYING

log = logging.getLogger("orgmem.ingest")
PENDING_BLOB = ""  # replaced by _assign_archive once the batch is applied


def parse_envelope(record: Record) -> ChangeEnvelope:
    """Validate one record with the same function HTTP ingress uses (``schemas.envelope.envelope_from_json``);
    ``InvalidPayloadError`` / ``UnresolvedAuthorError`` name the field at fault."""
    check_headers(record)
    try:
        return envelope_from_json(record.value)
    except Rejected as exc:
        if exc.type == "unresolved_author":
            raise UnresolvedAuthorError(str(exc), field=exc.field, envelope_id=_envelope_id(record)) from None
        raise InvalidPayloadError(str(exc), field=exc.field, errors=len(exc.errors)) from None


def _envelope_id(record: Record) -> str:
    return record.header("x-envelope-id") or ""


@dataclass(slots=True)
class _Written:
    """What ``_apply`` wrote for the documents it re-chunked, so ``_events`` need not read it back: their child
    chunks still waiting for a vector (ordinal order) and their participants (person id order)."""

    pending: dict[uuid.UUID, list[uuid.UUID]] = field(default_factory=dict)
    participants: dict[uuid.UUID, list[uuid.UUID]] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class _Parsed:
    record: Record
    env: ChangeEnvelope
    digest: bytes
    doc_id: uuid.UUID  # document_id(env.key), computed once


class IngestHandler:
    def __init__(
        self,
        *,
        pool: asyncpg.Pool,
        store: ObjectStore,
        publisher: BrokerPublisher,
        dead_letters: DeadLetters,
        documents_topic: str,
        chunks_topic: str,
        embedding_model: str,
    ) -> None:
        self.pool = pool
        self.store = store
        self.publisher = publisher
        self.dead_letters = dead_letters
        self.documents_topic = documents_topic
        self.chunks_topic = chunks_topic
        self.embedding_model = embedding_model

    async def __call__(self, records: Sequence[Record]) -> None:
        parsed: list[_Parsed] = []
        for record in records:
            try:
                env = parse_envelope(record)
                parsed.append(_Parsed(record, env, envelope_digest(env), document_id(env.key)))
            except (InvalidPayloadError, UnresolvedAuthorError) as exc:  # one record's fault: its dead letter
                await self.dead_letters.send(record, exc)
        if not parsed:
            return
        written: list[str] = []
        conflicts: list[_Parsed] = []
        try:
            async with self.pool.acquire() as conn, conn.transaction():
                known = _Written()
                touched = await self._apply(conn, parsed, written, conflicts, known)
                events = await self._events(conn, touched, known)
        except BaseException:
            if written:
                await self._delete_blobs(written)
            raise
        for p in conflicts:  # after commit: a crash before this re-finds the conflict on redelivery
            await self.dead_letters.send(
                p.record,
                IdempotencyConflictError(
                    "envelope_id was already used for different content", envelope_id=str(p.env.envelope_id)
                ),
            )
        await self.publisher.send_many(events)

    async def _apply(
        self,
        conn: asyncpg.Connection,
        parsed: list[_Parsed],
        written: list[str],
        conflicts: list[_Parsed],
        known: _Written,
    ) -> dict[uuid.UUID, tuple[DocState, DocumentChange]]:
        """Apply the batch; ``known`` receives what it wrote for the documents it re-chunked."""
        fresh, bound = await claim_envelopes(conn, [(str(p.env.envelope_id), p.digest) for p in parsed])
        new: list[_Parsed] = []
        taken: set[str] = set()  # an id is applied once per batch, by its first record
        for p in parsed:
            eid = str(p.env.envelope_id)
            if bound.get(eid, p.digest) != p.digest:
                conflicts.append(p)
            elif eid in fresh and eid not in taken:
                taken.add(eid)
                new.append(p)
        refused = {id(p) for p in conflicts}
        parsed = [p for p in parsed if id(p) not in refused]
        # org directory changes apply in the same transaction (ingest/membership.py); they touch no document
        await apply_memberships(conn, [p.env for p in new if is_membership(p.env)])
        parsed = [p for p in parsed if not is_membership(p.env)]
        new = [p for p in new if not is_membership(p.env)]
        gone = await purged_through(conn, list({p.doc_id for p in new}))
        if gone:  # retention purged these documents: a replayed (not newer) envelope stays out
            kept = [p for p in new if not is_purged(gone, p.doc_id, p.env.event_time)]
            if len(kept) < len(new):
                log.info("skipped %d envelope(s) of documents purged by retention", len(new) - len(kept))
            new = kept
        touched_ids = list(dict.fromkeys(p.doc_id for p in parsed))
        states = await repo.load_states(conn, touched_ids)
        touched: dict[uuid.UUID, tuple[DocState, DocumentChange]] = {}
        for doc_id in touched_ids:  # redeliveries re-emit the current state
            if doc_id in states:
                s = states[doc_id]
                touched[doc_id] = (s, DocumentChange.DELETED if s.deleted_at else DocumentChange.CHANGED)
        if not new:
            return touched

        roles, authors, keys = await self._resolve_people(conn, new)

        outcomes: list[Outcome] = []
        for i, p in enumerate(new):
            doc_id = p.doc_id
            outcome = apply_envelope(
                p.env, states.get(doc_id), doc_id, author_person_id=authors.get(i), blob_key=PENDING_BLOB
            )
            states[doc_id] = outcome.after
            outcomes.append(outcome)
        archives = self._assign_archive(new, outcomes, states)

        content_docs: dict[uuid.UUID, tuple[Outcome, int]] = {}  # last content change per doc
        for i, o in enumerate(outcomes):
            if o.content_changed:
                content_docs[o.after.id] = (o, i)
        final = {o.after.id: states[o.after.id] for o in outcomes}
        await repo.save_states(conn, list(final.values()))
        await record_acl_states(
            conn, [(s.id, s.principals, s.acl_event_time, s.event_time, s.deleted_at) for s in final.values()]
        )
        await repo.insert_versions(
            conn,
            [
                (
                    o.after.id,
                    o.after.current_version,
                    o.envelope.envelope_id,
                    o.envelope.op.value,
                    o.envelope.event_time,
                    o.after.content_hash,
                    o.after.blob_key,
                )
                for o in outcomes
                if o.content_changed
            ],
        )
        # chunks of changed documents, each written once with its index context (ingest/context.py)
        planned: dict[uuid.UUID, tuple[str, list[ChunkPlan]]] = {}
        for doc_id, (o, _) in content_docs.items():
            s = final[doc_id]
            if s.deleted_at is None:
                planned[doc_id] = (s.kind, plan_chunks(o.envelope.document.text if o.envelope.document else ""))
        contexts = await index_context.planned_contexts(conn, planned)
        chunk_rows = []
        children: dict[uuid.UUID, list[uuid.UUID]] = {}
        for doc_id, (_, plans) in planned.items():
            s = final[doc_id]
            ids = {pl.ordinal: chunk_id(doc_id, s.current_version, pl.ordinal) for pl in plans}
            children[doc_id] = [ids[pl.ordinal] for pl in sorted(plans, key=lambda p: p.ordinal) if not pl.is_parent]
            title = s.index_title
            for pl in plans:
                ctx = None if pl.is_parent else contexts[(doc_id, pl.ordinal)]
                hashed = (
                    pl.content_hash
                    if pl.is_parent
                    else content_hash(embedding_input(title, index_context.indexed_text(ctx, pl.text)))
                )
                parent = None if pl.parent_ordinal is None else ids[pl.parent_ordinal]
                chunk_rows.append(
                    (
                        *(ids[pl.ordinal], doc_id, parent, pl.is_parent, pl.ordinal, pl.start, pl.end),
                        *(pl.text, hashed, ctx, title),
                    )
                )
        carried = await repo.replace_chunks(conn, list(content_docs), chunk_rows, self.embedding_model)
        # followers of changed messages and documents whose ACL or tombstone changed are re-indexed here
        reindexed = [*content_docs, *(o.after.id for o in outcomes if o.acl_changed or o.deleted_now)]
        neighbours = await index_context.refresh(
            conn, list(dict.fromkeys(reindexed)), embedding_input, settled=planned.keys()
        )
        await repo.carry_over_embeddings(conn, neighbours, self.embedding_model)
        # chunks inserted above already carry their document's access; the others follow it here
        await repo.sync_chunk_access(conn, [s for s in final.values() if s.id not in planned])
        for doc_id, kids in children.items():  # new children without a cached vector, in ordinal order
            known.pending[doc_id] = [c for c in kids if c not in carried]
        part_rows = list(
            dict.fromkeys(
                (doc_id, pid, role) for doc_id, (_, i) in content_docs.items() for pid, role in roles.get(i, [])
            )
        )
        await repo.replace_participants(conn, list(content_docs), part_rows)
        # the identity keys each document carried: the sources of those aliases (services/sources.py)
        alias_rows = [(o.envelope.workspace, *k, d) for d, (o, i) in content_docs.items() for k in keys.get(i, [])]
        await replace_alias_sources(conn, list(content_docs), alias_rows)
        for doc_id in content_docs:  # as participant_ids reads them: one entry per (person, role) row
            known.participants[doc_id] = []
        for doc_id, pid, _ in part_rows:
            known.participants[doc_id].append(pid)
        for pids in known.participants.values():
            pids.sort()
        await procedures.record_versions(
            conn,
            [
                (o.envelope, o.after.id, o.after.current_version, o.deleted_now)
                for o in outcomes
                if o.content_changed or o.deleted_now
            ],
        )
        for o in outcomes:
            s = final[o.after.id]
            if s.deleted_at is not None:
                change = DocumentChange.DELETED
            elif o.content_changed or o.after.id in content_docs:
                change = DocumentChange.CHANGED
            elif o.acl_changed:
                change = DocumentChange.ACL_CHANGED
            else:
                change = touched.get(s.id, (s, DocumentChange.CHANGED))[1]
            prev = touched.get(s.id)
            if prev and prev[1] is DocumentChange.CHANGED and change is DocumentChange.ACL_CHANGED:
                change = DocumentChange.CHANGED
            touched[s.id] = (s, change)

        for doc_id, state in (await repo.load_states(conn, [n for n in neighbours if n not in touched])).items():
            touched[doc_id] = (state, DocumentChange.CHANGED)  # re-indexed follower: announce its chunks

        # Archive the raw envelopes last, still inside the transaction (Postgres first, then object store):
        # one object per workspace; a failure raises and rolls the whole batch back.
        for key, items in archives.items():
            await self.store.put(
                key, encode_batch([p.record.value for p in items]), content_type="application/x-ndjson"
            )
            written.append(key)
        return touched

    @staticmethod
    def _assign_archive(
        new: list[_Parsed], outcomes: list[Outcome], states: dict[uuid.UUID, DocState]
    ) -> dict[str, list[_Parsed]]:
        """Decide which envelopes to archive and give their versions ``<object>#<line>`` blob keys.

        Object keys are unique per attempt, so deleting them after a rollback never touches an object a
        committed row references. A replay archives only envelopes that produced a new version.
        """
        replaying = REPLAYING.get()
        archives: dict[str, list[_Parsed]] = {}
        keys: dict[str, str] = {}
        for p, o in zip(new, outcomes, strict=True):
            if replaying and not o.content_changed:
                continue
            ws = p.env.workspace
            key = keys.setdefault(ws, batch_key(ws, [str(uuid.uuid4())]))
            items = archives.setdefault(key, [])
            blob = line_key(key, len(items))
            items.append(p)
            if o.content_changed:
                before, o.after = o.after, replace(o.after, blob_key=blob)
                current = states[before.id]
                if current is before:  # the document's last change in this batch: one copy, not two
                    states[before.id] = o.after
                elif current.current_version == before.current_version:
                    states[before.id] = replace(current, blob_key=blob)
        return archives

    async def _resolve_people(
        self, conn: asyncpg.Connection, new: list[_Parsed]
    ) -> tuple[dict[int, list[tuple[uuid.UUID, str]]], dict[int, uuid.UUID], dict[int, list[tuple[str, str]]]]:
        """Authors and participants of the new envelopes -> person ids, one round trip per workspace; and the
        identity keys (namespace, value) each envelope carried."""
        slots: dict[str, list[tuple[int, str, PersonInput]]] = {}
        for i, p in enumerate(new):
            people = [(p.env.author, "author")] if p.env.author else []
            people += [(part, part.role) for part in p.env.participants]
            for person, role in people:
                if pi := person_input(person):
                    slots.setdefault(p.env.workspace, []).append((i, role, pi))
        roles: dict[int, list[tuple[uuid.UUID, str]]] = {}
        authors: dict[int, uuid.UUID] = {}
        keys: dict[int, list[tuple[str, str]]] = {}
        for workspace, items in slots.items():
            system = new[items[0][0]].env.source.system
            ids = await resolve_people(conn, workspace, [pi for _, _, pi in items], system)
            for (i, role, _), pid in zip(items, ids, strict=True):
                roles.setdefault(i, []).append((pid, role))
                if role == "author":
                    authors[i] = pid
            for i, _, pi in items:
                keys.setdefault(i, []).extend((ns, v) for ns, v, _ in pi.keys)
        return roles, authors, keys

    async def _events(
        self,
        conn: asyncpg.Connection,
        touched: dict[uuid.UUID, tuple[DocState, DocumentChange]],
        known: _Written,
    ) -> list[tuple[str, bytes, bytes | None, dict[str, str]]]:
        """``known``: what ``_apply`` wrote for the documents it re-chunked; the rest is read here."""
        if not touched:
            return []
        ids = list(touched)
        pending = dict(known.pending)
        pending.update(await repo.pending_chunks(conn, [d for d in ids if d not in pending], self.embedding_model))
        participants = dict(known.participants)
        unknown = [d for d in ids if d not in participants]
        participants.update(await repo.participant_ids(conn, unknown) if unknown else {})
        events: list[tuple[str, bytes, bytes | None, dict[str, str]]] = []
        for doc_id, (s, change) in touched.items():
            key = f"{s.workspace}/{s.source_system}/{s.external_id}".encode()
            ev = DocumentEvent(
                event_id=event_id(doc_id, s.current_version, change.value, s.acl_event_time, s.deleted_at),
                change=change,
                workspace=s.workspace,
                document_id=doc_id,
                key=key.decode(),
                version=s.current_version,
                kind=s.kind,
                event_time=s.event_time,
                author_person_id=s.author_person_id,
                participant_person_ids=participants.get(doc_id, []),
                principals=list(s.principals),
            )
            events.append((self.documents_topic, ev.model_dump_json().encode(), key, {"x-event-type": "document"}))
            if pending.get(doc_id) and s.deleted_at is None:
                msg = ChunksToEmbed(
                    workspace=s.workspace,
                    document_id=doc_id,
                    version=s.current_version,
                    chunk_ids=pending[doc_id],
                    embedding_model=self.embedding_model,
                )
                events.append((self.chunks_topic, msg.model_dump_json().encode(), key, {"x-event-type": "chunks"}))
        return events

    async def _delete_blobs(self, keys: list[str]) -> None:
        for key in keys:
            try:
                await self.store.delete(key)
            except ObjectStoreError as exc:  # best effort: an orphan blob is harmless, a lost row is not
                log.warning("could not delete orphan blob %s after rollback: %s", key, exc)
