"""Contract of ``preload``: the block an agent framework injects before a turn (seed 002, relevance-conditioned
preload) instead of a whole memory file — the viewer's top memories and passages for the current turn,
deduplicated, packed to a token budget, with numbered citations."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, Field, field_validator

from schemas.tools import Query, Workspace, _clamp, _Req

MAX_PRELOAD_TOP_K = 20
DEFAULT_PRELOAD_TOKENS = 800


class PreloadRequest(_Req):
    text: Query = Field(description="The user's current turn, verbatim: what the memories should be relevant to.")
    top_k: int | None = Field(
        default=None,
        description="How many memories and how many passages to consider (each); default 5, at most 20.",
    )
    max_tokens: int | None = Field(
        default=None, description="Token budget of the returned block (default 800); lower items are cut first."
    )
    workspace: Workspace = Field(default="default", description="the workspace (from the credential, never a model)")

    @field_validator("top_k", mode="before")
    @classmethod
    def _clamp_top_k(cls, v: Any) -> Any:
        return _clamp(v, 1, MAX_PRELOAD_TOP_K)

    @field_validator("max_tokens", mode="before")
    @classmethod
    def _clamp_tokens(cls, v: Any) -> Any:
        return _clamp(v, 1, 20_000)


class PreloadItem(BaseModel):
    citation: int = Field(description="the [n] number of this item in the block")
    kind: Literal["memory", "passage"]
    text: str
    title: str | None = None
    document_id: uuid.UUID
    source_system: str
    external_id: str
    url: str | None = None
    event_time: datetime
    score: float
    scope: str = Field(default="other", description="user, team, division, org or other: who it was shared with")


class PreloadResponse(BaseModel):
    block: str = Field(description="the text to put in the model's context, citations included; empty if none")
    items: list[PreloadItem]
    tokens: int = Field(description="estimated tokens of the block")
    considered: int = Field(description="memories + passages found before deduplication and packing")
