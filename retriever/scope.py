"""The scope every SQL arm of passage search shares: who may see which child chunks, within which filters.

ACL (any-visible): ``principals && $viewer::text[]`` over the viewer's *expanded* principals; an empty
viewer matches nothing, so the arms return early without touching the database.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from services.viewer import Principals


@dataclass(frozen=True, slots=True)
class SearchScope:
    """Everything that restricts which child chunks an arm may return."""

    workspace: str
    viewer: Principals
    source_systems: tuple[str, ...] = ()
    kinds: tuple[str, ...] = ()
    date_from: datetime | None = None
    date_to: datetime | None = None
    as_of: datetime | None = None
    author_ids: tuple[uuid.UUID, ...] | None = None  # None = no author filter; () = unresolved -> nothing
    believed_as_of: datetime | None = None  # belief time: only documents whose current version we held then
    participant_ids: tuple[uuid.UUID, ...] | None = None  # None = any; () = unresolved -> nothing

    @property
    def matches_nothing(self) -> bool:
        return (
            not self.viewer
            or (self.author_ids is not None and not self.author_ids)
            or (self.participant_ids is not None and not self.participant_ids)
        )


@dataclass
class Where:
    """A WHERE clause under construction with positional parameters."""

    params: list[Any] = field(default_factory=list)
    parts: list[str] = field(default_factory=list)

    def arg(self, value: Any, cast: str = "") -> str:
        self.params.append(value)
        return f"${len(self.params)}{cast}"

    def add(self, sql: str) -> None:
        self.parts.append(sql)

    def sql(self) -> str:
        return " AND ".join(self.parts)


def scope_where(scope: SearchScope, alias: str = "", where: Where | None = None, *, live: bool = False) -> Where:
    """Child chunks, not tombstoned, in the workspace, visible to the viewer, within the filters.

    ``NOT is_parent AND NOT deleted`` come first and verbatim so the partial GIN indexes match; ``live``
    leaves them out for ``chunk_lexemes``, which holds live child chunks only (migration 0009).
    """
    a = f"{alias}." if alias else ""
    w = where or Where()
    if not live:
        w.add(f"NOT {a}is_parent AND NOT {a}deleted")
    w.add(f"{a}principals && {w.arg(list(scope.viewer), '::text[]')}")
    w.add(f"{a}workspace = {w.arg(scope.workspace)}")
    if scope.source_systems:
        w.add(f"{a}source_system = ANY({w.arg(list(scope.source_systems), '::text[]')})")
    if scope.kinds:
        w.add(f"{a}kind = ANY({w.arg(list(scope.kinds), '::text[]')})")
    if scope.date_from is not None:
        w.add(f"{a}event_time >= {w.arg(scope.date_from)}")
    if scope.date_to is not None:
        w.add(f"{a}event_time < {w.arg(scope.date_to)}")
    if scope.as_of is not None:
        w.add(f"{a}event_time <= {w.arg(scope.as_of)}")
    # a memory absorbed by a consolidation ranks no longer from its survivor's time on (migration 0013)
    ref = w.arg(scope.as_of) if scope.as_of is not None else "now()"
    w.add(f"NOT EXISTS (SELECT 1 FROM memory_hidden mh WHERE mh.chunk_id = {a}id AND mh.hidden_from <= {ref})")
    if scope.author_ids is not None:
        w.add(f"{a}author_person_id = ANY({w.arg(list(scope.author_ids), '::uuid[]')})")
    if scope.participant_ids is not None:  # the person takes part in the document (any role, author included)
        w.add(
            f"EXISTS (SELECT 1 FROM participants px WHERE px.document_id = {a}document_id"
            f" AND px.person_id = ANY({w.arg(list(scope.participant_ids), '::uuid[]')}))"
        )
    if scope.believed_as_of is not None:  # belief upper-bounds the document's updated_at
        w.add(
            f"EXISTS (SELECT 1 FROM documents bd WHERE bd.id = {a}document_id"
            f" AND bd.updated_at <= {w.arg(scope.believed_as_of)})"
        )
    return w


def filtered(scope: SearchScope) -> bool:
    """Whether the scope narrows the viewer's chunks by more than the ACL (source, kind, time, people)."""
    return bool(
        scope.source_systems
        or scope.kinds
        or scope.date_from
        or scope.date_to
        or scope.as_of
        or scope.author_ids is not None
        or scope.participant_ids is not None
        or scope.believed_as_of
    )
