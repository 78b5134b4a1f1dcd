"""The named steps of applying one ingest batch (:meth:`ingest.handler.IngestHandler._apply`), in order: claim
the envelopes, leave out purged documents, apply each envelope to its document's state, save states and versions,
plan and write the chunks, re-index followers, record participants, classify each document's change."""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass, field, replace

import asyncpg

from ingest import context as index_context
from ingest import repository as repo
from ingest.apply import DocState, Outcome, apply_envelope
from ingest.archive import batch_key, line_key
from ingest.chunking import ChunkPlan, plan_chunks
from ingest.people import PersonInput, person_input, replace_alias_sources, resolve_people
from schemas.envelope import ChangeEnvelope
from schemas.events import DocumentChange
from services.chunk_embedding import carry_over, embedding_hash
from services.errors import IdempotencyConflictError
from services.governance.acl_history import record_acl_states
from services.governance.purged import is_purged, purged_through
from services.idempotency import claim_envelopes
from services.ids import chunk_id
from services.kafka.records import Record
from services.replaying import REPLAYING
from services.unit_of_work import Claim

log = logging.getLogger("orgmem.ingest")
PENDING_BLOB = ""  # replaced by assign_archive once the batch is applied

Touched = dict[uuid.UUID, tuple[DocState, DocumentChange]]
Planned = dict[uuid.UUID, tuple[str, list[ChunkPlan]]]
ContentDocs = dict[uuid.UUID, tuple[Outcome, int]]
"""The last content change of each document in the batch, with its envelope's index in ``new``."""
Roles = dict[int, list[tuple[uuid.UUID, str]]]
Keys = dict[int, list[tuple[str, str]]]


@dataclass(frozen=True, slots=True)
class Parsed:
    record: Record
    env: ChangeEnvelope
    digest: bytes
    doc_id: uuid.UUID  # document_id(env.key), computed once


@dataclass(slots=True)
class Written:
    """What ``_apply`` wrote for the documents it re-chunked, so ``_events`` need not read it back: their child
    chunks still waiting for a vector (ordinal order) and their participants (person id order)."""

    pending: dict[uuid.UUID, list[uuid.UUID]] = field(default_factory=dict)
    participants: dict[uuid.UUID, list[uuid.UUID]] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Applied:
    touched: Touched
    written: Written
    archives: dict[str, list[Parsed]]


async def claim(conn: asyncpg.Connection, parsed: list[Parsed]) -> Claim[Parsed]:
    """Claim the envelope ids with their content digests (``services.idempotency``). ``fresh``: the envelopes to
    apply — claimed now, the first record of each id; ``refused``: an id already bound to other content."""
    fresh, bound = await claim_envelopes(conn, [(str(p.env.envelope_id), p.digest) for p in parsed])
    new: list[Parsed] = []
    conflicts: list[Parsed] = []
    taken: set[str] = set()  # an id is applied once per batch, by its first record
    for p in parsed:
        eid = str(p.env.envelope_id)
        if bound.get(eid, p.digest) != p.digest:
            conflicts.append(p)
        elif eid in fresh and eid not in taken:
            taken.add(eid)
            new.append(p)
    refused = {id(p) for p in conflicts}
    return Claim([p for p in parsed if id(p) not in refused], new, [(p, _conflict(p)) for p in conflicts])


def _conflict(p: Parsed) -> IdempotencyConflictError:
    return IdempotencyConflictError(
        "envelope_id was already used for different content", envelope_id=str(p.env.envelope_id)
    )


async def drop_purged(conn: asyncpg.Connection, new: list[Parsed]) -> list[Parsed]:
    """Retention purged these documents: a replayed (not newer) envelope stays out."""
    gone = await purged_through(conn, list({p.doc_id for p in new}))
    if not gone:
        return new
    kept = [p for p in new if not is_purged(gone, p.doc_id, p.env.event_time)]
    if len(kept) < len(new):
        log.info("skipped %d envelope(s) of documents purged by retention", len(new) - len(kept))
    return kept


def redelivered(touched_ids: list[uuid.UUID], states: dict[uuid.UUID, DocState]) -> Touched:
    """Redeliveries re-emit the current state of every document the batch names."""
    touched: Touched = {}
    for doc_id in touched_ids:
        if doc_id in states:
            s = states[doc_id]
            touched[doc_id] = (s, DocumentChange.DELETED if s.deleted_at else DocumentChange.CHANGED)
    return touched


async def resolve_people_of(conn: asyncpg.Connection, new: list[Parsed]) -> tuple[Roles, dict[int, uuid.UUID], Keys]:
    """Authors and participants of the new envelopes -> person ids, one round trip per workspace; and the
    identity keys (namespace, value) each envelope carried."""
    slots: dict[str, list[tuple[int, str, PersonInput]]] = {}
    for i, p in enumerate(new):
        people = [(p.env.author, "author")] if p.env.author else []
        people += [(part, part.role) for part in p.env.participants]
        for person, role in people:
            if pi := person_input(person):
                slots.setdefault(p.env.workspace, []).append((i, role, pi))
    roles: Roles = {}
    authors: dict[int, uuid.UUID] = {}
    keys: Keys = {}
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


def apply_all(
    new: list[Parsed], states: dict[uuid.UUID, DocState], authors: dict[int, uuid.UUID]
) -> tuple[list[Outcome], dict[uuid.UUID, DocState]]:
    """Each new envelope applied in order to its document's state: the outcomes and the states after them."""
    after = dict(states)
    outcomes: list[Outcome] = []
    for i, p in enumerate(new):
        outcome = apply_envelope(
            p.env, after.get(p.doc_id), p.doc_id, author_person_id=authors.get(i), blob_key=PENDING_BLOB
        )
        after[p.doc_id] = outcome.after
        outcomes.append(outcome)
    return outcomes, after


def assign_archive(
    new: list[Parsed], outcomes: list[Outcome], states: dict[uuid.UUID, DocState]
) -> dict[str, list[Parsed]]:
    """Decide which envelopes to archive and give their versions ``<object>#<line>`` blob keys.

    Object keys are unique per attempt, so deleting them after a rollback never touches an object a
    committed row references. A replay archives only envelopes that produced a new version.
    """
    replaying = REPLAYING.get()
    archives: dict[str, list[Parsed]] = {}
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


def content_changes(outcomes: list[Outcome]) -> ContentDocs:
    content_docs: ContentDocs = {}
    for i, o in enumerate(outcomes):
        if o.content_changed:
            content_docs[o.after.id] = (o, i)
    return content_docs


async def save_states(conn: asyncpg.Connection, outcomes: list[Outcome], final: dict[uuid.UUID, DocState]) -> None:
    """Document states, their ACL history and the versions the content changes made."""
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


def plan(content_docs: ContentDocs, final: dict[uuid.UUID, DocState]) -> Planned:
    """The chunk plan of every changed document that is not deleted."""
    planned: Planned = {}
    for doc_id, (o, _) in content_docs.items():
        s = final[doc_id]
        if s.deleted_at is None:
            planned[doc_id] = (s.kind, plan_chunks(o.envelope.document.text if o.envelope.document else ""))
    return planned


def chunk_rows(
    planned: Planned,
    final: dict[uuid.UUID, DocState],
    contexts: dict[tuple[uuid.UUID, int], str | None],
) -> tuple[list[tuple[object, ...]], dict[uuid.UUID, list[uuid.UUID]]]:
    """The chunk rows of the planned documents, and each one's child chunk ids in ordinal order."""
    rows: list[tuple[object, ...]] = []
    children: dict[uuid.UUID, list[uuid.UUID]] = {}
    for doc_id, (_, plans) in planned.items():
        s = final[doc_id]
        ids = {pl.ordinal: chunk_id(doc_id, s.current_version, pl.ordinal) for pl in plans}
        children[doc_id] = [ids[pl.ordinal] for pl in sorted(plans, key=lambda p: p.ordinal) if not pl.is_parent]
        title = s.index_title
        for pl in plans:
            ctx = None if pl.is_parent else contexts[(doc_id, pl.ordinal)]
            hashed = pl.content_hash if pl.is_parent else embedding_hash(title, ctx, pl.text)
            parent = None if pl.parent_ordinal is None else ids[pl.parent_ordinal]
            rows.append(
                (
                    *(ids[pl.ordinal], doc_id, parent, pl.is_parent, pl.ordinal, pl.start, pl.end),
                    *(pl.text, hashed, ctx, title),
                )
            )
    return rows, children


async def write_chunks(
    conn: asyncpg.Connection,
    planned: Planned,
    final: dict[uuid.UUID, DocState],
    content_docs: ContentDocs,
    model: str,
) -> dict[uuid.UUID, list[uuid.UUID]]:
    """Chunks of changed documents, each written once with its index context (ingest/context.py); returns each
    planned document's new child chunks without a cached vector, in ordinal order."""
    contexts = await index_context.planned_contexts(conn, planned)
    rows, children = chunk_rows(planned, final, contexts)
    carried = await repo.replace_chunks(conn, list(content_docs), rows, model)
    return {doc_id: [c for c in kids if c not in carried] for doc_id, kids in children.items()}


async def reindex_followers(
    conn: asyncpg.Connection,
    content_docs: ContentDocs,
    outcomes: list[Outcome],
    planned: Planned,
    final: dict[uuid.UUID, DocState],
    model: str,
) -> list[uuid.UUID]:
    """Followers of changed messages and of documents whose ACL or tombstone changed are re-indexed; the
    documents not re-chunked get their chunks' access synced. Returns the re-indexed followers."""
    reindexed = [*content_docs, *(o.after.id for o in outcomes if o.acl_changed or o.deleted_now)]
    neighbours = await index_context.refresh(conn, list(dict.fromkeys(reindexed)), settled=planned.keys())
    await carry_over(conn, neighbours, model)
    # chunks inserted above already carry their document's access; the others follow it here
    await repo.sync_chunk_access(conn, [s for s in final.values() if s.id not in planned])
    return list(neighbours)


async def record_people(
    conn: asyncpg.Connection, content_docs: ContentDocs, roles: Roles, keys: Keys
) -> dict[uuid.UUID, list[uuid.UUID]]:
    """Participants and alias sources of the changed documents; returns their participants as
    ``participant_ids`` reads them (one entry per (person, role) row, person id order)."""
    part_rows = list(
        dict.fromkeys((doc_id, pid, role) for doc_id, (_, i) in content_docs.items() for pid, role in roles.get(i, []))
    )
    await repo.replace_participants(conn, list(content_docs), part_rows)
    # the identity keys each document carried: the sources of those aliases (services/sources.py)
    alias_rows = [(o.envelope.workspace, *k, d) for d, (o, i) in content_docs.items() for k in keys.get(i, [])]
    await replace_alias_sources(conn, list(content_docs), alias_rows)
    participants: dict[uuid.UUID, list[uuid.UUID]] = {doc_id: [] for doc_id in content_docs}
    for doc_id, pid, _ in part_rows:
        participants[doc_id].append(pid)
    for pids in participants.values():
        pids.sort()
    return participants


def classify(
    outcomes: list[Outcome], final: dict[uuid.UUID, DocState], content_docs: ContentDocs, touched: Touched
) -> Touched:
    """Each applied document's change, over what the redelivered records announced (``touched``)."""
    out = dict(touched)
    for o in outcomes:
        s = final[o.after.id]
        if s.deleted_at is not None:
            change = DocumentChange.DELETED
        elif o.content_changed or o.after.id in content_docs:
            change = DocumentChange.CHANGED
        elif o.acl_changed:
            change = DocumentChange.ACL_CHANGED
        else:
            change = out.get(s.id, (s, DocumentChange.CHANGED))[1]
        prev = out.get(s.id)
        if prev and prev[1] is DocumentChange.CHANGED and change is DocumentChange.ACL_CHANGED:
            change = DocumentChange.CHANGED
        out[s.id] = (s, change)
    return out
