"""``ChangeEnvelope``: the one event connectors produce to ``om.envelopes.v1``."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from orgmem_sdk.validation import PRINCIPAL_RE as PRINCIPAL_RE  # one source: the SDK's value rules
from orgmem_sdk.validation import Principal as Principal
from orgmem_sdk.validation import principal_set
from schemas.procedures import ProcedureSpec
from schemas.validation import MAX_NESTING, Rejected, check_structured, field_errors, load_json, scan, storable_value

SCHEMA_VERSION = 1
MAX_TEXT_CHARS = 2_000_000  # ~2 MB of text per document; larger bodies are rejected, not truncated
MIN_EVENT_YEAR = 1990
MAX_FUTURE = timedelta(days=1)

_STORABLE = AfterValidator(storable_value)
ShortStr = Annotated[str, StringConstraints(min_length=1, max_length=512), _STORABLE]


class Op(StrEnum):
    UPSERT = "upsert"
    DELETE = "delete"
    ACL = "acl"
    MEMBERSHIP = "membership"


class DocumentKind(StrEnum):
    MESSAGE = "message"
    DOCUMENT = "document"
    EMAIL = "email"
    MEETING = "meeting"
    TICKET = "ticket"
    PULL_REQUEST = "pull_request"
    PROCEDURE = "procedure"  # procedural memory: the document carries a ProcedureSpec


SOURCE_KINDS = frozenset(k for k in DocumentKind if k is not DocumentKind.PROCEDURE)
"""Kinds connectors produce (``procedure`` is written by Org Memory's own procedural-memory route)."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, str_strip_whitespace=True)


def check_event_time(value: datetime, *, now: datetime | None = None) -> datetime:
    """Timezone-aware, year >= 1990 and not more than one day in the future — both judged in UTC, the
    form the envelope is stored and re-read in. Returns UTC."""
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError("must be timezone-aware (e.g. 2024-05-08T13:56:00Z)")
    try:
        utc = value.astimezone(UTC)
    except (OverflowError, ValueError):
        raise ValueError("out of the supported date range") from None
    if utc.year < MIN_EVENT_YEAR:
        raise ValueError(f"year must be >= {MIN_EVENT_YEAR} (in UTC)")
    now = now or datetime.now(UTC)
    if utc > now + MAX_FUTURE:
        raise ValueError("must not be more than one day in the future")
    return utc


class Source(_Strict):
    system: Annotated[str, StringConstraints(min_length=1, max_length=64, pattern=r"^[a-z0-9_.\-]+$")]
    external_id: ShortStr
    url: Annotated[str, StringConstraints(max_length=2048), _STORABLE] | None = None


class Document(_Strict):
    kind: DocumentKind
    title: Annotated[str, StringConstraints(max_length=1024), _STORABLE] | None = None
    text: Annotated[str, StringConstraints(max_length=MAX_TEXT_CHARS), _STORABLE] = ""
    thread_external_id: ShortStr | None = None
    parent_external_id: ShortStr | None = None
    procedure: ProcedureSpec | None = None

    @model_validator(mode="after")
    def _procedure_kind(self) -> Document:
        if (self.kind is DocumentKind.PROCEDURE) != (self.procedure is not None):
            raise ValueError("document.procedure is required for kind 'procedure' and only allowed there")
        return self


class Identity(_Strict):
    namespace: Annotated[str, StringConstraints(min_length=1, max_length=64), _STORABLE]
    value: ShortStr
    verified: bool = False


class Person(_Strict):
    email: Annotated[str, StringConstraints(max_length=320, pattern=r"^[^@\s]+@[^@\s]+$"), _STORABLE] | None = None
    display_name: Annotated[str, StringConstraints(max_length=256), _STORABLE] | None = None
    identities: list[Identity] = Field(default_factory=list, max_length=32)

    @field_validator("email")
    @classmethod
    def _lower_email(cls, v: str | None) -> str | None:
        if v and len(v.lower()) > 320:  # lower-casing can lengthen a string ("İ" -> "i̇")
            raise ValueError("at most 320 characters once lower-cased")
        return v.lower() if v else v

    def identity_keys(self) -> list[tuple[str, str]]:
        """(namespace, value) pairs usable for identity resolution, email first."""
        keys: list[tuple[str, str]] = []
        if self.email:
            keys.append(("email", self.email))
        keys.extend((i.namespace, i.value) for i in self.identities)
        return keys


class Participant(Person):
    role: Annotated[str, StringConstraints(min_length=1, max_length=32), _STORABLE] = "participant"


class Acl(_Strict):
    principals: list[Principal] = Field(default_factory=list, max_length=1024)
    acl_event_time: datetime | None = None

    @field_validator("principals")
    @classmethod
    def _dedup(cls, v: list[str]) -> list[str]:
        return principal_set(v)

    @field_validator("acl_event_time")
    @classmethod
    def _aware(cls, v: datetime | None) -> datetime | None:
        return None if v is None else check_event_time(v)


class Membership(_Strict):
    """Org directory change (op ``membership``): members added to / removed from one group at ``event_time``.

    Applied last-writer-wins per (group, member) by event time; stored with validity intervals
    (``group_memberships``), so "who was in group X at T" is answerable."""

    group: Principal
    added: list[Principal] = Field(default_factory=list, max_length=10_000)
    removed: list[Principal] = Field(default_factory=list, max_length=10_000)

    @field_validator("group")
    @classmethod
    def _group(cls, v: str) -> str:
        if not v.lower().startswith("group:"):
            raise ValueError("must be group:<uuid>")
        return v.lower()

    @field_validator("added", "removed")
    @classmethod
    def _members(cls, v: list[str]) -> list[str]:
        return principal_set(v)


class ChangeEnvelope(_Strict):
    """A change to one source document. Identity = (workspace, source.system, source.external_id)."""

    schema_version: int = Field(default=SCHEMA_VERSION, ge=1, le=SCHEMA_VERSION)
    envelope_id: uuid.UUID
    workspace: Annotated[str, StringConstraints(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_.\-]+$")] = "default"
    op: Op = Op.UPSERT
    source: Source
    event_time: datetime
    document: Document | None = Field(default=None, validate_default=True)
    author: Person | None = None
    participants: list[Participant] = Field(default_factory=list, max_length=1000)
    acl: Acl = Field(default_factory=Acl)
    structured_fields: dict[str, Any] = Field(default_factory=dict, max_length=64)
    membership: Membership | None = Field(default=None, validate_default=True)

    @field_validator("membership")
    @classmethod
    def _membership_for_op(cls, v: Membership | None, info: ValidationInfo) -> Membership | None:
        op = info.data.get("op", Op.UPSERT)
        if op is Op.MEMBERSHIP:
            if v is None:
                raise ValueError("membership is required when op is 'membership'")
            if not v.added and not v.removed:
                raise ValueError("membership needs at least one added or removed member")
            if set(v.added) & set(v.removed):
                raise ValueError("a member cannot be both added and removed in one envelope")
        elif v is not None:
            raise ValueError("membership is only allowed when op is 'membership'")
        return v

    @field_validator("event_time")
    @classmethod
    def _event_time(cls, v: datetime) -> datetime:
        return check_event_time(v)

    @field_validator("structured_fields")
    @classmethod
    def _structured(cls, v: dict[str, Any]) -> dict[str, Any]:
        check_structured(v)
        return v

    @field_validator("document")
    @classmethod
    def _document_for_upsert(cls, v: Document | None, info: ValidationInfo) -> Document | None:
        if v is None and info.data.get("op", Op.UPSERT) is Op.UPSERT:
            raise ValueError("document is required when op is 'upsert'")
        return v

    @property
    def key(self) -> str:
        """Kafka key and document identity."""
        return document_key(self.workspace, self.source.system, self.source.external_id)

    @property
    def effective_acl_time(self) -> datetime:
        return self.acl.acl_event_time or self.event_time


def needs_author_error(env: ChangeEnvelope) -> dict[str, str] | None:
    """The one rule for structured fields: they become person claims, so they need an author with an
    email or identity key to resolve to a person. ``None`` when the envelope satisfies it."""
    if env.structured_fields and (env.author is None or not env.author.identity_keys()):
        return {
            "field": "author",
            "msg": "structured_fields need an author with an email or identity key (unresolved author)",
            "type": "unresolved_author",
        }
    return None


def validate_envelope(obj: Any, *, prefix: str = "") -> ChangeEnvelope:
    """THE envelope check, used by HTTP ingress, the Python producer and the ingest stage alike: the
    contract plus the author rule. ``Rejected`` names the field (``prefix`` for batch items)."""
    scan(obj, max_depth=MAX_NESTING + 1, prefix=prefix)  # structured_fields sit one level below the body
    try:
        env = ChangeEnvelope.model_validate(obj)
    except ValidationError as exc:
        raise Rejected(field_errors(exc, prefix=prefix)) from None
    if (err := needs_author_error(env)) is not None:
        field = f"{prefix}.{err['field']}" if prefix else err["field"]
        raise Rejected([err | {"field": field}])
    return env


_NOT_PLAIN = ("\\u", "NaN", "Infinity")
"""Text the one-pass parse leaves to the full path: a ``\\u`` escape (the only way a NUL or a lone surrogate gets
into valid UTF-8 JSON) or a NaN/Infinity literal — inside a string they only send the text the long way."""


def _plain_envelope(raw: bytes | str) -> ChangeEnvelope | None:
    """The common case in one pass: pydantic parses and validates the JSON text itself (no Python dict, no
    second walk). Taken only when the text provably passes what :func:`load_json` and :func:`scan` check: no
    ``_NOT_PLAIN`` marker, no control character, at most ``MAX_NESTING + 1`` opening brackets (no nesting limit
    can be reached); the only free-form values, ``structured_fields``, are checked by the model itself (finite
    numbers, storable strings). Any error returns ``None`` so the full path produces it, naming the field."""
    try:
        text = raw.decode("utf-8") if isinstance(raw, bytes | bytearray) else raw
    except UnicodeDecodeError:
        return None
    if text.count("{") + text.count("[") > MAX_NESTING + 1 or any(m in text for m in _NOT_PLAIN):
        return None
    if not text.isprintable():  # a raw control character (JSON strings hold none; the full path says where)
        return None
    try:
        env = ChangeEnvelope.model_validate_json(text)
    except ValidationError:
        return None
    if env.document is not None and env.document.procedure is not None:
        return None  # free-form values (diagnostics) that only the full path's scan checks for infinities
    return env if needs_author_error(env) is None else None


def envelope_from_json(raw: bytes | str) -> ChangeEnvelope:
    """Parse and validate one envelope record/body: the same result as ``validate_envelope(load_json(raw))``
    (see ``schemas.validation.load_json``), in one pass when the text is plain (``_plain_envelope``)."""
    return _plain_envelope(raw) or validate_envelope(load_json(raw))


def document_key(workspace: str, system: str, external_id: str) -> str:
    return f"{workspace}/{system}/{external_id}"
