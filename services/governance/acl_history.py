"""ACL history, written by ingest in the document's own transaction.

For each written document state a row ``(document, valid_from, principals, deleted)`` is added unless
the latest recorded state already says the same. ``valid_from`` is when the state took effect: the
tombstone time for a delete, the event time for a revival, else the ACL event time (LWW on
``acl_event_time``; its first state falls back to the event time). A state is valid until the next
row. An ACL change older than the applied one is rejected by last-writer-wins and so never recorded.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime

import asyncpg

RECORD = """
INSERT INTO acl_history (document_id, valid_from, principals, deleted)
SELECT s.id,
       CASE WHEN s.deleted_at IS NOT NULL THEN s.deleted_at
            WHEN l.deleted THEN s.event_time
            ELSE COALESCE(s.acl_event_time, s.event_time) END,
       CASE WHEN s.deleted_at IS NOT NULL THEN '{}'::text[] ELSE s.principals END,
       s.deleted_at IS NOT NULL
FROM (SELECT u.id, string_to_array(u.principals, ',') AS principals, u.acl_event_time, u.event_time, u.deleted_at
      FROM unnest($1::uuid[], $2::text[], $3::timestamptz[], $4::timestamptz[], $5::timestamptz[])
           AS u(id, principals, acl_event_time, event_time, deleted_at)) AS s
LEFT JOIN LATERAL (
    SELECT h.principals, h.deleted FROM acl_history h WHERE h.document_id = s.id
    ORDER BY h.valid_from DESC, h.recorded_at DESC LIMIT 1
) l ON true
WHERE l.deleted IS NULL
   OR l.deleted <> (s.deleted_at IS NOT NULL)
   OR (s.deleted_at IS NULL AND l.principals IS DISTINCT FROM s.principals)
ON CONFLICT (document_id, valid_from, deleted) DO UPDATE SET principals = EXCLUDED.principals
"""


async def record_acl_states(
    conn: asyncpg.Connection,
    states: Sequence[tuple[uuid.UUID, Sequence[str], datetime | None, datetime, datetime | None]],
) -> None:
    """states: (document id, principals, acl_event_time, event_time, deleted_at) as just written."""
    if not states:
        return
    # principals travel comma-joined (``user:<uuid>`` / ``group:<uuid>`` hold no comma): one array per column
    await conn.execute(
        RECORD,
        [s[0] for s in states],
        [",".join(sorted(s[1])) for s in states],
        [s[2] for s in states],
        [s[3] for s in states],
        [s[4] for s in states],
    )
