"""Graph read helpers for integration tests (real Postgres through ``retriever.graph.reads``)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from retriever.graph import reads
from schemas.graph import Fact, Path
from services.settings import Settings
from services.viewer import Principals
from tests.integration.helpers import connect

WS = "default"


async def entity_id(
    settings: Settings, name: str, viewer: Sequence[str], types: Sequence[str] | None = None
) -> uuid.UUID | None:
    conn = await connect(settings)
    try:
        found = await reads.resolve_entities(
            conn, workspace=WS, viewer=Principals(tuple(viewer)), name=name, types=types
        )
        exact = [m for m in found if m.score >= 0.95]
        return exact[0].id if exact else None
    finally:
        await conn.close()


async def facts_of(
    settings: Settings, name: str, viewer: Sequence[str], predicate: str | None = None, **temporal: Any
) -> list[Fact]:
    conn = await connect(settings)
    try:
        found = await reads.resolve_entities(
            conn, workspace=WS, viewer=Principals(tuple(viewer)), name=name, types=["person"]
        )
        if not found:
            return []
        facts = await reads.query_facts(
            conn, workspace=WS, viewer=Principals(tuple(viewer)), subjects=[("person", found[0].id)], **temporal
        )
        return [f for f in facts if predicate is None or f.predicate == predicate]
    finally:
        await conn.close()


async def facts_by_id(
    settings: Settings,
    subject: uuid.UUID,
    viewer: Sequence[str],
    predicate: str,
    as_of: datetime | None = None,
) -> list[Fact]:
    conn = await connect(settings)
    try:
        facts = await reads.query_facts(
            conn, workspace=WS, viewer=Principals(tuple(viewer)), subjects=[("person", subject)], as_of=as_of
        )
        return [f for f in facts if f.predicate == predicate]
    finally:
        await conn.close()


async def paths_from(settings: Settings, seed: uuid.UUID, viewer: Sequence[str], **kw: Any) -> list[Path]:
    conn = await connect(settings)
    try:
        return await reads.query_paths(
            conn, workspace=WS, viewer=Principals(tuple(viewer)), seeds=[("person", seed)], **kw
        )
    finally:
        await conn.close()
