"""Deterministic ids: the same log replayed into a fresh projection yields the same ids."""

from __future__ import annotations

import uuid
from datetime import datetime

NAMESPACE = uuid.UUID("5b0f3c8e-9a57-4d2e-8a55-0f6f1c2b7a10")


def document_id(key: str) -> uuid.UUID:
    """Document id from its identity key ``workspace/system/external_id``."""
    return uuid.uuid5(NAMESPACE, f"doc:{key}")


def chunk_id(document_id: uuid.UUID, version: int, ordinal: int) -> uuid.UUID:
    return uuid.uuid5(NAMESPACE, f"chunk:{document_id}:{version}:{ordinal}")


def person_id(workspace: str, namespace: str, value: str) -> uuid.UUID:
    """A new person's id from the first identity key it was seen with."""
    return uuid.uuid5(NAMESPACE, f"person:{workspace}:{namespace}:{value.lower()}")


def event_id(*parts: object) -> uuid.UUID:
    return uuid.uuid5(NAMESPACE, "event:" + ":".join(str(p) for p in parts))


def blob_key(workspace: str, doc_id: uuid.UUID, envelope_id: uuid.UUID) -> str:
    return f"envelopes/{workspace}/{doc_id}/{envelope_id}.json"


GRAPH_NAMESPACE = uuid.UUID("1d6e9a0c-58f4-4f0b-9a4e-3c2b8e7d6f21")
"""Entities, meetings and facts (the conflicts stage and the extractor must agree on them)."""


def entity_uuid(workspace: str, entity_type: str, norm_name: str) -> uuid.UUID:
    return uuid.uuid5(GRAPH_NAMESPACE, f"entity:{workspace}:{entity_type}:{norm_name}")


def meeting_uuid(document_id: uuid.UUID) -> uuid.UUID:
    """The meeting entity a meeting transcript document describes."""
    return uuid.uuid5(GRAPH_NAMESPACE, f"meeting:{document_id}")


def fact_uuid(
    workspace: str, subject: uuid.UUID, predicate: str, target: str, valid_from: datetime, generation: int = 0
) -> uuid.UUID:
    return uuid.uuid5(
        GRAPH_NAMESPACE, f"fact:{workspace}:{subject}:{predicate}:{target}:{valid_from.isoformat()}:{generation}"
    )
