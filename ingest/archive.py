"""Raw envelope archive in the object store: one JSON Lines object per ingest batch and workspace.

One PUT per batch (not per envelope) keeps the archive off the critical path on S3. The object key
is derived from the envelope ids it holds, so re-archiving the same batch overwrites the same object.
A document version's ``blob_key`` is ``<object key>#<line>`` (0-based line of its envelope).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from services.objectstore.port import ObjectStore


def batch_key(workspace: str, envelope_ids: Sequence[str]) -> str:
    digest = hashlib.blake2b("\n".join(sorted(envelope_ids)).encode(), digest_size=16).hexdigest()
    return f"envelopes/{workspace}/batch-{digest}.jsonl"


def line_key(object_key: str, line: int) -> str:
    return f"{object_key}#{line}"


def encode_batch(raw_envelopes: Sequence[bytes]) -> bytes:
    """JSON Lines; envelope bytes are JSON, so a newline inside one is escaped and never splits a line."""
    return b"\n".join(r.replace(b"\n", b" ").replace(b"\r", b" ") for r in raw_envelopes) + b"\n"


async def read_archived(store: ObjectStore, blob_key: str) -> bytes:
    """The raw bytes of one archived envelope, from its ``<object key>#<line>`` reference."""
    key, _, line = blob_key.partition("#")
    data = await store.get(key)
    return data.split(b"\n")[int(line or 0)]
