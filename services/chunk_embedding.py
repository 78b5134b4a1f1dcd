"""What a child chunk is embedded from, and how both stages find its vector (issue 22 §1): one owner.

- ``embedding_input(title, context, text)``: the one text a child chunk is embedded from — the document's
  title (short chunks get their context), then the index context (``ingest/context.py``: the thread's
  previous turn and ``[date] speaker:``, or a section path), then the chunk's own text. Ingest hashes it
  (``embedding_hash``: the vector cache's key) and the embedder embeds it; nothing rebuilds it elsewhere
  (in particular not in SQL), so what was embedded is always what was hashed.
- The vector cache join (``CACHE_HIT``) and the "still needs a vector" predicate (``pending_sql``), used by
  ingest (a cached vector is carried over at insert; the pending chunks are announced on ``om.chunks.v1``)
  and by the embedder (what it loads and embeds).
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Sequence
from dataclasses import dataclass

import asyncpg


def content_hash(text: str) -> str:
    return hashlib.blake2b(text.encode("utf-8"), digest_size=16).hexdigest()


def embedding_input(title: str | None, context: str | None, text: str) -> str:
    """The text a child chunk is embedded from (the stored passage text stays ``text``)."""
    body = f"{context} {text}" if context else text
    return f"{title}\n\n{body}" if title else body


def embedding_hash(title: str | None, context: str | None, text: str) -> str:
    """``chunks.content_hash`` of a child chunk: the key of its vector in ``embedding_cache``."""
    return content_hash(embedding_input(title, context, text))


def pending_sql(alias: str, model: str) -> str:
    """A live child chunk of ``alias`` (``chunks``) without a vector of the model bound to ``model``."""
    c = f"{alias}." if alias else ""
    return (
        f"NOT {c}is_parent AND NOT {c}deleted AND ({c}embedding IS NULL OR {c}embedding_model IS DISTINCT FROM {model})"
    )


def cache_hit(alias: str, model: str) -> str:
    """The ``embedding_cache ec`` row holding the vector of ``alias``'s content hash under ``model``."""
    return f"ec.content_hash = {alias}.content_hash AND ec.embedding_model = {model}"


async def carry_over(conn: asyncpg.Connection, doc_ids: Sequence[uuid.UUID], model: str) -> None:
    """Reuse cached vectors for the documents' child chunks whose embedding input is unchanged under ``model``."""
    if doc_ids:
        await conn.execute(
            "UPDATE chunks c SET embedding = ec.embedding, embedding_model = ec.embedding_model"
            " FROM embedding_cache ec WHERE c.document_id = ANY($1::uuid[]) AND NOT c.is_parent"
            f" AND c.embedding IS NULL AND {cache_hit('c', '$2')}",
            list(doc_ids),
            model,
        )


async def pending_by_document(
    conn: asyncpg.Connection, doc_ids: Sequence[uuid.UUID], model: str
) -> dict[uuid.UUID, list[uuid.UUID]]:
    """The documents' child chunks that still need a vector for ``model``, in ordinal order."""
    rows = await conn.fetch(
        f"SELECT document_id, id FROM chunks WHERE document_id = ANY($1::uuid[]) AND {pending_sql('', '$2')}"
        " ORDER BY document_id, ordinal",
        list(doc_ids),
        model,
    )
    out: dict[uuid.UUID, list[uuid.UUID]] = {}
    for r in rows:
        out.setdefault(r["document_id"], []).append(r["id"])
    return out


@dataclass(frozen=True, slots=True)
class PendingChunk:
    id: uuid.UUID
    input: str
    """``embedding_input`` of the chunk: what ``content_hash`` was computed over."""
    content_hash: str


async def load_pending(conn: asyncpg.Connection, ids: Sequence[uuid.UUID], model: str) -> list[PendingChunk]:
    """The chunks of ``ids`` that still need a vector for ``model`` (id order), with their embedding input."""
    rows = await conn.fetch(
        f"SELECT id, title, index_context, text, content_hash FROM chunks WHERE id = ANY($1::uuid[])"
        f" AND {pending_sql('', '$2')} ORDER BY id",
        list(ids),
        model,
    )
    return [
        PendingChunk(r["id"], embedding_input(r["title"], r["index_context"], r["text"]), r["content_hash"])
        for r in rows
    ]


async def cached_vectors(conn: asyncpg.Connection, hashes: Sequence[str], model: str) -> dict[str, object]:
    """Vectors of ``hashes`` already in the cache under ``model``."""
    rows = await conn.fetch(
        "SELECT content_hash, embedding FROM embedding_cache WHERE embedding_model = $1"
        " AND content_hash = ANY($2::text[])",
        model,
        list(hashes),
    )
    return {r["content_hash"]: r["embedding"] for r in rows}
