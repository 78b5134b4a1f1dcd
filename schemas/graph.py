"""Graph contracts: ``GraphEvent`` (extractor -> conflicts on ``om.graph.v1``), graph read models and
the graph tool requests (``/tools/query_facts``, ``/tools/diff_facts``, ``/tools/query_paths``)."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator
from pydantic_core import PydanticCustomError

from schemas.validation import BoundedDatetime, SafeStr

TimeGrain = Literal["day", "month", "quarter", "year", "unknown"]
TIME_GRAINS: tuple[str, ...] = ("day", "month", "quarter", "year", "unknown")
Axis = Literal["world", "belief"]
Direction = Literal["outgoing", "incoming"]


class _Event(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


# --- om.graph.v1 -----------------------------------------------------------------------------


class IdentityKey(_Event):
    namespace: str
    value: str
    verified: bool = False


class ExtractedEntity(_Event):
    """An entity as the source wrote it. ``person_id`` is set when the extractor resolved a person."""

    ref: int = Field(description="index referenced by facts of the same event")
    type: str
    name: str
    identity: IdentityKey | None = None
    person_id: uuid.UUID | None = None
    entity_id: uuid.UUID | None = Field(default=None, description="set for documents/meetings (known ids)")


class Evidence(_Event):
    document_id: uuid.UUID
    chunk_id: uuid.UUID | None = None
    span_start: int = 0
    span_end: int = 0


class ExtractedFact(_Event):
    """A claim (``value``) or relationship (``object``) with its evidence span."""

    subject: int
    predicate: str
    object: int | None = None
    value: str | None = None
    confidence: float = Field(ge=0, le=1)
    rule: str = ""
    source: Literal["pattern", "structured", "llm", "mention"] = "pattern"
    evidence: Evidence

    @model_validator(mode="after")
    def _shape(self) -> ExtractedFact:
        if (self.object is None) == (self.value is None):
            raise ValueError("exactly one of object / value")
        return self


class PersonIdentities(_Event):
    """All identity keys one author/participant carried in the envelope (identity-merge input)."""

    person_id: uuid.UUID | None = None
    display_name: str | None = None
    keys: list[IdentityKey] = Field(default_factory=list, max_length=64)


class GraphEvent(_Event):
    """Everything the extractor derived from ONE document version. The conflicts stage replaces the
    document's previous evidence with this set (an empty set on delete)."""

    schema_version: int = 1
    event_id: uuid.UUID
    workspace: str
    document_id: uuid.UUID
    key: str
    version: int
    deleted: bool = False
    event_time: datetime
    time_grain: TimeGrain = "day"
    extractor: str = "patterns"
    extractor_version: str = "1"
    entities: list[ExtractedEntity] = Field(default_factory=list, max_length=20_000)
    facts: list[ExtractedFact] = Field(default_factory=list, max_length=50_000)
    identities: list[PersonIdentities] = Field(default_factory=list, max_length=1_001)
    context_person_ids: list[uuid.UUID] = Field(
        default_factory=list, description="author + participants: first choice when resolving a bare name"
    )


# --- read models -----------------------------------------------------------------------------


class _Read(BaseModel):
    model_config = ConfigDict(frozen=True)


class EntityMatch(_Read):
    type: str
    id: uuid.UUID
    name: str
    score: float = 1.0


class EntityBrief(_Read):
    type: str
    id: uuid.UUID
    name: str


class FactEvidence(_Read):
    document_id: uuid.UUID
    chunk_id: uuid.UUID | None = None
    span_start: int = 0
    span_end: int = 0


class Fact(_Read):
    id: uuid.UUID
    subject: EntityBrief
    predicate: str
    object: EntityBrief | None = None
    value: str | None = None
    valid_from: datetime
    valid_to: datetime | None = None
    recorded_at: datetime
    invalidated_at: datetime | None = None
    time_grain: TimeGrain = "day"
    confidence: float
    status: str = "active"
    evidence: list[FactEvidence] = Field(default_factory=list)
    direction: Direction | None = Field(
        default=None,
        description="relative to the entity the read asked about: outgoing = it is the subject, incoming = the object",
    )


class FactChange(_Read):
    """A slot whose value differs between the two snapshots."""

    subject: EntityBrief
    predicate: str
    before: list[Fact]
    after: list[Fact]


class FactDiff(_Read):
    axis: Axis
    from_time: datetime
    to_time: datetime
    added: list[Fact] = Field(default_factory=list)
    removed: list[Fact] = Field(default_factory=list)
    changed: list[FactChange] = Field(default_factory=list)


class PathStep(_Read):
    fact_id: uuid.UUID
    predicate: str
    direction: Direction
    source: EntityBrief
    target: EntityBrief


class Path(_Read):
    seed: EntityBrief
    nodes: list[EntityBrief]
    steps: list[PathStep]
    score: float


class Collaborator(_Read):
    person: EntityBrief
    count: int
    last_seen: datetime
    weight: float


class ProjectLink(_Read):
    """A person↔project (or product) collaboration edge: the person authored or took part in visible
    documents that name the project. ``entity`` is the other end (the project on a person card, the
    person on a project card)."""

    entity: EntityBrief
    roles: list[Literal["author", "participant"]]
    count: int = Field(description="visible documents behind the edge")
    last_seen: datetime
    weight: float = Field(description="author 1.0 / participant 0.5 per document, decayed to now")
    evidence: list[uuid.UUID] = Field(default_factory=list, description="most recent evidence document ids")


class PersonCard(_Read):
    id: uuid.UUID
    name: str
    email: str | None = None
    platform_user_id: str | None = None
    aliases: list[str] = Field(default_factory=list)
    facts: list[Fact] = Field(default_factory=list)
    incoming: list[Fact] = Field(default_factory=list)
    collaborators: list[Collaborator] = Field(default_factory=list)
    projects: list[ProjectLink] = Field(default_factory=list)


class EntityCard(_Read):
    id: uuid.UUID
    type: str
    name: str
    aliases: list[str] = Field(default_factory=list)
    facts: list[Fact] = Field(default_factory=list)
    incoming: list[Fact] = Field(default_factory=list)
    contributors: list[ProjectLink] = Field(default_factory=list, description="projects/products: their people")


# --- tool requests ---------------------------------------------------------------------------


class _Request(BaseModel):
    model_config = ConfigDict(extra="forbid")

    workspace: SafeStr = Field(default="default", min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_.\-]+$")


class SubjectRef(BaseModel):
    model_config = ConfigDict(extra="forbid")

    type: SafeStr = Field(min_length=1, max_length=64, description='the entity type, e.g. "person", "team", "project"')
    id: uuid.UUID = Field(description="the entity id, as returned in an earlier answer")


class _Temporal(_Request):
    as_of: BoundedDatetime | None = Field(default=None, description="what held at this time (ISO 8601); default: now")
    believed_as_of: BoundedDatetime | None = Field(
        default=None, description="what was recorded as known at this time (ISO 8601)"
    )
    as_of_grain: TimeGrain | None = Field(default=None, description="how precise as_of is: day, month, quarter or year")


class QueryFactsRequest(_Temporal):
    subjects: list[SubjectRef] = Field(
        default_factory=list, max_length=50, description="the entities to get facts about, by type and id"
    )
    about: SafeStr | None = Field(
        default=None, min_length=1, max_length=200, description="or: the name of a person, team or project"
    )
    limit: int = Field(default=50, ge=1, le=500, description="how many facts to return at most (1 to 500)")

    @model_validator(mode="after")
    def _needs_subject(self) -> QueryFactsRequest:
        if not self.subjects and not self.about:
            raise PydanticCustomError("missing_subject", "give subjects or about", {"path": "subjects"})
        return self


class DiffFactsRequest(_Request):
    subjects: list[SubjectRef] = Field(
        default_factory=list, max_length=50, description="the entities to compare, by type and id"
    )
    about: SafeStr | None = Field(
        default=None, min_length=1, max_length=200, description="or: the name of a person, team or project"
    )
    from_time: BoundedDatetime = Field(description="the start of the period (ISO 8601)")
    to_time: BoundedDatetime = Field(description="the end of the period (ISO 8601)")
    axis: Axis = Field(
        default="world",
        description="world: what changed in reality over the period; belief: what changed in what was recorded",
    )

    @model_validator(mode="after")
    def _needs_subject(self) -> DiffFactsRequest:
        if not self.subjects and not self.about:
            raise PydanticCustomError("missing_subject", "give subjects or about", {"path": "subjects"})
        return self


class QueryPathsRequest(_Temporal):
    seeds: list[SubjectRef] = Field(
        default_factory=list, max_length=20, description="the entities to start from, by type and id"
    )
    about: SafeStr | None = Field(
        default=None, min_length=1, max_length=200, description="or: the name of a person, team or project"
    )
    max_depth: int = Field(default=2, ge=1, le=4, description="how many relationship hops to follow (1 to 4)")
    max_fanout: int = Field(
        default=20, ge=1, le=100, description="how many relationships to follow from each entity (1 to 100)"
    )
    limit: int = Field(default=20, ge=1, le=200, description="how many paths to return at most (1 to 200)")

    @model_validator(mode="after")
    def _needs_seed(self) -> QueryPathsRequest:
        if not self.seeds and not self.about:
            raise PydanticCustomError("missing_seed", "give seeds or about", {"path": "seeds"})
        return self


class FactsResponse(_Read):
    subjects: list[EntityBrief]
    facts: list[Fact]


class PathsResponse(_Read):
    seeds: list[EntityBrief]
    paths: list[Path]
    partial: bool = Field(
        default=False, description="the walk's work budget ran out: paths are complete only up to depth_walked"
    )
    depth_walked: int | None = Field(default=None, description="the depth the returned paths were walked to")
