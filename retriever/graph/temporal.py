"""Pure temporal and ACL SQL builders for graph reads (no I/O; the SQL is returned as text + params).

Temporal rules (docs/architecture.md "Bi-temporal graph"):
- both axes omitted: currently active facts — valid now and not invalidated;
- ``as_of`` (world) with no ``believed_as_of``: what we believe NOW held at ``as_of``;
- ``believed_as_of`` alone: what we believed then, about then (world validity at the belief instant);
- both: world at ``as_of`` under the belief held at ``believed_as_of``;
- ``as_of_grain`` widens the world point to its day / month / quarter / year (a fact matches when its
  validity overlaps that window); ``unknown`` keeps the point.
ACL rule (all-visible, ``services.sources``): a fact is visible when it has at least one evidence document
that is not deleted and EVERY non-deleted evidence document shares a principal with the viewer.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from services.sources import all_visible_sql, fact_sources

GRAINS = ("day", "month", "quarter", "year", "unknown")


def grain_window(at: datetime, grain: str | None) -> tuple[datetime, datetime] | None:
    """The ``[start, end)`` window ``at`` falls in at ``grain``; None for a point (no/unknown grain)."""
    if grain is None or grain == "unknown":
        return None
    if grain not in GRAINS:
        raise ValueError(f"invalid as_of_grain {grain!r}; expected one of {', '.join(GRAINS)}")
    at = at if at.tzinfo else at.replace(tzinfo=UTC)
    if grain == "day":
        start = at.replace(hour=0, minute=0, second=0, microsecond=0)
        return start, start + timedelta(days=1)
    if grain == "month":
        start = at.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
        return start, _add_months(start, 1)
    if grain == "quarter":
        start = at.replace(month=3 * ((at.month - 1) // 3) + 1, day=1, hour=0, minute=0, second=0, microsecond=0)
        return start, _add_months(start, 3)
    start = at.replace(month=1, day=1, hour=0, minute=0, second=0, microsecond=0)
    return start, start.replace(year=start.year + 1)


def _add_months(start: datetime, months: int) -> datetime:
    month = start.month - 1 + months
    return start.replace(year=start.year + month // 12, month=month % 12 + 1)


@dataclass
class Params:
    """Positional parameters of one statement: ``p.add(value)`` returns its ``$n``."""

    values: list[Any] = field(default_factory=list)

    def add(self, value: Any) -> str:
        self.values.append(value)
        return f"${len(self.values)}"


def temporal_sql(
    p: Params,
    alias: str = "f",
    *,
    as_of: datetime | None = None,
    believed_as_of: datetime | None = None,
    as_of_grain: str | None = None,
) -> str:
    """The WHERE fragment selecting facts by the rules in the module docstring."""
    world_at = as_of if as_of is not None else believed_as_of
    parts: list[str] = []
    if world_at is None:
        parts.append(f"{alias}.valid_from <= now() AND ({alias}.valid_to IS NULL OR {alias}.valid_to > now())")
    else:
        window = grain_window(world_at, as_of_grain)
        if window is None:
            t = p.add(world_at)
            parts.append(f"{alias}.valid_from <= {t} AND ({alias}.valid_to IS NULL OR {alias}.valid_to > {t})")
        else:
            ws, we = p.add(window[0]), p.add(window[1])
            parts.append(f"{alias}.valid_from < {we} AND ({alias}.valid_to IS NULL OR {alias}.valid_to > {ws})")
    if believed_as_of is None:
        parts.append(f"{alias}.invalidated_at IS NULL")
    else:
        b = p.add(believed_as_of)
        parts.append(f"{alias}.recorded_at <= {b} AND ({alias}.invalidated_at IS NULL OR {alias}.invalidated_at > {b})")
    return " AND ".join(parts)


def fact_acl_sql(viewer_param: str, alias: str = "f") -> str:
    """All-visible over the fact's non-deleted evidence documents, with at least one of them."""
    return all_visible_sql(fact_sources(f"{alias}.id"), viewer_param)


def entity_acl_sql(viewer_param: str, alias: str = "e") -> str:
    """People: seen in at least one visible document (directory data: named, authored, participated).
    Every other entity: all-visible over the documents that named it."""
    visible_doc = f"dv.deleted_at IS NULL AND dv.principals && {viewer_param}::text[]"
    named = f"SELECT ee.document_id FROM entity_evidence ee WHERE ee.entity_id = {alias}.id"
    return (
        f"(CASE WHEN {alias}.type = 'person' THEN"
        f" EXISTS (SELECT 1 FROM entity_evidence ee JOIN documents dv ON dv.id = ee.document_id"
        f" WHERE ee.entity_id = {alias}.id AND {visible_doc})"
        f" OR EXISTS (SELECT 1 FROM participants pv JOIN documents dv ON dv.id = pv.document_id"
        f" WHERE pv.person_id = {alias}.id AND {visible_doc})"
        f" ELSE {all_visible_sql(named, viewer_param)} END)"
    )
