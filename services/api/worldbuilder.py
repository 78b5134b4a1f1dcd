"""Worldbuilder routes: ``POST /tools/worldbuilder_kb``, ``POST /tools/worldbuilder_lookup`` and the
identity bridge ``GET /v1/graph/persons/by-platform-user/{platform_user_id}``."""

from __future__ import annotations

import uuid

from fastapi import APIRouter, HTTPException, Request, status

from retriever.graph import cards
from retriever.graph import worldbuilder as wb
from retriever.graph.profile_synthesis import ProfileSynthesizer
from retriever.wiring import get_service
from retriever.worldbuilder_kb import worldbuilder_kb as run_kb
from schemas.graph import EntityBrief, PersonCard
from schemas.worldbuilder import (
    SynthesisNote,
    WorldbuilderKbRequest,
    WorldbuilderKbResponse,
    WorldbuilderLookupRequest,
    WorldbuilderLookupResponse,
)
from services.api.deps import ViewerDep, WorkspaceQuery, principals_of, runtime_of
from services.errors import NotFoundError
from services.people import visible_person_by_alias
from services.runtime import Runtime
from services.viewer import Viewer

router = APIRouter(tags=["worldbuilder"])


def _synthesizer(rt: Runtime) -> ProfileSynthesizer | None:
    s = rt.settings
    if not s.llm_base_url:
        return None

    def build() -> ProfileSynthesizer:
        import openai

        key = s.llm_api_key.get_secret_value() if s.llm_api_key else None
        client = openai.AsyncOpenAI(api_key=key or "unused", base_url=s.llm_base_url, max_retries=0, timeout=30)
        return ProfileSynthesizer(client, model=s.llm_model)

    return rt.owned(ProfileSynthesizer, build)


async def run_worldbuilder_kb(rt: Runtime, viewer: Viewer, body: WorldbuilderKbRequest) -> WorldbuilderKbResponse:
    """The tool itself (HTTP route and MCP): hybrid search grouped per document with its people."""
    return await run_kb(get_service(rt), body, viewer)


async def run_worldbuilder_lookup(
    rt: Runtime, viewer: Viewer, body: WorldbuilderLookupRequest
) -> WorldbuilderLookupResponse:
    """The tool itself (HTTP route and MCP): a grounded profile; ``NotFoundError`` when nothing visible."""
    principals = viewer.expand(rt.hierarchy)
    field = "name" if body.name is not None else "subject"
    async with rt.pool.acquire() as conn:
        entity: EntityBrief | None = None
        candidates: list[EntityBrief] = []
        if principals:
            entity, candidates = await wb.resolve(
                conn,
                workspace=body.workspace,
                viewer=principals,
                name=body.name,
                subject=(body.subject.type, body.subject.id) if body.subject else None,
                type_hint=body.type,
            )
        if entity is None:
            raise NotFoundError("no visible entity matches", field=field)
        profile, state, docs = await wb.lookup(conn, workspace=body.workspace, viewer=principals, entity=entity)
        note = SynthesisNote(requested=False, used=False, reason="deterministic (synthesize not requested)")
        if body.synthesize:
            synth = _synthesizer(rt)
            if synth is None:
                note = SynthesisNote(requested=True, used=False, reason="no LLM configured (LLM_BASE_URL unset)")
            else:
                summary, note = await synth.summarize(conn, body.workspace, profile)
                if summary is not None:
                    profile = profile.model_copy(update={"summary": summary})
    return WorldbuilderLookupResponse(
        profile=profile,
        cache="hit" if state == "hit" else "miss",
        evidence_documents=docs,
        synthesis=note,
        candidates=candidates,
    )


@router.get("/v1/graph/persons/by-platform-user/{platform_user_id}", response_model=PersonCard)
async def person_by_platform_user(
    platform_user_id: uuid.UUID,
    request: Request,
    viewer: ViewerDep,
    workspace: WorkspaceQuery = "default",
) -> PersonCard:
    """The person whose ``platform_user`` identity alias is this host User UUID (404 when none is visible)."""
    rt = runtime_of(request)
    principals = principals_of(request, viewer)
    async with rt.pool.acquire() as conn:
        pid = await visible_person_by_alias(conn, workspace, principals, "platform_user", str(platform_user_id))
        card = (
            await cards.person_card(conn, workspace=workspace, viewer=principals, person_id=pid)
            if pid is not None
            else None
        )
    if card is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, detail="no visible person with this platform user")
    return card
