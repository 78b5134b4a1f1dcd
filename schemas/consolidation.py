"""Contracts of memory consolidation: a merge record (``GET /v1/consolidations``), an undo result, a run report."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field

Reason = Literal["exact", "similar", "contradiction"]


class Consolidation(BaseModel):
    id: uuid.UUID
    survivor_id: uuid.UUID = Field(description="document id of the memory that absorbed the others")
    absorbed_ids: list[uuid.UUID] = Field(description="document ids of the memories that stopped ranking")
    reason: Reason
    similarity: float | None = Field(default=None, description="lowest cosine among the absorbed (similar)")
    facts_closed: int = Field(default=0, description="graph facts whose validity the merge closed")
    created_at: datetime
    created_by: str
    undone_at: datetime | None = None
    undone_by: str | None = None


class ConsolidationList(BaseModel):
    consolidations: list[Consolidation]
    next_before: datetime | None = Field(default=None, description="pass as ?before= for the next page")


class UndoResult(BaseModel):
    consolidation: Consolidation
    restored_chunks: int
    skipped: list[uuid.UUID] = Field(
        default_factory=list, description="absorbed memories edited or forgotten since the merge: left as they are"
    )


class PlannedMerge(BaseModel):
    survivor_id: uuid.UUID
    absorbed_ids: list[uuid.UUID]
    reason: Reason
    similarity: float | None = None
    consolidation_id: uuid.UUID | None = Field(default=None, description="set when applied")


class ConsolidationReport(BaseModel):
    run_id: uuid.UUID
    workspace: str
    applied: bool
    memories: int = Field(description="candidate memories read")
    merges: list[PlannedMerge]
    skipped_changed: int = Field(default=0, description="merges not applied because a memory changed meanwhile")
