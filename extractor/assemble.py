"""Pure assembly of one document's ``GraphEvent`` from extracted links and structured claims.

Rules:
- The document itself is the entity ``document`` with the document's id; a meeting transcript also
  describes a ``meeting`` entity (id derived from the document id) that attendance links point at.
- Person refs with an identity carry the person id the extractor resolved through ``person_aliases``
  (None = unknown yet; the conflicts stage creates or resolves it). Bare-name persons carry none.
- Structured-field claims have the author as subject and span (0, 0) (the whole envelope).
- Each fact's evidence names the child chunk containing its span start (None when no child covers it).
- ``event_id`` is derived from document, version, deletion and extractor version: the same document
  state always yields the same event (a replay is a duplicate the conflicts stage skips).
"""

from __future__ import annotations

import uuid
from bisect import bisect_right
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from extractor.links import EntityRef, ExtractedLink
from extractor.structured import StructuredClaim
from schemas.envelope import ChangeEnvelope
from schemas.graph import (
    Evidence,
    ExtractedEntity,
    ExtractedFact,
    GraphEvent,
    IdentityKey,
    PersonIdentities,
    TimeGrain,
)
from services.ids import event_id, meeting_uuid

EXTRACTOR = "patterns"
EXTRACTOR_VERSION = "1"
DOCUMENT_NAMESPACE = "document"


@dataclass(frozen=True, slots=True)
class DocInfo:
    id: uuid.UUID
    workspace: str
    key: str
    kind: str
    title: str | None
    version: int
    event_time: datetime
    author_person_id: uuid.UUID | None
    participant_ids: tuple[uuid.UUID, ...] = ()


def document_ref(doc: DocInfo) -> EntityRef:
    return EntityRef("document", doc.title or doc.key, (DOCUMENT_NAMESPACE, str(doc.id)))


def meeting_ref(doc: DocInfo) -> EntityRef:
    return EntityRef("meeting", doc.title or doc.key, ("meeting", str(meeting_uuid(doc.id))))


def graph_event_id(doc_id: uuid.UUID, version: int, deleted: bool, extractor: str, extractor_version: str) -> uuid.UUID:
    return event_id("graph", doc_id, version, deleted, extractor, extractor_version)


class ChunkIndex:
    """Child chunk spans of one document -> the chunk containing an offset."""

    def __init__(self, spans: Sequence[tuple[int, int, uuid.UUID]]) -> None:
        self._spans = sorted(spans, key=lambda s: (s[0], s[1]))
        self._starts = [s[0] for s in self._spans]

    def chunk_at(self, offset: int) -> uuid.UUID | None:
        i = bisect_right(self._starts, offset) - 1
        for j in range(i, max(-1, i - 8), -1):  # children overlap a little: look a few back
            start, end, cid = self._spans[j]
            if start <= offset < end:
                return cid
        return None


def identity_groups(env: ChangeEnvelope | None, author_person_id: uuid.UUID | None) -> list[PersonIdentities]:
    """Every envelope person's keys (author first) — the input of identity merges."""
    if env is None:
        return []
    out: list[PersonIdentities] = []
    people = ([(env.author, author_person_id)] if env.author else []) + [(p, None) for p in env.participants]
    for person, pid in people:
        keys = [IdentityKey(namespace="email", value=person.email.lower())] if person.email else []
        keys += [IdentityKey(namespace=i.namespace, value=i.value, verified=i.verified) for i in person.identities]
        if keys:
            out.append(PersonIdentities(person_id=pid, display_name=person.display_name, keys=keys))
    return out


def participant_ids(env: ChangeEnvelope | None, namespace: str) -> list[str] | None:
    """Participants' ids in ``namespace`` in envelope order (None unless every participant has one)."""
    if env is None or not env.participants:
        return None
    ids = [next((i.value for i in p.identities if i.namespace == namespace), None) for p in env.participants]
    return [i for i in ids if i is not None] if all(ids) else None


class _Entities:
    def __init__(self, doc: DocInfo, resolved: Mapping[tuple[str, str], uuid.UUID]) -> None:
        self.doc = doc
        self.resolved = resolved
        self.items: list[ExtractedEntity] = []
        self._index: dict[tuple[str, str, str], int] = {}

    def ref(self, entity: EntityRef, person_id: uuid.UUID | None = None) -> int:
        key = entity.key
        if key in self._index:
            return self._index[key]
        entity_id: uuid.UUID | None = None
        identity: IdentityKey | None = None
        if entity.identity is not None:
            ns, value = entity.identity
            if ns in (DOCUMENT_NAMESPACE, "meeting"):
                entity_id = uuid.UUID(value)
            else:
                identity = IdentityKey(namespace=ns, value=value)
                person_id = person_id or self.resolved.get((ns, value))
        name = entity.name if entity.name else (entity.identity[1] if entity.identity else "")
        idx = len(self.items)
        self.items.append(
            ExtractedEntity(
                ref=idx,
                type=entity.type,
                name=name[:500],
                identity=identity,
                person_id=person_id if entity.type == "person" else None,
                entity_id=entity_id,
            )
        )
        self._index[key] = idx
        return idx


def assemble(
    doc: DocInfo,
    *,
    links: Sequence[ExtractedLink],
    claims: Sequence[StructuredClaim],
    resolved: Mapping[tuple[str, str], uuid.UUID],
    chunks: ChunkIndex,
    envelope: ChangeEnvelope | None,
    time_grain: TimeGrain = "day",
    extractor: str = EXTRACTOR,
    extractor_version: str = EXTRACTOR_VERSION,
) -> GraphEvent:
    ents = _Entities(doc, resolved)
    facts: list[ExtractedFact] = []
    for link in links:
        subject = ents.ref(link.subject)
        obj = ents.ref(link.object) if link.object is not None else None
        source = "mention" if link.rule.startswith(("mention", "meeting", "review")) else extractor
        facts.append(
            ExtractedFact(
                subject=subject,
                predicate=link.predicate,
                object=obj,
                value=link.value if obj is None else None,
                confidence=link.confidence,
                rule=link.rule[:64],
                source=source if source != "patterns" else "pattern",
                evidence=Evidence(
                    document_id=doc.id,
                    chunk_id=chunks.chunk_at(link.span[0]),
                    span_start=link.span[0],
                    span_end=link.span[1],
                ),
            )
        )
    if claims:
        author = ents.ref(
            EntityRef("person", f"person:{doc.author_person_id}", ("person_id", str(doc.author_person_id))),
            person_id=doc.author_person_id,
        )
        for claim in claims:
            obj = ents.ref(claim.object) if claim.object is not None else None
            facts.append(
                ExtractedFact(
                    subject=author,
                    predicate=claim.predicate,
                    object=obj,
                    value=claim.value,
                    confidence=1.0,
                    rule=f"structured:{claim.field}"[:64],
                    source="structured",
                    evidence=Evidence(document_id=doc.id),
                )
            )
    context = list(dict.fromkeys([*([doc.author_person_id] if doc.author_person_id else []), *doc.participant_ids]))
    return GraphEvent(
        event_id=graph_event_id(doc.id, doc.version, False, extractor, extractor_version),
        workspace=doc.workspace,
        document_id=doc.id,
        key=doc.key,
        version=doc.version,
        event_time=doc.event_time,
        time_grain=time_grain,
        extractor=extractor,
        extractor_version=extractor_version,
        entities=ents.items,
        facts=facts,
        identities=identity_groups(envelope, doc.author_person_id),
        context_person_ids=context,
    )


def deleted_event(doc: DocInfo, extractor: str = EXTRACTOR, extractor_version: str = EXTRACTOR_VERSION) -> GraphEvent:
    """A tombstone: the conflicts stage drops the document from every evidence list."""
    return GraphEvent(
        event_id=graph_event_id(doc.id, doc.version, True, extractor, extractor_version),
        workspace=doc.workspace,
        document_id=doc.id,
        key=doc.key,
        version=doc.version,
        deleted=True,
        event_time=doc.event_time,
        extractor=extractor,
        extractor_version=extractor_version,
    )
