"""The skill curator (``orgmem_sdk.curator``) with ADK's real ``Runner`` and a scripted model against a real API
server and pipeline: a run with repeated tool errors files a procedure proposal that is not searchable; approved
it becomes searchable through procedure search; a rejected one stays unsearchable."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from google.adk.agents import LlmAgent
from google.adk.apps.app import App
from google.adk.runners import Runner
from google.adk.sessions import InMemorySessionService
from google.genai import types

from orgmem_sdk.client import OrgMemoryClient
from orgmem_sdk.curator import CuratorConfig, SkillCuratorPlugin
from services.api.app import create_app
from services.settings import Settings
from tests.integration.agents_helpers import serve_app
from tests.integration.helpers import eventually
from tests.unit.retriever.curator_helpers import ERROR_RUN, ScriptedLlm, deploy_tools

APP = "orgmem-curator-test"


@pytest.fixture
async def api(settings_factory: Any, pipeline: Any) -> AsyncIterator[str]:
    s: Settings = await settings_factory()
    rt = await pipeline("ingest", "retrieve", settings_override=s)
    async with serve_app(create_app(rt)) as url:
        yield url


async def _run(runner: Runner, user: str, session_id: str, text: str) -> None:
    msg = types.Content(role="user", parts=[types.Part.from_text(text=text)])
    async for _ in runner.run_async(user_id=user, session_id=session_id, new_message=msg):
        pass


async def _found(api: str, user: str, query: str) -> list[str]:
    async with httpx.AsyncClient(base_url=api) as h:
        r = await h.post(
            "/tools/search_procedural_memory",
            json={"query": query},
            headers={"X-Api-Key": "test-key", "X-Principal-Id": user},
        )
    assert r.status_code == 200, r.text
    return [hit["procedure"]["name"] for hit in r.json()["results"]]


async def test_curator_proposal_is_searchable_only_once_approved(api: str) -> None:
    alice = f"user:{uuid.uuid4()}"
    plugin = SkillCuratorPlugin(OrgMemoryClient.http(api, "test-key"), config=CuratorConfig(enabled=True))
    agent = LlmAgent(name="ops", model=ScriptedLlm(model="scripted", script=ERROR_RUN), tools=deploy_tools())
    sessions = InMemorySessionService()
    runner = Runner(app=App(name=APP, root_agent=agent, plugins=[plugin]), session_service=sessions)
    first = await sessions.create_session(app_name=APP, user_id=alice)
    await _run(runner, alice, first.id, "Deploy billing to the EU region")
    second = await sessions.create_session(app_name=APP, user_id=alice)
    await _run(runner, alice, second.id, "Deploy invoicing to the EU region")
    assert await plugin.drain() == 0 and len(plugin.proposals) == 2

    reviewer = OrgMemoryClient.http(api, "test-key")
    async with reviewer:
        pending = (await reviewer.list_procedure_proposals("pending", principal_id=alice)).proposals
        by_title = {p.title: p for p in pending}
        assert set(by_title) == {"Deploy billing to the EU region", "Deploy invoicing to the EU region"}
        billing = by_title["Deploy billing to the EU region"]
        assert billing.agent == "orgmem-curator" and billing.session_id == first.id and "failed 3×" in billing.steps[0]
        # another user sees neither draft
        assert (await reviewer.list_procedure_proposals(principal_id=f"user:{uuid.uuid4()}")).proposals == []
        assert await _found(api, alice, "deploy billing EU region") == []  # a draft is not searchable

        approved = await reviewer.approve_procedure_proposal(str(billing.proposal_id), principal_id=alice)
        assert approved.status == "approved" and approved.procedure_id is not None
        rejected = await reviewer.reject_procedure_proposal(
            str(by_title["Deploy invoicing to the EU region"].proposal_id), principal_id=alice, reason="one-off"
        )
        assert rejected.status == "rejected" and rejected.reason == "one-off"
    await eventually(
        lambda: _found(api, alice, "deploy billing EU region"),
        until=lambda names: "Deploy billing to the EU region" in names,
        timeout=30,
    )
    assert "Deploy invoicing to the EU region" not in await _found(api, alice, "deploy invoicing EU region")
    await runner.close()  # the plugin's close: drain, then close its client
    assert plugin.pending == 0
