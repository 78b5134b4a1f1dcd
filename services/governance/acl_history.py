"""ACL history, written by ingest in the document's own transaction.

For each written document state a row ``(document, valid_from, principals, deleted)`` is added unless
the latest recorded state already says the same. ``valid_from`` is when the state took effect: the
tombstone time for a delete, the event time for a revival, else the ACL event time (LWW on
``acl_event_time``; its first state falls back to the event time). A state is valid until the next
row. An ACL change older than the applied one is rejected by last-writer-wins and so never recorded.
"""

from __future__ import annotations

import json
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
FROM jsonb_to_recordset($1::jsonb)
     AS s(id uuid, principals text[], acl_event_time timestamptz, event_time timestamptz, deleted_at timestamptz)
LEFT JOIN LATERAL (
    SELECT h.principals, h.deleted FROM acl_history h WHERE h.document_id = s.id
    ORDER BY h.valid_from DESC, h.recorded_at DESC LIMIT 1
) l ON true
WHERE l.deleted IS NULL
   OR l.deleted <> (s.deleted_at IS NOT NULL)
   OR (s.deleted_at IS NULL AND l.principals IS DISTINCT FROM s.principals)
ON CONFLICT (document_id, valid_from, deleted) DO UPDATE SET principals = EXCLUDED.principals
"""


def _iso(t: datetime | None) -> str | None:
    return None if t is None else t.isoformat()


async def record_acl_states(
    conn: asyncpg.Connection,
    states: Sequence[tuple[uuid.UUID, Sequence[str], datetime | None, datetime, datetime | None]],
) -> None:
    """states: (document id, principals, acl_event_time, event_time, deleted_at) as just written."""
    if not states:
        return
    payload = [
        {
            "id": str(doc_id),
            "principals": sorted(principals),
            "acl_event_time": _iso(acl_time),
            "event_time": _iso(event_time),
            "deleted_at": _iso(deleted_at),
        }
        for doc_id, principals, acl_time, event_time, deleted_at in states
    ]
    await conn.execute(RECORD, json.dumps(payload))
