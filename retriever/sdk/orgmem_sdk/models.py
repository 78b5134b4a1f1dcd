"""The SDK's wire contracts: copies of the server's ``schemas.tools`` and ``schemas.memory`` models the
agent-side code sends and receives, so ``orgmem_sdk`` ships without the server.

Kept equal to the server's by ``tests/unit/retriever/test_sdk_package.py`` (same JSON Schemas, same
validation on the same inputs); regenerate by copying when a contract changes.
"""

from __future__ import annotations

import re
import uuid
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StringConstraints, field_validator
from pydantic_core import PydanticCustomError

UNSTORABLE_RE = re.compile("[\x00\ud800-\udfff]")


MIN_QUERY_TIME = datetime(1000, 1, 1, tzinfo=UTC)


MAX_QUERY_TIME = datetime(9000, 12, 31, 23, 59, 59, tzinfo=UTC)


PRINCIPAL_RE = re.compile(r"^(user|group):[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")


Principal = Annotated[str, StringConstraints(pattern=PRINCIPAL_RE.pattern)]


def storable(value: str, path: str = "") -> str:
    """The string unchanged, or a ``unstorable_string`` error: Postgres text holds no NUL and UTF-8 no
    lone surrogate."""
    m = UNSTORABLE_RE.search(value)
    if m is not None:
        what = "a NUL character" if m.group() == "\x00" else "a lone surrogate"
        raise PydanticCustomError(
            "unstorable_string",
            "{where}contains {what} at position {pos} (cannot be stored)",
            {"where": f"{path}: " if path else "", "what": what, "pos": m.start(), "path": path},
        )
    return value


def storable_value(value: str) -> str:
    return storable(value)


def utc_in_range(value: datetime, lo: datetime = MIN_QUERY_TIME, hi: datetime = MAX_QUERY_TIME) -> datetime:
    """Aware (naive = UTC) and, once moved to UTC, within [lo, hi]; an offset that overflows the
    datetime range is an error, not an exception."""
    if value.tzinfo is None or value.utcoffset() is None:
        value = value.replace(tzinfo=UTC)
    try:
        utc = value.astimezone(UTC)
    except (OverflowError, ValueError):
        raise ValueError("out of the supported date range") from None
    if not lo <= utc <= hi:
        raise ValueError(f"must be between {lo.isoformat()} and {hi.isoformat()}")
    return utc


BoundedDatetime = Annotated[datetime, AfterValidator(utc_in_range)]


MAX_QUERY_CHARS = 2_000


MAX_LIMIT = 50


DEFAULT_LIMIT = 10


MAX_TOKENS = 100_000


Mode = Literal["vector_first", "graph_first", "joint", "fabric"]


Grain = Literal["day", "month", "quarter", "year", "unknown"]


Arms = Literal["full", "hybrid", "lexical", "dense"]


Tool = Literal["retrieve_context", "search_knowledge_base", "remember", "forget"]


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

    type: ShortName
    id: uuid.UUID


class PassageFilters(_Req):
    source_systems: list[ShortName] = Field(default_factory=list, max_length=32)
    kinds: list[ShortName] = Field(default_factory=list, max_length=16)
    date_from: BoundedDatetime | None = Field(default=None, description="inclusive lower bound on event_time")
    date_to: BoundedDatetime | None = Field(default=None, description="exclusive upper bound on event_time")
    author: Annotated[str, StringConstraints(min_length=1, max_length=320), _STORABLE] | None = Field(
        default=None, description="author person id (uuid) or email"
    )

    @field_validator("date_from", "date_to")
    @classmethod
    def _tz(cls, v: datetime | None) -> datetime | None:
        return _aware(v)


class SearchKnowledgeBaseRequest(_Req):
    query: Query
    workspace: Workspace = "default"
    limit: int = Field(default=DEFAULT_LIMIT, description="clamped to 1..50")
    filters: PassageFilters = Field(default_factory=PassageFilters)
    as_of: BoundedDatetime | None = Field(default=None, description="upper bound on passage event_time")
    arms: Arms = Field(default="full", description="evaluation override: which arms to fuse")

    @field_validator("limit", mode="before")
    @classmethod
    def _clamp_limit(cls, v: Any) -> Any:
        return _clamp(v, 1, MAX_LIMIT)

    @field_validator("as_of")
    @classmethod
    def _tz_as_of(cls, v: datetime | None) -> datetime | None:
        return _aware(v)


class RetrieveContextRequest(SearchKnowledgeBaseRequest):
    mode: Mode = "vector_first"
    subjects: list[Subject] = Field(default_factory=list, max_length=20)
    about: Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=200), _STORABLE] | None = (
        None
    )
    believed_as_of: BoundedDatetime | None = None
    as_of_grain: Grain | None = Field(default=None, description="host value wins over the planner's grain")
    max_tokens: int | None = Field(default=None, description="packing budget, clamped to 1..100000")
    synthesize: bool = False

    @field_validator("max_tokens", mode="before")
    @classmethod
    def _clamp_tokens(cls, v: Any) -> Any:
        return _clamp(v, 1, MAX_TOKENS)

    @field_validator("believed_as_of")
    @classmethod
    def _tz_believed(cls, v: datetime | None) -> datetime | None:
        return _aware(v)


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

    tool: Annotated[str, StringConstraints(min_length=1, max_length=128)] = Field(
        default="retrieve_context", description="a tool of the tool catalogue, by name"
    )
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


# ---- preload (server: schemas/preload.py) ----------------------------------------------------------------
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
