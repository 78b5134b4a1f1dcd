"""Contracts of the admin API (``/v1/admin/*``): health, spend and budgets, retention, legal holds,
audits and permission history. Data only."""

from __future__ import annotations

import uuid
from datetime import date, datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from schemas.validation import AwareBoundedDatetime, Days, NonNegativeBigInt

HealthStatus = Literal["ok", "degraded", "failing"]
NAME = r"^[A-Za-z0-9_.:\-*]{1,200}$"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class StageHealth(_Strict):
    stage: str
    group: str
    topic: str
    lag: int | None = Field(description="records in the stage's input topic not yet committed by its group")
    records_per_s: float | None = Field(description="records the stage processed per second over the last minute")
    oldest_unprocessed_age_s: float | None = Field(description="age of the oldest record not yet processed")
    dead_letters_waiting: int | None = Field(description="records in the stage's dead-letter topic")
    error: str | None = None


class InfraCheck(_Strict):
    name: str
    ok: bool
    detail: str
    latency_ms: float


class SpendAlert(_Strict):
    workspace: str
    model: str
    level: Literal["warning", "exhausted"] = Field(description="warning at 80 %, exhausted at 100 % of the budget")
    tokens_today: int
    daily_tokens: int
    ratio: float


class RetentionWarning(_Strict):
    workspace: str
    kind: Literal["purge_due", "blocked_by_hold", "blob_queue"]
    count: int
    detail: str


class AdminHealth(_Strict):
    status: HealthStatus
    checked_at: datetime
    stages: list[StageHealth]
    infrastructure: list[InfraCheck]
    spend_alerts: list[SpendAlert]
    retention_warnings: list[RetentionWarning]
    reasons: list[str] = Field(description="why the status is not ok")


class SpendRow(_Strict):
    day: date
    workspace: str
    provider: str
    model: str
    purpose: str
    calls: int
    items: int
    tokens: int


class Refusal(_Strict):
    day: date
    workspace: str
    model: str
    purpose: str
    reason: str
    count: int


class Budget(_Strict):
    workspace: str
    model: str = "*"
    daily_tokens: int


class SpendReport(_Strict):
    rows: list[SpendRow]
    budgets: list[Budget]
    refusals: list[Refusal]


class BudgetRequest(_Strict):
    daily_tokens: NonNegativeBigInt = Field(description="tokens per day for optional LLM work; 0 stops it")
    model: str = Field(default="*", pattern=NAME, description="a model name, or '*' for every model")


class RetentionPolicy(_Strict):
    workspace: str = Field(pattern=NAME)
    source_system: str = Field(default="*", pattern=NAME)
    kind: str = Field(default="*", pattern=NAME)
    max_age_days: Days | None = Field(default=None, gt=0, description="purge documents older than this (event time)")
    purge_tombstoned_after_days: Days | None = Field(
        default=None, ge=0, description="purge deleted documents this long after their tombstone"
    )

    @model_validator(mode="after")
    def _something(self) -> RetentionPolicy:
        if self.max_age_days is None and self.purge_tombstoned_after_days is None:
            raise ValueError("set max_age_days or purge_tombstoned_after_days")
        return self


class PurgeBatch(_Strict):
    workspace: str
    reason: Literal["max_age", "tombstoned"]
    policy: RetentionPolicy
    documents: int
    chunks: int
    versions: int
    evidence_links: int
    facts_retracted: int
    blobs: int
    document_ids: list[uuid.UUID]


class RetentionReport(_Strict):
    run_id: uuid.UUID
    applied: bool
    due: int = Field(description="documents the policies select (held ones excluded)")
    held: int = Field(description="documents the policies select that a legal hold keeps")
    batches: list[PurgeBatch]
    blobs_pending: int


class LegalHoldRequest(_Strict):
    workspace: str = Field(pattern=NAME)
    source_system: str | None = Field(default=None, pattern=NAME)
    document_ids: list[uuid.UUID] | None = Field(default=None, min_length=1, max_length=10_000)
    person_id: uuid.UUID | None = None
    from_time: AwareBoundedDatetime | None = None
    to_time: AwareBoundedDatetime | None = None
    reason: str = Field(min_length=1, max_length=2000)

    @model_validator(mode="after")
    def _range(self) -> LegalHoldRequest:
        if self.from_time and self.to_time and self.to_time <= self.from_time:
            raise ValueError("to_time must be after from_time")
        return self


class LegalHold(_Strict):
    id: uuid.UUID
    workspace: str
    source_system: str | None
    document_ids: list[uuid.UUID] | None
    person_id: uuid.UUID | None
    from_time: datetime | None
    to_time: datetime | None
    reason: str
    created_by: str
    created_at: datetime
    released_at: datetime | None
    released_by: str | None


class HeldDocument(_Strict):
    id: uuid.UUID
    workspace: str
    source_system: str
    external_id: str
    kind: str
    title: str | None
    event_time: datetime
    deleted_at: datetime | None
    blob_key: str | None
    envelope: str | None = Field(default=None, description="the archived raw envelope (include_envelope=true)")


class RetrievalAuditRow(_Strict):
    id: int
    at: datetime
    workspace: str
    viewer: str | None
    tool: str
    query_hash: str
    returned_ids: list[str]
    returned_documents: list[uuid.UUID]
    latency_ms: float


class RetrievalAuditPage(_Strict):
    items: list[RetrievalAuditRow]
    next_cursor: str | None = Field(description="pass as ?cursor= for the next page; null on the last page")


class IngressAuditRow(_Strict):
    id: int
    at: datetime
    caller: str
    envelope_id: uuid.UUID
    workspace: str
    source_system: str
    external_id: str
    op: str
    topic: str
    partition: int
    offset: int


class IngressAuditPage(_Strict):
    items: list[IngressAuditRow]
    next_cursor: str | None = Field(description="pass as ?cursor= for the next page; null on the last page")


class PurgeAuditRow(PurgeBatch):
    """A purge batch as its audit row records it: the batch, and when, by whom and in which run."""

    id: int
    run_id: uuid.UUID
    at: datetime
    actor: str


class PurgeAuditPage(_Strict):
    items: list[PurgeAuditRow]
    next_cursor: str | None = Field(description="pass as ?cursor= for the next page; null on the last page")


class AclState(_Strict):
    valid_from: datetime
    valid_to: datetime | None
    principals: list[str]
    deleted: bool


class DocumentAccess(_Strict):
    document_id: uuid.UUID
    as_of: datetime
    exists: bool = Field(description="the document existed (was ingested) at as_of")
    deleted: bool
    principals: list[str] = Field(
        description="principals holding the document at as_of (empty when deleted); members of a group's"
        " sub-groups see it too (org hierarchy)"
    )
    history: list[AclState]


class ViewerHit(_Strict):
    document_id: uuid.UUID
    external_id: str
    source_system: str
    kind: str
    title: str | None
    event_time: datetime
    matched_principals: list[str]


class ViewerAccess(_Strict):
    viewer: str
    as_of: datetime
    principals: list[str] = Field(description="the viewer's principals at as_of, groups expanded")
    membership_source: str
    query: str | None
    documents: list[ViewerHit]


# --- pipeline, dead letters, replay/rebuild jobs, why-not (the operator console's routes) -------------------

Stage = str
JobKind = Literal["redrive", "replay", "rebuild"]
JobState = Literal["running", "done", "failed"]


class LagSample(_Strict):
    at: datetime
    lag: dict[str, int] = Field(description="consumer lag per stage at that time")


class PausedStage(_Strict):
    stage: str
    down: list[str] = Field(description="the dependencies the stage waits for (object store, a vendor, ...)")
    detail: dict[str, str]
    paused_for_s: float


class BudgetUse(_Strict):
    workspace: str
    model: str
    daily_tokens: int
    tokens_today: int
    ratio: float
    level: Literal["warning", "exhausted"] | None


class PipelineStatus(_Strict):
    checked_at: datetime
    generation: str = Field(description="the active projection generation ('' = the base schema)")
    db_schema: str
    stages: list[StageHealth]
    history: list[LagSample] = Field(description="lag samples kept by this API process, oldest first (<= 15 min)")
    infrastructure: list[InfraCheck] = Field(description="the /readyz checks")
    paused: list[PausedStage] = Field(description="stages of this process waiting out a dependency outage")
    budgets: list[BudgetUse] = Field(description="spend today against each daily budget")


class DeadLetterItem(_Strict):
    stage: str
    position: str = Field(description="the dead letter's own topic:partition:offset (redrive one by it)")
    key: str
    error_class: str
    error_field: str | None
    message: str
    original: str = Field(description="original topic:partition:offset")
    failed_at: str | None
    stored_in: Literal["topic", "postgres"]
    payload: str = Field(description="the original value, pretty-printed when JSON, cut at 4,000 characters")
    payload_truncated: bool


class DeadLetterPage(_Strict):
    stage: str
    items: list[DeadLetterItem]
    classes: dict[str, int] = Field(description="dead letters per error class (before the class filter)")
    total: int
    scanned_all: bool = Field(description="false: more than 5,000 waiting; counts cover the first 5,000")


class RedriveRequest(_Strict):
    error_class: str | None = Field(default=None, max_length=200, description="only this error class")
    position: str | None = Field(
        default=None, max_length=400, pattern=r"^[^\s]+:\d+:\d+$", description="only this dead letter"
    )
    dry_run: bool = False


class ReplayRequest(_Strict):
    stage: str = Field(pattern=r"^[a-z_]{1,40}$")
    start: str = Field(
        default="earliest",
        alias="from",
        max_length=64,
        description="'earliest' or a timezone-aware ISO time",
    )

    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class Job(_Strict):
    id: uuid.UUID
    kind: JobKind
    stage: str | None
    state: JobState
    done: int = Field(description="records (replay, redrive) or envelopes (rebuild) handled so far")
    total: int | None = Field(description="what there is to do, from the lag when the job started")
    started_at: datetime
    finished_at: datetime | None
    detail: dict[str, str | int | float | None] = Field(default_factory=dict)
    error: str | None = None


class WhyNotStep(_Strict):
    step: str
    ok: bool
    detail: str


class WhyNotArm(_Strict):
    arm: str
    rank: int | None = Field(description="best rank of one of the document's chunks in that arm alone (top 50)")


class WhyNot(_Strict):
    external_id: str
    workspace: str
    document_id: uuid.UUID | None
    title: str | None
    viewer: list[str] = Field(description="the viewer's principals, groups expanded")
    visible: bool = Field(description="the viewer may see the document at as_of")
    visible_since: datetime | None = Field(description="start of the uninterrupted grant that covers as_of")
    arms: list[WhyNotArm]
    fused_rank: int | None = Field(description="rank after fusion, boosts and dedup in a 50-deep run")
    returned_rank: int | None = Field(description="rank among the passages of the query as asked")
    dropped_by: str = Field(
        description="not_found | deleted | acl | time | no_arm | limit | floor | duplicate | packing | returned"
    )
    steps: list[WhyNotStep]
