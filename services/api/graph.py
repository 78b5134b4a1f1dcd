"""Graph tool routes: ``/tools/query_facts``, ``/tools/diff_facts``, ``/tools/query_paths`` and the person
/ entity cards. The viewer's groups are expanded through the org hierarchy; the reads apply ACL in SQL."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Any, TypeVar

import asyncpg
from fastapi import APIRouter, Depends, HTTPException, Request, status

from retriever.graph import cards, reads
from schemas.graph import (
    DiffFactsRequest,
    EntityCard,
    FactDiff,
    FactsResponse,
    PathsResponse,
    PersonCard,
    QueryFactsRequest,
    QueryPathsRequest,
    SubjectRef,
    TimeGrain,
)
from schemas.validation import BoundedDatetime
from services.api.deps import ViewerDep, WorkspaceQuery, principals_of, runtime_of
from services.errors import BusyError
from services.runtime import Runtime
from services.viewer import Principals, Viewer

C = TypeVar("C")
router = APIRouter(tags=["graph"])


async def _subjects(
    conn: asyncpg.Connection, workspace: str, viewer: Principals, subjects: list[SubjectRef], about: str | None
) -> list[tuple[str, uuid.UUID]]:
    refs = [(s.type, s.id) for s in subjects]
    seeds, _ = await reads.seeds_about(conn, workspace=workspace, viewer=viewer, subjects=refs, about=about)
    return seeds


# The tool implementations, shared by the HTTP routes below and the MCP server (services/api/mcp.py).
async def run_query_facts(rt: Runtime, viewer: Viewer, body: QueryFactsRequest) -> FactsResponse:
    principals = viewer.expand(rt.hierarchy)
    async with rt.pool.acquire() as conn:
        seeds = await _subjects(conn, body.workspace, principals, body.subjects, body.about)
        facts = await reads.query_facts(
            conn,
            workspace=body.workspace,
            viewer=principals,
            subjects=seeds,
            as_of=body.as_of,
            believed_as_of=body.believed_as_of,
            as_of_grain=body.as_of_grain,
            limit=body.limit,
            direction="both",  # a fact is found from its subject and from its object
        )
        briefs = await reads.entity_briefs(conn, workspace=body.workspace, viewer=principals, refs=seeds)
    return FactsResponse(subjects=briefs, facts=facts)


async def run_diff_facts(rt: Runtime, viewer: Viewer, body: DiffFactsRequest) -> FactDiff:
    principals = viewer.expand(rt.hierarchy)
    async with rt.pool.acquire() as conn:
        seeds = await _subjects(conn, body.workspace, principals, body.subjects, body.about)
        return await reads.diff_facts(
            conn,
            workspace=body.workspace,
            viewer=principals,
            subjects=seeds,
            from_time=body.from_time,
            to_time=body.to_time,
            axis=body.axis,
        )


async def run_query_paths(rt: Runtime, viewer: Viewer, body: QueryPathsRequest) -> PathsResponse:
    async with _walk_slot(rt):
        principals = viewer.expand(rt.hierarchy)
        async with rt.pool.acquire() as conn:
            seeds = await _subjects(conn, body.workspace, principals, body.seeds, body.about)
            paths, depth, partial = await reads.query_paths_within(
                conn,
                budget_ms=rt.settings.graph_walk_budget_ms,
                workspace=body.workspace,
                viewer=principals,
                seeds=seeds,
                max_depth=body.max_depth,
                max_fanout=body.max_fanout,
                as_of=body.as_of,
                believed_as_of=body.believed_as_of,
                as_of_grain=body.as_of_grain,
                limit=body.limit,
            )
            briefs = await reads.entity_briefs(conn, workspace=body.workspace, viewer=principals, refs=seeds)
    return PathsResponse(
        seeds=briefs,
        paths=paths,
        partial=partial,
        depth_walked=depth,
    )


@contextlib.asynccontextmanager
async def _walk_slot(rt: Runtime) -> AsyncIterator[None]:
    """At most ``GRAPH_WALK_CONCURRENCY`` path walks hold a connection at once, so walks cannot take the
    whole pool from passage search; a walk that waits longer than ``GRAPH_WALK_QUEUE_S`` gets 429."""
    settings = rt.settings
    slots = rt.graph_walk_slots
    try:
        await asyncio.wait_for(slots.acquire(), timeout=settings.graph_walk_queue_s)
    except TimeoutError:
        raise BusyError("too many concurrent graph walks; retry later", retry_after_s=1.0) from None
    try:
        yield
    finally:
        slots.release()


@dataclass(frozen=True)
class CardAt:
    """The query parameters both cards take: the workspace and the two time axes."""

    workspace: str
    as_of: datetime | None
    believed_as_of: datetime | None
    as_of_grain: TimeGrain | None


def _card_at(
    workspace: WorkspaceQuery = "default",
    as_of: BoundedDatetime | None = None,
    believed_as_of: BoundedDatetime | None = None,
    as_of_grain: TimeGrain | None = None,
) -> CardAt:
    return CardAt(workspace, as_of, believed_as_of, as_of_grain)


CardAtDep = Annotated[CardAt, Depends(_card_at)]


async def _card(
    request: Request, viewer: Viewer, at: CardAt, load: Callable[..., Awaitable[C | None]], missing: str, **ids: Any
) -> C:
    """Load a card (person or entity) on a pooled connection; 404 when the viewer sees no such one."""
    async with runtime_of(request).pool.acquire() as conn:
        card = await load(
            conn,
            workspace=at.workspace,
            viewer=principals_of(request, viewer),
            as_of=at.as_of,
            believed_as_of=at.believed_as_of,
            as_of_grain=at.as_of_grain,
            **ids,
        )
    if card is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, detail=missing)
    return card


@router.get("/v1/graph/persons/{person_id}", response_model=PersonCard)
async def person_card(person_id: uuid.UUID, request: Request, viewer: ViewerDep, at: CardAtDep) -> PersonCard:
    return await _card(request, viewer, at, cards.person_card, "no visible person with this id", person_id=person_id)


@router.get("/v1/graph/entities/{entity_id}", response_model=EntityCard)
async def entity_card(entity_id: uuid.UUID, request: Request, viewer: ViewerDep, at: CardAtDep) -> EntityCard:
    return await _card(request, viewer, at, cards.entity_card, "no visible entity with this id", entity_id=entity_id)
