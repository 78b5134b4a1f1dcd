"""The wire contracts of the agent tools — ``retrieve_context``, ``search_knowledge_base``, ``preload`` and the
Kafka RPC envelopes — in one place: the server's ``schemas.tools`` and ``schemas.preload`` re-export these
classes, so the SDK and the server validate with the very same models (and the SDK imports nothing of the
server). The memory verbs' contracts are :mod:`orgmem_sdk.memory_models`.

Limits are clamped, not rejected (``limit`` to 1..50, ``max_tokens`` to 1..100,000); malformed values
(an unknown ``mode``/``as_of_grain``, a query over 2,000 characters) fail validation naming the field.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StringConstraints, field_validator

from orgmem_sdk.validation import BoundedDatetime, Principal, storable_value

MAX_QUERY_CHARS = 2_000
MAX_LIMIT = 50
DEFAULT_LIMIT = 10
MAX_TOKENS = 100_000

Mode = Literal["vector_first", "graph_first", "joint", "fabric"]
Grain = Literal["day", "month", "quarter", "year", "unknown"]
Arms = Literal["full", "hybrid", "lexical", "dense"]
_STORABLE = AfterValidator(storable_value)  # no NUL, no lone surrogate: what Postgres and UTF-8 can carry
Query = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=MAX_QUERY_CHARS), _STORABLE]
Workspace = Annotated[str, StringConstraints(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9_.:\-]+$")]
ShortName = Annotated[str, StringConstraints(min_length=1, max_length=128), _STORABLE]
About = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=200), _STORABLE]


def _aware(value: datetime | None) -> datetime | None:
    if value is not None and value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    return value


def _clamp(value: Any, lo: int, hi: int) -> Any:
    if isinstance(value, int) and not isinstance(value, bool):
        return min(hi, max(lo, value))
    return value


class _Req(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Subject(_Req):
    """An explicit graph seed, e.g. ``{"type": "person", "id": "<uuid>"}``."""

    type: ShortName = Field(description='the entity type, e.g. "person", "team", "project"')
    id: uuid.UUID = Field(description="the entity id, as returned in an earlier answer (subjects, facts, paths)")


class PassageFilters(_Req):
    source_systems: list[ShortName] = Field(
        default_factory=list,
        max_length=32,
        description='only passages from these source systems, e.g. ["slack", "jira"]; empty: all',
    )
    kinds: list[ShortName] = Field(
        default_factory=list,
        max_length=16,
        description='only these kinds of document, e.g. ["message", "ticket", "page"]; empty: all',
    )
    date_from: BoundedDatetime | None = Field(
        default=None, description="only passages written at or after this time (ISO 8601)"
    )
    date_to: BoundedDatetime | None = Field(
        default=None, description="only passages written before this time (ISO 8601)"
    )
    author: Annotated[str, StringConstraints(min_length=1, max_length=320), _STORABLE] | None = Field(
        default=None, description="only passages written by this person: their id (uuid) or email"
    )

    @field_validator("date_from", "date_to")
    @classmethod
    def _tz(cls, v: datetime | None) -> datetime | None:
        return _aware(v)


class SearchKnowledgeBaseRequest(_Req):
    query: Query = Field(description="what you are looking for, in natural language (up to 2,000 characters)")
    workspace: Workspace = Field(default="default", description="operators only: the workspace to read")
    limit: int = Field(default=DEFAULT_LIMIT, description="how many passages to return at most (1 to 50)")
    filters: PassageFilters = Field(
        default_factory=PassageFilters, description="narrow the search by source, kind, date range or author"
    )
    as_of: BoundedDatetime | None = Field(
        default=None, description="only passages written up to this time (ISO 8601): the state as of then"
    )
    arms: Arms = Field(default="full", description="operators only: which retrieval arms to fuse (evaluation)")

    @field_validator("limit", mode="before")
    @classmethod
    def _clamp_limit(cls, v: Any) -> Any:
        return _clamp(v, 1, MAX_LIMIT)

    @field_validator("as_of")
    @classmethod
    def _tz_as_of(cls, v: datetime | None) -> datetime | None:
        return _aware(v)


class RetrieveContextRequest(SearchKnowledgeBaseRequest):
    mode: Mode = Field(
        default="vector_first",
        description="vector_first (default): search passages, then add graph facts; graph_first: start from "
        "the entities in subjects/about and their relationships; joint: both equally",
    )
    subjects: list[Subject] = Field(
        default_factory=list, max_length=20, description="entities to anchor on, by type and id (up to 20)"
    )
    about: Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=200), _STORABLE] | None = (
        Field(default=None, description="the name of a person, team or project the question is about")
    )
    believed_as_of: BoundedDatetime | None = Field(
        default=None, description="answer with what was recorded as known at this time (ISO 8601)"
    )
    as_of_grain: Grain | None = Field(
        default=None, description="how precise as_of is: day, month, quarter or year (default: read from the query)"
    )
    max_tokens: int | None = Field(
        default=None, description="the most tokens the answer may take (1 to 100,000); default: no limit"
    )
    synthesize: bool = Field(default=False, description="true: also return a short written answer with citations")

    @field_validator("max_tokens", mode="before")
    @classmethod
    def _clamp_tokens(cls, v: Any) -> Any:
        return _clamp(v, 1, MAX_TOKENS)

    @field_validator("believed_as_of")
    @classmethod
    def _tz_believed(cls, v: datetime | None) -> datetime | None:
        return _aware(v)


class WindowMember(BaseModel):
    chunk_id: uuid.UUID
    external_id: str


class Passage(BaseModel):
    document_id: uuid.UUID
    source_system: str
    external_id: str
    chunk_id: uuid.UUID
    text: str = Field(description="readable parent-section text (possibly truncated by packing)")
    snippet: str = Field(description="the ranked child chunk")
    title: str | None = None
    score: float
    channel_ranks: dict[str, int] = Field(default_factory=dict)
    scope: str = "other"
    event_time: datetime
    kind: str
    url: str | None = None
    cross_validated: bool | None = Field(
        default=None, description="mode fabric: the graph returned a fact this passage states"
    )
    graph_relations: list[dict[str, str]] | None = Field(
        default=None, description="mode fabric: relations of the graph entities this passage names"
    )
    window: list[WindowMember] | None = Field(
        default=None,
        description="arms full, a message: the hit and the viewer-visible neighbours of its thread that complete it, "
        "in time order (read their text with the ids)",
    )


class SearchKnowledgeBaseResponse(BaseModel):
    passages: list[Passage]
    diagnostics: dict[str, Any] = Field(default_factory=dict)


class RetrieveContextResponse(BaseModel):
    passages: list[Passage]
    search_facts: list[dict[str, Any]] = Field(default_factory=list)
    structured_facts: list[dict[str, Any]] = Field(default_factory=list)
    paths: list[dict[str, Any]] = Field(default_factory=list)
    fact_diffs: list[dict[str, Any]] = Field(default_factory=list)
    temporal_plan: dict[str, Any] | None = None
    gaps: dict[str, Any] | None = None
    answer: str | None = Field(default=None, description="synthesis, or a numbered citation list fallback")
    diagnostics: dict[str, Any] = Field(default_factory=dict)


class RpcViewer(_Req):
    """The human the agent acts for. The Kafka topic's ACLs authenticate the producing service."""

    principal_id: Principal | None = None
    groups: list[Principal] | None = Field(
        default=None, max_length=512, description="None: the principal's groups from the org directory"
    )

    @field_validator("principal_id")
    @classmethod
    def _user(cls, v: str | None) -> str | None:
        if v is not None and not v.lower().startswith("user:"):
            raise ValueError("principal_id must be user:<uuid>")
        return v

    @field_validator("groups")
    @classmethod
    def _groups(cls, v: list[str] | None) -> list[str] | None:
        if v is not None and any(not g.lower().startswith("group:") for g in v):
            raise ValueError("groups must be group:<uuid>")
        return v


class RpcRequest(_Req):
    """Body of a record on ``<ns>.rpc.retrieve.v1``; headers carry ``reply_to``, ``correlation_id``
    and ``deadline`` (epoch milliseconds)."""

    tool: ShortName = Field(default="retrieve_context", description="a tool of the tool catalogue, by name")
    viewer: RpcViewer = Field(default_factory=RpcViewer)
    request: dict[str, Any]


class RpcError(BaseModel):
    type: str
    message: str
    status: int = 500
    field: str | None = None
    retry_after_s: float | None = Field(default=None, description="with status 429: when to try again")


class RpcReply(BaseModel):
    """Body of a reply record; the ``correlation_id`` header matches the request's."""

    ok: bool
    result: dict[str, Any] | None = None
    error: RpcError | None = None


# ---- preload: the block an agent framework injects before a turn ----------------------------------------
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
