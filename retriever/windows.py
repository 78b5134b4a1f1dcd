"""Conversation windows: a returned message plus the viewer-visible neighbours of its thread that complete it.

An answer in a chat is often spread over consecutive turns ("Did you go?" — "Yes, last Sunday, with the kids");
the ranked message is the one that shares the question's words, its neighbour carries the rest. The full arm
returns, for each of its top messages, a **window**: the :data:`BEFORE` previous and :data:`AFTER` next
messages of the same thread (else channel) at most :data:`MAX_GAP` apart, in time order, the hit itself
included — reported in ``diagnostics.windows`` as ``{chunk_id: [{chunk_id, external_id}, …]}``; the passage
list and its per-turn ranking are not changed.

ACL: neighbours come from :func:`retriever.multihop.thread_neighbours` (a message the viewer cannot see is
skipped over in SQL, never decides which message is next) and their rows from
:func:`retriever.rows.fetch_chunks` under the same :class:`SearchScope` (viewer, workspace, filters,
tombstones): a window never holds a message its viewer could not have been returned on its own.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import timedelta

import asyncpg

from retriever.multihop import Neighbour, thread_neighbours
from retriever.rows import ChunkRow, fetch_chunks
from retriever.scope import SearchScope

ENABLED = True
"""Whether the full arm reports windows."""
BEFORE = 1
"""Previous messages in a window."""
AFTER = 1
"""Following messages in a window."""
MAX_GAP = timedelta(minutes=30)
"""A window member is at most this far in time from its hit (a reply, not the channel's next topic)."""

Window = list[dict[str, str]]


def assemble(seeds: Sequence[str], neighbours: Sequence[Neighbour], rows: Mapping[str, ChunkRow]) -> dict[str, Window]:
    """Per seed (in ``seeds`` order): its visible neighbours and itself in ``(event_time, chunk_id)`` order, as
    ``{chunk_id, external_id}`` (pure). A neighbour without a row (not visible under the scope, vanished) is
    left out; a seed without a row has no window."""
    members: dict[str, list[str]] = {s: [s] for s in seeds if s in rows}
    for nb in neighbours:
        if nb.seed in members and nb.chunk_id in rows and nb.chunk_id not in members[nb.seed]:
            members[nb.seed].append(nb.chunk_id)
    out: dict[str, Window] = {}
    for seed, ids in members.items():
        ordered = sorted(ids, key=lambda i: (rows[i].event_time, i))
        out[seed] = [{"chunk_id": i, "external_id": rows[i].external_id} for i in ordered]
    return out


async def windows(
    conn: asyncpg.Connection,
    scope: SearchScope,
    seeds: Sequence[str],
    rows: Mapping[str, ChunkRow],
    *,
    before: int | None = None,
    after: int | None = None,
) -> dict[str, Window]:
    """The window of each of ``seeds`` (ranked chunks whose rows are in ``rows``); neighbours read and fetched
    under ``scope``. Unset knobs read the module's values at call time."""
    before = BEFORE if before is None else before
    after = AFTER if after is None else after
    if not seeds:
        return {}
    neighbours = await thread_neighbours(conn, scope, seeds, after, before, MAX_GAP)
    missing = list(dict.fromkeys(n.chunk_id for n in neighbours if n.chunk_id not in rows))
    fetched = await fetch_chunks(conn, scope, missing) if missing else {}
    return assemble(seeds, neighbours, {**rows, **fetched})
