"""Pure per-document decisions of the ingest stage (no I/O).

Rules (docs/architecture.md "Write-path rules"):
- content: the newest ``event_time`` wins; an older upsert never overwrites newer content; a tombstone
  (``op=delete``) wins over older upserts and loses to newer ones (which revive the document);
- ACL: last-writer-wins on ``acl_event_time`` (the envelope's ``event_time`` when absent), for every op;
- identical content (same hash) under a newer event creates no new version and keeps the chunks;
- a document with no principals is visible to nobody.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from dataclasses import dataclass, field, replace
from datetime import datetime

from schemas.envelope import ChangeEnvelope, Op


@dataclass(frozen=True, slots=True)
class DocState:
    id: uuid.UUID
    workspace: str
    source_system: str
    external_id: str
    kind: str
    title: str | None
    url: str | None
    thread_external_id: str | None
    parent_external_id: str | None
    author_person_id: uuid.UUID | None
    event_time: datetime
    deleted_at: datetime | None
    current_version: int
    content_hash: str | None
    principals: tuple[str, ...]
    acl_event_time: datetime | None
    blob_key: str | None
    structured_fields: str  # JSON text
    author_name: str | None = None  # as the connector sent it (``author.display_name``), resolved or not

    @property
    def has_content(self) -> bool:
        return self.current_version > 0

    @property
    def index_title(self) -> str | None:
        """The title its chunks carry (indexed with weight A, prefixed to the embedding input, shown with the
        passage): the document's title, except a message's "title" that only repeats its thread or channel id
        (what a connector without titles fills in) — an id, not text a question would share."""
        is_id = self.title is not None and self.title in (self.thread_external_id, self.parent_external_id)
        return None if self.kind == "message" and is_id else self.title


@dataclass(slots=True)
class Outcome:
    """What one envelope did to its document."""

    envelope: ChangeEnvelope
    before: DocState | None
    after: DocState
    content_changed: bool = False  # new version: chunks must be rebuilt
    acl_changed: bool = False
    deleted_now: bool = False
    notes: list[str] = field(default_factory=list)


def document_content_hash(env: ChangeEnvelope) -> str:
    d = env.document
    assert d is not None
    parts: list[object] = [d.kind.value, d.title, d.text, d.thread_external_id, d.parent_external_id]
    parts.append(env.structured_fields)
    if d.procedure is not None:  # only then, so hashes of every other document stay as they were
        parts.append(d.procedure.model_dump(mode="json"))
    payload = json.dumps(
        parts,
        sort_keys=True,
        default=str,
    )
    return hashlib.blake2b(payload.encode(), digest_size=16).hexdigest()


def _acl(env: ChangeEnvelope, state: DocState) -> tuple[DocState, bool]:
    acl_time = env.effective_acl_time
    if (
        env.op is Op.UPSERT
        and env.acl.acl_event_time is None
        and state.acl_event_time is not None
        and not env.acl.principals
        and state.principals
    ):
        # An upsert that says nothing about access keeps the current ACL.
        return state, False
    if state.acl_event_time is not None and acl_time < state.acl_event_time:
        return state, False
    principals = tuple(env.acl.principals)
    changed = principals != state.principals
    return replace(state, principals=principals, acl_event_time=acl_time), changed


def empty_state(env: ChangeEnvelope, doc_id: uuid.UUID) -> DocState:
    return DocState(
        id=doc_id,
        workspace=env.workspace,
        source_system=env.source.system,
        external_id=env.source.external_id,
        kind=env.document.kind.value if env.document else "unknown",
        title=None,
        url=env.source.url,
        thread_external_id=None,
        parent_external_id=None,
        author_person_id=None,
        event_time=env.event_time,
        deleted_at=None,
        current_version=0,
        content_hash=None,
        principals=(),
        acl_event_time=None,
        blob_key=None,
        structured_fields="{}",
    )


def apply_envelope(
    env: ChangeEnvelope,
    state: DocState | None,
    doc_id: uuid.UUID,
    *,
    author_person_id: uuid.UUID | None,
    blob_key: str,
) -> Outcome:
    before = state
    cur = state or empty_state(env, doc_id)
    out = Outcome(envelope=env, before=before, after=cur)

    if env.op is Op.ACL:
        cur, out.acl_changed = _acl(env, cur)
        out.after = cur
        return out

    newer_than_content = not cur.has_content or env.event_time >= cur.event_time
    newer_than_tombstone = cur.deleted_at is None or env.event_time > cur.deleted_at

    if env.op is Op.DELETE:
        cur, out.acl_changed = _acl(env, cur) if env.acl.principals else (cur, False)
        if newer_than_content and (cur.deleted_at is None or env.event_time > cur.deleted_at):
            was_live = cur.deleted_at is None and cur.has_content
            cur = replace(cur, deleted_at=env.event_time, event_time=max(env.event_time, cur.event_time))
            out.deleted_now = was_live
        else:
            out.notes.append("delete older than current content: ignored")
        out.after = cur
        return out

    # UPSERT
    assert env.document is not None
    cur, out.acl_changed = _acl(env, cur)
    if not (newer_than_content and newer_than_tombstone):
        out.notes.append("older than stored content or tombstone: content not applied")
        out.after = cur
        return out
    h = document_content_hash(env)
    revived = cur.deleted_at is not None
    d = env.document
    cur = replace(
        cur,
        kind=d.kind.value,
        title=d.title,
        url=env.source.url,
        thread_external_id=d.thread_external_id,
        parent_external_id=d.parent_external_id,
        author_person_id=author_person_id,
        author_name=env.author.display_name if env.author else None,
        event_time=env.event_time,
        deleted_at=None,
        structured_fields=json.dumps(env.structured_fields, sort_keys=True, default=str),
    )
    if h != cur.content_hash or revived or not cur.has_content:
        cur = replace(cur, current_version=cur.current_version + 1, content_hash=h, blob_key=blob_key)
        out.content_changed = True
    else:
        out.notes.append("same content: no new version")
    out.after = cur
    return out
