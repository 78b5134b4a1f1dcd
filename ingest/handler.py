"""Ingest handler: one batch of envelope records -> one Postgres transaction -> archived blobs -> events.

Order (docs/architecture.md "Delivery" and "Write-path rules"; the sequence itself is ``services.unit_of_work``'s,
this module gives it ``parse``, ``claim`` and ``apply``):
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

import asyncpg

from ingest import repository as repo
from ingest import steps
from ingest.apply import DocState
from ingest.archive import encode_batch
from ingest.membership import apply_memberships, is_membership
from ingest.steps import Applied, Parsed, Written
from schemas.envelope import ChangeEnvelope, envelope_from_json
from schemas.events import ChunksToEmbed, DocumentChange, DocumentEvent
from schemas.validation import Rejected
from services import procedures
from services.chunk_embedding import pending_by_document
from services.errors import InvalidPayloadError, ObjectStoreError, UnresolvedAuthorError
from services.idempotency import envelope_digest
from services.ids import document_id, event_id
from services.kafka.app import BrokerPublisher
from services.kafka.decode import check_headers
from services.kafka.delivery import DeadLetters
from services.kafka.records import Record
from services.objectstore.port import ObjectStore
from services.unit_of_work import Claim, Message, Outcome, Transactional

log = logging.getLogger("orgmem.ingest")


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


class IngestHandler(Transactional[Parsed]):
    """The ingest stage's unit of work (``services.unit_of_work``): ``parse`` is the door's validation,
    ``claim`` binds envelope ids to their content, ``apply`` writes the batch and archives its envelopes."""

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
        super().__init__(stage=repo.STAGE, pool=pool, dead_letters=dead_letters, publisher=publisher)
        self.store = store
        self.documents_topic = documents_topic
        self.chunks_topic = chunks_topic
        self.embedding_model = embedding_model

    def parse(self, record: Record) -> Parsed:
        env = parse_envelope(record)
        return Parsed(record, env, envelope_digest(env), document_id(env.key))

    def key(self, item: Parsed) -> str:
        return str(item.env.envelope_id)

    async def claim(self, conn: asyncpg.Connection, items: list[Parsed]) -> Claim[Parsed]:
        return await steps.claim(conn, items)

    async def apply(self, conn: asyncpg.Connection, claim: Claim[Parsed], prepared: None) -> Outcome:
        """Apply, read the events back, archive the raw envelopes last (a failed blob write rolls back)."""
        batch = await self._apply(conn, claim)
        events = await self._events(conn, batch.touched, batch.written)
        written = await self._archive(batch.archives)
        return Outcome(publish=events, undo=(lambda: self._delete_blobs(written)) if written else None)

    async def _apply(self, conn: asyncpg.Connection, claim: Claim[Parsed]) -> Applied:
        """Apply the batch (the named steps of ``ingest/steps.py``); the envelopes are archived by the caller."""
        # org directory changes apply in the same transaction (ingest/membership.py); they touch no document
        await apply_memberships(conn, [p.env for p in claim.fresh if is_membership(p.env)])
        docs = [p for p in claim.items if not is_membership(p.env)]
        new = await steps.drop_purged(conn, [p for p in claim.fresh if not is_membership(p.env)])
        touched_ids = list(dict.fromkeys(p.doc_id for p in docs))
        states = await repo.load_states(conn, touched_ids)
        touched = steps.redelivered(touched_ids, states)
        if not new:
            return Applied(touched, Written(), {})
        roles, authors, keys = await steps.resolve_people_of(conn, new)
        outcomes, states = steps.apply_all(new, states, authors)
        archives = steps.assign_archive(new, outcomes, states)
        content_docs = steps.content_changes(outcomes)
        final = {o.after.id: states[o.after.id] for o in outcomes}
        await steps.save_states(conn, outcomes, final)
        planned = steps.plan(content_docs, final)
        pending = await steps.write_chunks(conn, planned, final, content_docs, self.embedding_model)
        neighbours = await steps.reindex_followers(conn, content_docs, outcomes, planned, final, self.embedding_model)
        participants = await steps.record_people(conn, content_docs, roles, keys)
        await procedures.record_versions(
            conn,
            [
                (o.envelope, o.after.id, o.after.current_version, o.deleted_now)
                for o in outcomes
                if o.content_changed or o.deleted_now
            ],
        )
        touched = steps.classify(outcomes, final, content_docs, touched)
        for doc_id, state in (await repo.load_states(conn, [n for n in neighbours if n not in touched])).items():
            touched[doc_id] = (state, DocumentChange.CHANGED)  # re-indexed follower: announce its chunks
        return Applied(touched, Written(pending, participants), archives)

    async def _archive(self, archives: dict[str, list[Parsed]]) -> list[str]:
        """Archive the raw envelopes last, still inside the transaction (Postgres first, then object store): one
        object per workspace; a failure deletes the objects already written and raises (rolling the batch back)."""
        written: list[str] = []
        try:
            for key, items in archives.items():
                await self.store.put(
                    key, encode_batch([p.record.value for p in items]), content_type="application/x-ndjson"
                )
                written.append(key)
        except BaseException:
            if written:
                await self._delete_blobs(written)
            raise
        return written

    async def _events(
        self,
        conn: asyncpg.Connection,
        touched: dict[uuid.UUID, tuple[DocState, DocumentChange]],
        known: Written,
    ) -> list[Message]:
        """``known``: what ``_apply`` wrote for the documents it re-chunked; the rest is read here."""
        if not touched:
            return []
        ids = list(touched)
        pending = dict(known.pending)
        pending.update(await pending_by_document(conn, [d for d in ids if d not in pending], self.embedding_model))
        participants = dict(known.participants)
        unknown = [d for d in ids if d not in participants]
        participants.update(await repo.participant_ids(conn, unknown) if unknown else {})
        events: list[Message] = []
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
