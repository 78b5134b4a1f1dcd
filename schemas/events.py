"""Events stages emit to each other (``om.chunks.v1``, ``om.documents.v1``)."""

from __future__ import annotations

import uuid
from datetime import datetime
from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field


class _Event(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ChunksToEmbed(_Event):
    """Chunks of one document version that have no vector for the wanted model yet."""

    schema_version: int = 1
    workspace: str
    document_id: uuid.UUID
    version: int
    chunk_ids: list[uuid.UUID] = Field(max_length=10_000)
    embedding_model: str | None = Field(default=None, description="model wanted; None = the embedder's own")


class DocumentChange(StrEnum):
    CHANGED = "changed"
    DELETED = "deleted"
    ACL_CHANGED = "acl_changed"


class DocumentEvent(_Event):
    """A document's state changed in the projection. Consumers re-read the projection for details."""

    schema_version: int = 1
    event_id: uuid.UUID = Field(description="deterministic: derived from the envelope id and the change")
    change: DocumentChange
    workspace: str
    document_id: uuid.UUID
    key: str = Field(description="workspace/system/external_id")
    version: int
    kind: str
    event_time: datetime
    author_person_id: uuid.UUID | None = None
    participant_person_ids: list[uuid.UUID] = Field(default_factory=list)
    principals: list[str] = Field(default_factory=list)
