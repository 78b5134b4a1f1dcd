"""Graph tool routes: ``/tools/query_facts``, ``/tools/diff_facts``, ``/tools/query_paths`` and the person
/ entity cards. The viewer's groups are expanded through the org hierarchy; the reads apply ACL in SQL."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Annotated, Any, TypeVar

from fastapi import APIRouter, Depends, HTTPException, Query, Request, status

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
from services.api.auth import require_viewer
from services.errors import BusyError
from services.graph import cards, reads
from services.runtime import Runtime
from services.viewer import Principals, Viewer

C = TypeVar("C")
router = APIRouter(tags=["graph"])
ViewerDep = Annotated[Viewer, Depends(require_viewer)]
WORKSPACE_PATTERN = r"^[A-Za-z0-9_.\-]+$"


def _runtime(request: Request) -> Runtime:
    rt: Runtime = request.app.state.runtime
    return rt


def _principals(request: Request, viewer: Viewer) -> Principals:
    return viewer.expand(_runtime(request).hierarchy)


async def _subjects(
    rt: Runtime, workspace: str, viewer: Principals, subjects: list[SubjectRef], about: str | None
) -> list[tuple[str, uuid.UUID]]:
    seeds = [(s.type, s.id) for s in subjects]
    if about:
        async with rt.pool.acquire() as conn:
            found = await reads.resolve_about(conn, workspace=workspace, viewer=viewer, about=about)
        seeds += [(m.type, m.id) for m in found if (m.type, m.id) not in seeds]
    return seeds


# The tool implementations, shared by the HTTP routes below and the MCP server (services/api/mcp.py).
async def run_query_facts(rt: Runtime, viewer: Viewer, body: QueryFactsRequest) -> FactsResponse:
    principals = viewer.expand(rt.hierarchy)
    seeds = await _subjects(rt, body.workspace, principals, body.subjects, body.about)
    async with rt.pool.acquire() as conn:
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
    seeds = await _subjects(rt, body.workspace, principals, body.subjects, body.about)
    async with rt.pool.acquire() as conn:
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
        seeds = await _subjects(rt, body.workspace, principals, body.seeds, body.about)
        async with rt.pool.acquire() as conn:
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


async def _card(request: Request, load: Callable[..., Awaitable[C | None]], **params: Any) -> C | None:
    """Load a card (person or entity) on a pooled connection; ``None`` = not visible to this viewer."""
    async with _runtime(request).pool.acquire() as conn:
        return await load(conn, **params)


@router.get("/v1/graph/persons/{person_id}", response_model=PersonCard)
async def person_card(
    person_id: uuid.UUID,
    request: Request,
    viewer: ViewerDep,
    workspace: Annotated[str, Query(max_length=64, pattern=WORKSPACE_PATTERN)] = "default",
    as_of: BoundedDatetime | None = None,
    believed_as_of: BoundedDatetime | None = None,
    as_of_grain: TimeGrain | None = None,
) -> PersonCard:
    card = await _card(
        request,
        cards.person_card,
        workspace=workspace,
        viewer=_principals(request, viewer),
        person_id=person_id,
        as_of=as_of,
        believed_as_of=believed_as_of,
        as_of_grain=as_of_grain,
    )
    if card is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, detail="no visible person with this id")
    return card


@router.get("/v1/graph/entities/{entity_id}", response_model=EntityCard)
async def entity_card(
    entity_id: uuid.UUID,
    request: Request,
    viewer: ViewerDep,
    workspace: Annotated[str, Query(max_length=64, pattern=WORKSPACE_PATTERN)] = "default",
    as_of: BoundedDatetime | None = None,
    believed_as_of: BoundedDatetime | None = None,
    as_of_grain: TimeGrain | None = None,
) -> EntityCard:
    card = await _card(
        request,
        cards.entity_card,
        workspace=workspace,
        viewer=_principals(request, viewer),
        entity_id=entity_id,
        as_of=as_of,
        believed_as_of=believed_as_of,
        as_of_grain=as_of_grain,
    )
    if card is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, detail="no visible entity with this id")
    return card
