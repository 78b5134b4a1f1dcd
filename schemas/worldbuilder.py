"""Worldbuilder contracts: ``/tools/worldbuilder_kb`` (hybrid search grouped per document with its people)
and ``/tools/worldbuilder_lookup`` (a deterministic profile of a person, team, project or glossary term in
which every field carries its evidence document ids and ``as_of``)."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, model_validator

from schemas.graph import EntityBrief, SubjectRef
from schemas.tools import MAX_LIMIT, PassageFilters, Query, Workspace

Name = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=200)]
ProfileKind = Literal["person", "team", "project", "product", "glossary_term", "organization", "other"]


class _Req(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class _Read(BaseModel):
    model_config = ConfigDict(frozen=True)


# --- worldbuilder_kb ---------------------------------------------------------------------------


class WorldbuilderKbRequest(_Req):
    query: Query = Field(description="what you are looking for, in natural language")
    workspace: Workspace = Field(default="default", description="operators only: the workspace to read")
    limit: int = Field(default=10, ge=1, le=MAX_LIMIT, description="how many documents to return at most")
    about: Name | None = Field(
        default=None, description="a person's name, email or id: only documents the person PARTICIPATES in"
    )
    author: Name | None = Field(default=None, description="a person's name, email or id: only documents they AUTHORED")
    filters: PassageFilters = Field(
        default_factory=PassageFilters, description="narrow the search by source, kind, date range or author"
    )
    as_of: datetime | None = Field(default=None, description="only documents written up to this time (ISO 8601)")

    @model_validator(mode="after")
    def _author_once(self) -> WorldbuilderKbRequest:
        if self.author and self.filters.author:
            raise ValueError("give author or filters.author, not both")
        return self


class KbPerson(_Read):
    person: EntityBrief
    roles: list[str] = Field(description="author / participant / … as recorded by the source")


class KbPassage(_Read):
    chunk_id: uuid.UUID
    text: str
    snippet: str
    score: float


class KbDocument(_Read):
    document_id: uuid.UUID
    source_system: str
    external_id: str
    title: str | None = None
    kind: str
    url: str | None = None
    event_time: datetime
    score: float = Field(description="best passage score")
    people: list[KbPerson] = Field(default_factory=list)
    passages: list[KbPassage] = Field(default_factory=list)


class WorldbuilderKbResponse(_Read):
    results: list[KbDocument]
    resolved: dict[str, list[EntityBrief]] = Field(
        default_factory=dict, description="the people `about` / `author` resolved to (visible only)"
    )
    diagnostics: dict[str, Any] = Field(default_factory=dict)


# --- worldbuilder_lookup -----------------------------------------------------------------------


class WorldbuilderLookupRequest(_Req):
    workspace: Workspace = Field(default="default", description="operators only: the workspace to read")
    name: Name | None = Field(default=None, description="the name of the person, team, project or term to look up")
    subject: SubjectRef | None = Field(default=None, description="or: the entity by type and id")
    type: ProfileKind | None = Field(default=None, description="what kind of thing name is, if you know it")
    synthesize: bool = Field(default=False, description="true: add a short written summary of the profile")

    @model_validator(mode="after")
    def _one_of(self) -> WorldbuilderLookupRequest:
        if (self.name is None) == (self.subject is None):
            raise ValueError("give exactly one of name / subject")
        return self


FieldSource = Literal["fact", "collaboration", "project_link", "activity", "alias", "summary"]


class ProfileField(_Read):
    """One profile value with what supports it. ``entity`` is set when the value is an entity."""

    value: str
    entity: EntityBrief | None = None
    evidence: list[uuid.UUID] = Field(default_factory=list, description="supporting document ids")
    as_of: datetime | None = Field(default=None, description="when the value held / was last seen")
    source: FieldSource = "fact"
    predicate: str | None = None


class Profile(_Read):
    subject: EntityBrief
    kind: ProfileKind
    summary: ProfileField | None = None
    title: ProfileField | None = None
    team: ProfileField | None = None
    manager: ProfileField | None = None
    reports: list[ProfileField] = Field(default_factory=list)
    current_projects: list[ProfileField] = Field(default_factory=list)
    key_collaborators: list[ProfileField] = Field(default_factory=list)
    members: list[ProfileField] = Field(default_factory=list, description="team members / project contributors")
    owners: list[ProfileField] = Field(default_factory=list, description="leads, owners, founders")
    part_of: ProfileField | None = None
    definition: ProfileField | None = None
    recent_activity: list[ProfileField] = Field(default_factory=list)
    aliases: list[ProfileField] = Field(default_factory=list)
    platform_user_id: str | None = None


class SynthesisNote(_Read):
    requested: bool
    used: bool
    reason: str


class WorldbuilderLookupResponse(_Read):
    profile: Profile
    cache: Literal["hit", "miss"]
    evidence_documents: list[uuid.UUID] = Field(description="every document the returned profile rests on")
    synthesis: SynthesisNote
    candidates: list[EntityBrief] = Field(default_factory=list, description="other visible matches for `name`")
