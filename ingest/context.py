"""Index context built by the product at ingest (issue 14 §2): what a reader needs to understand a chunk.

A connector sends one chat message: its text, author, ``event_time`` and thread id. Indexed alone, a turn
such as "Yes, next Tuesday" matches nothing. So a message chunk's INDEX input — its ``tsvector`` and its dense
embedding input — carries a context prefix, while the stored passage text stays the message itself:

    <previous speaker>: <previous message>            (the thread's preceding message(s), see below)
    [8 May 2023] <speaker>: <the message>

Rules:

- The thread is ``thread_external_id``, else ``parent_external_id`` (a channel id); a message with neither
  gets only its own ``[date] speaker:`` prefix.
- Preceding messages: at most :data:`PREV_MESSAGES`, not deleted, at most :data:`PREV_WINDOW` older, in
  ``(event_time, id)`` order, and **only from documents with exactly the same principals**: context never
  crosses an ACL boundary, so text a viewer cannot see can never make a passage match.
- Out-of-order arrival, an edit, a delete or an ACL change of a message re-indexes its followers (the next
  :data:`PREV_MESSAGES` messages of the thread) — only when their context text really changes, so a
  redelivery, a replay and a rebuild converge on the same index (the result depends on the projection,
  never on arrival order). Contexts of one thread are computed under a per-thread advisory lock so two
  ingest workers see each other's committed messages.
- Documents (any other kind): the child chunk's section path (the Markdown headings above it) is its
  context; the title is already indexed and embedded with every child (``embedding_input``).

The context lives in ``chunks.index_context`` (migration 0004). ``tsv`` = title (weight A) + context +
text; the embedding input is ``services.chunk_embedding.embedding_input(title, index_context, text)`` and
``content_hash`` is its ``embedding_hash``, so the embedding cache stays keyed by what was embedded.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

import asyncpg

from ingest.chunking import ChunkPlan
from services.chunk_embedding import embedding_hash

PREV_MESSAGES = 1
PREV_WINDOW = timedelta(hours=24)
PREV_CHARS = 400
"""A preceding message contributes at most this many characters."""
MAX_SECTION_CHARS = 300
_HEADING = re.compile(r"^(#{1,6})[ \t]+(.+?)[ \t#]*$", re.MULTILINE)


def _key(alias: str) -> str:
    """The thread key expression of a ``documents`` row alias: the thread, else the channel (parent)."""
    return f"coalesce({alias}.thread_external_id, {alias}.parent_external_id)"


def day_label(when: datetime) -> str:
    return f"[{when.day} {when:%B %Y}]"


def message_context(speaker: str | None, when: datetime, previous: Sequence[tuple[str | None, str]]) -> str:
    """The prefix of a message chunk's index input: previous turns (oldest first), then ``[date] Speaker:``."""
    lines = [f"{name}: {text}" if name else text for name, text in previous if text.strip()]
    lines.append(f"{day_label(when)} {speaker}:" if speaker else day_label(when))
    return "\n".join(lines)


def section_paths(parents: Sequence[tuple[int, str]], starts: Sequence[int]) -> list[str | None]:
    """For each child start offset, the Markdown heading path above it ("Setup > Kafka"), or None.

    ``parents`` are (char_start, text) of the document's parent chunks, in order (offsets are into the
    original document text, so the headings' absolute positions are known)."""
    heads: list[tuple[int, int, str]] = []  # (absolute offset, level, title)
    for start, text in parents:
        for m in _HEADING.finditer(text):
            heads.append((start + m.start(), len(m[1]), m[2].strip()))
    heads.sort()
    out: list[str | None] = []
    for s in starts:
        stack: list[tuple[int, str]] = []
        for pos, level, title in heads:
            if pos > s:
                break
            stack = [x for x in stack if x[0] < level] + [(level, title)]
        path = " > ".join(t for _, t in stack)[:MAX_SECTION_CHARS]
        out.append(path or None)
    return out


@dataclass(frozen=True, slots=True)
class _Chunk:
    id: uuid.UUID
    document_id: uuid.UUID
    title: str | None
    text: str
    context: str | None
    content_hash: str


async def _lock_threads(conn: asyncpg.Connection, doc_ids: Sequence[uuid.UUID]) -> None:
    """One statement takes the documents' thread locks in key order (two workers never wait on each other in
    opposite orders)."""
    await conn.execute(
        "SELECT count(pg_advisory_xact_lock(hashtextextended(t.k, 14))) FROM ("
        f"SELECT DISTINCT m.workspace || '/' || {_key('m')} AS k FROM documents m"
        f" WHERE m.id = ANY($1::uuid[]) AND m.kind = 'message' AND {_key('m')} IS NOT NULL ORDER BY 1) t",
        list(doc_ids),
    )


async def _followers(conn: asyncpg.Connection, doc_ids: Sequence[uuid.UUID]) -> list[uuid.UUID]:
    """The next ``PREV_MESSAGES`` live messages of each document's thread (same principals, and any), after
    every position the document held: its current ``event_time`` and that of each of its versions. A delete
    (or an edit) moves a message's ``event_time``; the followers of where it WAS carry its text in their
    context and must be re-indexed too."""
    rows = await conn.fetch(
        f"""
        WITH m AS (
            SELECT d.id, d.workspace, d.principals, {_key("d")} AS k, d.event_time AS at FROM documents d
             WHERE d.id = ANY($1::uuid[]) AND d.kind = 'message'
            UNION
            SELECT d.id, d.workspace, d.principals, {_key("d")}, v.event_time FROM documents d
              JOIN document_versions v ON v.document_id = d.id
             WHERE d.id = ANY($1::uuid[]) AND d.kind = 'message'
        )
        SELECT DISTINCT f.id FROM m
        CROSS JOIN LATERAL (
            (SELECT n.id FROM documents n
              WHERE n.workspace = m.workspace AND {_key("n")} = m.k
                AND n.kind = 'message' AND n.deleted_at IS NULL AND n.id <> m.id
                AND (n.event_time, n.id) > (m.at, m.id) AND n.event_time <= m.at + $2::interval
                AND n.principals @> m.principals AND n.principals <@ m.principals
              ORDER BY n.event_time, n.id LIMIT $3)
            UNION ALL
            (SELECT n.id FROM documents n
              WHERE n.workspace = m.workspace AND {_key("n")} = m.k
                AND n.kind = 'message' AND n.deleted_at IS NULL AND n.id <> m.id
                AND (n.event_time, n.id) > (m.at, m.id) AND n.event_time <= m.at + $2::interval
              ORDER BY n.event_time, n.id LIMIT $3)
        ) f
        """,
        list(doc_ids),
        PREV_WINDOW,
        PREV_MESSAGES,
    )
    return [r["id"] for r in rows]


async def _message_contexts(
    conn: asyncpg.Connection, doc_ids: Sequence[uuid.UUID], bodies: Mapping[uuid.UUID, str] | None = None
) -> dict[uuid.UUID, str]:
    """Context of each live message in ``doc_ids``. ``bodies`` gives the child text (joined by a space, as the
    stored chunks would give it) of documents whose chunks are about to be written in this transaction."""
    bodies = bodies or {}
    rows = await conn.fetch(
        f"""
        SELECT t.id, t.event_time, coalesce(pa.display_name, t.author_name) AS speaker,
               coalesce(array_agg(pr.speaker ORDER BY pr.event_time, pr.id) FILTER (WHERE pr.id IS NOT NULL),
                        '{{}}') AS prev_speakers,
               coalesce(array_agg(pr.body ORDER BY pr.event_time, pr.id) FILTER (WHERE pr.id IS NOT NULL),
                        '{{}}') AS prev_texts
        FROM documents t
        LEFT JOIN people pa ON pa.id = t.author_person_id
        LEFT JOIN LATERAL (
            SELECT d.id, d.event_time, coalesce(pd.display_name, d.author_name) AS speaker,
                   left(coalesce(nb.body, (SELECT string_agg(c.text, ' ' ORDER BY c.ordinal) FROM chunks c
                          WHERE c.document_id = d.id AND NOT c.is_parent)), {PREV_CHARS}) AS body
            FROM documents d LEFT JOIN people pd ON pd.id = d.author_person_id
            LEFT JOIN unnest($4::uuid[], $5::text[]) AS nb(id, body) ON nb.id = d.id
            WHERE d.workspace = t.workspace AND {_key("t")} IS NOT NULL AND {_key("d")} = {_key("t")}
              AND d.kind = 'message' AND d.deleted_at IS NULL AND d.id <> t.id
              AND (d.event_time, d.id) < (t.event_time, t.id) AND d.event_time >= t.event_time - $2::interval
              AND d.principals @> t.principals AND d.principals <@ t.principals
            ORDER BY d.event_time DESC, d.id DESC LIMIT $3
        ) pr ON true
        WHERE t.id = ANY($1::uuid[]) AND t.kind = 'message' AND t.deleted_at IS NULL
        GROUP BY t.id, t.event_time, pa.display_name, t.author_name
        """,
        list(doc_ids),
        PREV_WINDOW,
        PREV_MESSAGES,
        list(bodies),
        list(bodies.values()),
    )
    return {
        r["id"]: message_context(
            r["speaker"],
            r["event_time"],
            [(s, b or "") for s, b in zip(r["prev_speakers"], r["prev_texts"], strict=True)],
        )
        for r in rows
    }


async def _document_contexts(conn: asyncpg.Connection, doc_ids: Sequence[uuid.UUID]) -> dict[uuid.UUID, str | None]:
    """chunk id → section path for the child chunks of non-message documents."""
    rows = await conn.fetch(
        "SELECT c.id, c.document_id, c.is_parent, c.char_start, c.text FROM chunks c JOIN documents d"
        " ON d.id = c.document_id WHERE c.document_id = ANY($1::uuid[]) AND d.kind <> 'message'"
        " AND d.deleted_at IS NULL ORDER BY c.document_id, c.ordinal",
        list(doc_ids),
    )
    by_doc: dict[uuid.UUID, list[asyncpg.Record]] = {}
    for r in rows:
        by_doc.setdefault(r["document_id"], []).append(r)
    out: dict[uuid.UUID, str | None] = {}
    for items in by_doc.values():
        parents = [(r["char_start"], r["text"]) for r in items if r["is_parent"]]
        children = [r for r in items if not r["is_parent"]]
        for r, path in zip(children, section_paths(parents, [r["char_start"] for r in children]), strict=True):
            out[r["id"]] = path
    return out


async def planned_contexts(
    conn: asyncpg.Connection, docs: Mapping[uuid.UUID, tuple[str, Sequence[ChunkPlan]]]
) -> dict[tuple[uuid.UUID, int], str | None]:
    """The index context of every child chunk planned for ``docs`` (document id → (kind, its new chunk plans)),
    computed before the chunks are written, so each is inserted once with its final ``tsv`` and hash.

    It is the value :func:`refresh` computes once the chunks are stored: the documents' rows are already saved,
    and a preceding message planned in the same batch contributes its planned children's text (the old chunks
    of ``docs`` are replaced in this transaction). Returns ``(document id, ordinal) → context``.
    """
    children = {
        d: sorted((p for p in plans if not p.is_parent), key=lambda p: p.ordinal) for d, (_, plans) in docs.items()
    }
    messages = [d for d, (kind, _) in docs.items() if kind == "message"]
    ctx: dict[uuid.UUID, str] = {}
    if messages:
        await _lock_threads(conn, messages)
        ctx = await _message_contexts(conn, messages, {d: " ".join(p.text for p in children[d]) for d in messages})
    out: dict[tuple[uuid.UUID, int], str | None] = {}
    for doc_id, (kind, plans) in docs.items():
        kids = children[doc_id]
        if kind == "message":
            paths: list[str | None] = [ctx.get(doc_id)] * len(kids)
        else:
            parents = sorted((p.start, p.text) for p in plans if p.is_parent)
            paths = section_paths(parents, [p.start for p in kids])
        out.update(((doc_id, p.ordinal), path) for p, path in zip(kids, paths, strict=True))
    return out


async def refresh(
    conn: asyncpg.Connection,
    doc_ids: Sequence[uuid.UUID],
    *,
    settled: Collection[uuid.UUID] = (),
) -> list[uuid.UUID]:
    """(Re)compute the index context of ``doc_ids``' child chunks and of their thread followers.

    Only chunks whose context really changed
    are rewritten (new ``tsv``, ``content_hash``, vector cleared for the embedder). Returns the documents
    outside ``doc_ids`` whose chunks were re-indexed (their chunks must be announced for embedding).
    ``settled``: documents of ``doc_ids`` whose chunks were just written with the context of
    :func:`planned_contexts` (their followers are still re-indexed; they themselves are not recomputed).
    """
    if not doc_ids:
        return []
    await _lock_threads(conn, doc_ids)
    followers = [d for d in await _followers(conn, doc_ids) if d not in set(doc_ids)]
    if followers:
        await _lock_threads(conn, followers)  # same threads: already held (re-entrant), cheap
    done = set(settled)
    doc_ids = [d for d in doc_ids if d not in done]
    targets = list(dict.fromkeys([*doc_ids, *followers]))
    if not targets:
        return []
    msg = await _message_contexts(conn, targets)
    docs = await _document_contexts(conn, doc_ids)
    rows = await conn.fetch(
        "SELECT id, document_id, title, text, index_context, content_hash FROM chunks"
        " WHERE document_id = ANY($1::uuid[]) AND NOT is_parent AND NOT deleted ORDER BY document_id, ordinal",
        targets,
    )
    updates: list[tuple[uuid.UUID, str | None, str]] = []
    changed_docs: set[uuid.UUID] = set()
    for r in rows:
        c = _Chunk(r["id"], r["document_id"], r["title"], r["text"], r["index_context"], r["content_hash"])
        if c.document_id in msg:
            ctx: str | None = msg[c.document_id]
        elif c.id in docs:
            ctx = docs[c.id]
        else:
            continue  # deleted (or not a live message any more): nothing to index
        new_hash = embedding_hash(c.title, ctx, c.text)
        if ctx != c.context or new_hash != c.content_hash:
            updates.append((c.id, ctx, new_hash))
            changed_docs.add(c.document_id)
    if updates:
        await conn.executemany(
            "UPDATE chunks SET index_context = $2, content_hash = $3, embedding = NULL, embedding_model = NULL,"
            " tsv = setweight(to_tsvector('english', coalesce(title, '')), 'A')"
            " || to_tsvector('english', coalesce($2, '')) || to_tsvector('english', text)"
            " WHERE id = $1",
            updates,
        )
    return [d for d in followers if d in changed_docs]
