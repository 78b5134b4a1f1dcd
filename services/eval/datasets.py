"""Loaders for the common JSONL layout (public data sets and the repository's demo corpus).

Layout (see ``deploy/demo/README.md``): a folder with ``events.jsonl`` (``{id, dataset, kind,
author, timestamp, groups[], thread, text, meta}``) and optionally ``queries.jsonl`` (``{qid,
dataset, split, query, gold_ids[], answer, category, groups[], as_of, meta}``) and
``people.jsonl`` (``{id, name, ...}``, HERB). Data are read from their path, never copied.

Deterministic mapping of an event to a ``ChangeEnvelope`` (rules, all tested):

- ``envelope_id = uuid5(NAMESPACE, f"{workspace}/{dataset}/{id}")``. The workspace is part of
  the name so that loading the same data set into a fresh, isolated eval workspace yields new
  envelope ids and is never mistaken for a redelivery of an earlier run.
- ``source.system`` = the dataset name lowercased, other characters than ``[a-z0-9_.-]`` → ``-``;
  ``source.external_id`` = the event id, so predictions map back to gold ids via external_id.
- group ``g`` → principal ``group:{uuid5(NAMESPACE, f"group:{dataset}:{g}")}`` (no workspace, so
  ``org_hierarchy.json`` is stable); queries' ``groups`` become the viewer's groups.
- ``kind`` → ``DocumentKind`` via ``KIND_MAP``; unknown kinds by keyword (mail, meeting, ticket or
  issue, pull, chat/message/slack/turn), else ``document``.
- ``timestamp``: naive = UTC; null → ``FALLBACK_TIME`` (2000-01-01T00:00:00Z). Every timestamp
  (and every query ``as_of``) is shifted by ``time_offset``; ``None`` means the per-dataset
  default in ``DEFAULT_TIME_OFFSETS`` (HERB is dated up to 2027-07: it moves back 156 weeks,
  1,092 days, which keeps weekdays).
  A time still more than a day in the future follows ``on_future``: error | skip | clamp (to now).
- ``author``: ``"Name <email>"`` gives display name and email; a bare string is looked up in
  ``people`` (id → name; ``people.jsonl`` beside ``events.jsonl`` is loaded automatically) and
  kept as identity ``(system, author)``. No email is invented unless ``synthetic_emails`` (then
  ``<slug>@<system>.example``): names repeat across LoCoMo conversations and HERB products, so a
  name-derived email would merge different people.
- ``meta.participants`` / ``meta.attendees`` / ``meta.reviewers`` → participants with roles
  participant / attendee / reviewer (same parsing as the author, at most 1,000).
- title: ``meta.title`` or ``meta.subject``; for pull requests and tickets the first text line.
- text: by default (``context="turn"``) the message alone, exactly as a chat connector sends it (text,
  author, ``event_time``, ``thread_external_id``, participants, ACL): the service builds the reader's context
  itself at ingest (``ingest/context.py``). The loader's own rewriting is kept only as an explicit upper
  bound (``orgmem eval live --loader-context``), never the headline figure: chat turns (kind ``message``
  with an author) then follow ``context``: ``"speaker"`` = ``"Speaker: text"``, ``"speaker_prev"`` = the
  previous turn of the same thread as ``"Speaker: text"`` on its own line (only if it is at most
  ``PREV_TURN_WINDOW`` = 24 h older, so a quiet channel does not glue unrelated posts together), then
  ``"[8 May 2023] Speaker: text"``. The previous turn is the one before it in file order. Other
  kinds keep their text. ``LoadedEvent.raw`` keeps the untouched event.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from schemas.envelope import MAX_FUTURE, ChangeEnvelope, DocumentKind
from services.eval.gold import (
    GoldFormatError,
    iter_json_lines,
)
from services.payload_errors import first_error

NAMESPACE = uuid.UUID("6f1c2a8e-3b0d-5e57-9a41-0a7d2c3e9b10")


FALLBACK_TIME = datetime(2000, 1, 1, tzinfo=UTC)


DEFAULT_TIME_OFFSETS: dict[str, timedelta] = {"herb": timedelta(weeks=-156)}


MAX_PARTICIPANTS = 1000


PREV_TURN_WINDOW = timedelta(hours=24)


Context = Literal["turn", "speaker", "speaker_prev"]


CONTEXTS: tuple[Context, ...] = ("turn", "speaker", "speaker_prev")


"""``turn`` (the default) is the connector protocol; the others are loader rewrites (upper bounds only)."""


OnFuture = Literal["error", "skip", "clamp"]


KIND_MAP: dict[str, DocumentKind] = {
    **{k: DocumentKind.MESSAGE for k in ("message", "chat_message", "slack_message", "meeting_chat", "chat")},
    **{k: DocumentKind.DOCUMENT for k in ("document", "doc", "shared_link", "wiki", "okr", "design_doc")},
    **{k: DocumentKind.MEETING for k in ("meeting", "meeting_transcript", "meeting_notes")},
    **{k: DocumentKind.EMAIL for k in ("email", "mail")},
    **{k: DocumentKind.TICKET for k in ("ticket", "issue", "jira_ticket")},
    **{k: DocumentKind.PULL_REQUEST for k in ("pull_request", "pr", "merge_request")},
}


_KIND_KEYWORDS: tuple[tuple[tuple[str, ...], DocumentKind], ...] = (
    (("mail",), DocumentKind.EMAIL),
    (("meeting",), DocumentKind.MEETING),
    (("ticket", "issue"), DocumentKind.TICKET),
    (("pull", "merge"), DocumentKind.PULL_REQUEST),
    (("chat", "message", "slack", "turn", "dm"), DocumentKind.MESSAGE),
)


_NAME_EMAIL = re.compile(r"^\s*(?P<name>.*?)\s*<(?P<email>[^<>@\s]+@[^<>@\s]+)>\s*$")


class DatasetFormatError(GoldFormatError):
    """An event or query line of the common layout is invalid (names path, line and field)."""


class _Row(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class RawEvent(_Row):
    id: str
    dataset: str
    kind: str
    author: str | None = None
    timestamp: datetime | None = None
    groups: tuple[str, ...] = ()
    thread: str | None = None
    text: str = ""
    meta: dict[str, Any] = {}


class RawQuery(_Row):
    qid: str
    dataset: str
    split: str | None = None
    query: str
    gold_ids: tuple[str, ...] = ()
    answer: str | int | float | None = None
    category: str = "uncategorized"
    groups: tuple[str, ...] = ()
    as_of: datetime | None = None
    meta: dict[str, Any] = {}


@dataclass(frozen=True)
class LoadedEvent:
    raw: RawEvent
    envelope: ChangeEnvelope


def system_name(dataset: str) -> str:
    cleaned = re.sub(r"[^a-z0-9_.\-]", "-", dataset.strip().lower())[:64]
    if not cleaned:
        raise ValueError("dataset name is empty")
    return cleaned


def envelope_uuid(workspace: str, dataset: str, event_id: str) -> uuid.UUID:
    return uuid.uuid5(NAMESPACE, f"{workspace}/{dataset}/{event_id}")


def group_principal(dataset: str, group: str) -> str:
    return f"group:{uuid.uuid5(NAMESPACE, f'group:{dataset}:{group}')}"


def map_kind(kind: str) -> DocumentKind:
    key = kind.strip().lower()
    if key in KIND_MAP:
        return KIND_MAP[key]
    for words, mapped in _KIND_KEYWORDS:
        if any(w in key for w in words):
            return mapped
    return DocumentKind.DOCUMENT


def to_utc(value: datetime | None, offset: timedelta = timedelta(0)) -> datetime:
    """Naive = UTC; None = ``FALLBACK_TIME`` (not shifted: it marks "undated")."""
    if value is None:
        return FALLBACK_TIME
    aware = value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
    return aware + offset


def load_people(path: str | Path) -> dict[str, str]:
    """``people.jsonl`` rows ``{id, name}`` → id → display name."""
    return {str(o["id"]): str(o["name"]) for _, o in iter_json_lines(path) if "id" in o and "name" in o}


def _person_fields(ref: str, system: str, people: Mapping[str, str], synthetic: bool) -> dict[str, Any]:
    match = _NAME_EMAIL.match(ref)
    if match:
        name = match["name"] or None
        return {"display_name": name, "email": match["email"], "identities": []}
    name = people.get(ref, ref)
    email = None
    if "@" in ref:
        email = ref
    elif synthetic:
        email = f"{re.sub(r'[^a-z0-9]+', '.', name.lower()).strip('.') or 'unknown'}@{system}.example"
    return {"display_name": name, "email": email, "identities": [{"namespace": system, "value": ref}]}


def _speaker(ref: str, people: Mapping[str, str]) -> str:
    match = _NAME_EMAIL.match(ref)
    return (match["name"] or match["email"]) if match else people.get(ref, ref)


def _format_error(exc: ValidationError, what: str, path: str | Path, line: int) -> DatasetFormatError:
    field, msg = first_error(exc, root="")
    return DatasetFormatError(f"{what} {field!r}: {msg}", path=str(path), line=line, field=field)


def _events_file(path: str | Path, name: str) -> Path:
    p = Path(path)
    return p / name if p.is_dir() else p


def iter_raw_events(path: str | Path, *, limit: int | None = None) -> Iterator[tuple[int, RawEvent]]:
    """``(line, RawEvent)`` from a folder (its ``events.jsonl``) or a file, in file order."""
    file = _events_file(path, "events.jsonl")
    for n, (line, obj) in enumerate(iter_json_lines(file)):
        if limit is not None and n >= limit:
            return
        try:
            yield line, RawEvent.model_validate(obj)
        except ValidationError as exc:
            raise _format_error(exc, "event field", file, line) from exc


def _title(raw: RawEvent, kind: DocumentKind) -> str | None:
    for key in ("title", "subject"):
        if isinstance(raw.meta.get(key), str) and raw.meta[key].strip():
            return str(raw.meta[key])[:1024]
    if kind in (DocumentKind.PULL_REQUEST, DocumentKind.TICKET) and raw.text.strip():
        first = raw.text.strip().splitlines()[0]
        return first[:1024]
    return None


def chat_text(speaker: str, text: str, when: datetime, context: Context, previous: str | None) -> str:
    """The indexed text of one chat turn (see the module docstring)."""
    if context == "turn":
        return text
    line = f"{speaker}: {text}"
    if context == "speaker":
        return line
    dated = f"[{when.day} {when:%B %Y}] {line}"
    return f"{previous}\n{dated}" if previous else dated


def iter_loaded(
    path: str | Path,
    *,
    workspace: str,
    context: Context = "turn",
    limit: int | None = None,
    people: Mapping[str, str] | None = None,
    synthetic_emails: bool = False,
    time_offset: timedelta | None = None,
    on_future: OnFuture = "error",
    now: datetime | None = None,
) -> Iterator[LoadedEvent]:
    """Stream ``LoadedEvent(raw, envelope)``; ``limit`` caps the events read (skips included)."""
    if people is None:
        side = Path(path) / "people.jsonl" if Path(path).is_dir() else Path(path).parent / "people.jsonl"
        people = load_people(side) if side.exists() else {}
    now = now or datetime.now(UTC)
    previous: dict[str, tuple[datetime, str]] = {}  # thread → (time, "Speaker: text") of its last turn
    file = str(_events_file(path, "events.jsonl"))
    for line, raw in iter_raw_events(path, limit=limit):
        system = system_name(raw.dataset)
        offset = DEFAULT_TIME_OFFSETS.get(system, timedelta(0)) if time_offset is None else time_offset
        when = to_utc(raw.timestamp, offset)
        if when > now + MAX_FUTURE:
            if on_future == "skip":
                continue
            if on_future == "error":
                raise DatasetFormatError(
                    f"timestamp {when.isoformat()} is in the future; pass time_offset or on_future",
                    path=file,
                    line=line,
                    field="timestamp",
                )
            when = now
        kind = map_kind(raw.kind)
        text = raw.text
        if kind is DocumentKind.MESSAGE and raw.author:
            speaker = _speaker(raw.author, people)
            last = previous.get(raw.thread) if raw.thread else None
            prev = last[1] if last and timedelta(0) <= when - last[0] <= PREV_TURN_WINDOW else None
            text = chat_text(speaker, raw.text, when, context, prev)
            if raw.thread:
                previous[raw.thread] = (when, f"{speaker}: {raw.text}")
        participants: list[dict[str, Any]] = []
        for key, role in (
            ("participants", "participant"),
            ("attendees", "attendee"),
            ("reviewers", "reviewer"),
        ):
            refs = raw.meta.get(key)
            if isinstance(refs, list):
                participants += [
                    {**_person_fields(str(r), system, people, synthetic_emails), "role": role} for r in refs if r
                ]
        payload = {
            "envelope_id": envelope_uuid(workspace, raw.dataset, raw.id),
            "workspace": workspace,
            "source": {"system": system, "external_id": raw.id, "url": raw.meta.get("link")},
            "event_time": when,
            "document": {
                "kind": kind,
                "title": _title(raw, kind),
                "text": text,
                "thread_external_id": raw.thread or None,
            },
            "author": _person_fields(raw.author, system, people, synthetic_emails) if raw.author else None,
            "participants": participants[:MAX_PARTICIPANTS],
            "acl": {"principals": [group_principal(raw.dataset, g) for g in raw.groups]},
        }
        try:
            envelope = ChangeEnvelope.model_validate(payload)
        except ValidationError as exc:
            raise _format_error(exc, f"event {raw.id!r} does not map to an envelope, field", file, line) from exc
        yield LoadedEvent(raw=raw, envelope=envelope)


def iter_envelopes(path: str | Path, *, workspace: str, **options: Any) -> Iterator[ChangeEnvelope]:
    """Stream ``ChangeEnvelope``s; ``options`` are those of ``iter_loaded``."""
    for loaded in iter_loaded(path, workspace=workspace, **options):
        yield loaded.envelope
