"""ADK: a real ``google.adk`` Runner with a scripted model (canned function calls, no network) using
``load_memory`` and ``PreloadMemoryTool`` against ``OrgMemoryService`` on a real API server and pipeline.
Team-scope memory reaches a teammate (groups from the org directory) and never an outsider."""

from __future__ import annotations

import uuid
from collections.abc import AsyncGenerator, AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from google.adk.agents import LlmAgent
from google.adk.cli.service_registry import get_service_registry
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.runners import Runner
from google.adk.sessions import InMemorySessionService
from google.adk.tools.load_memory_tool import load_memory_tool
from google.adk.tools.preload_memory_tool import PreloadMemoryTool
from google.genai import types
from pydantic import Field

from orgmem_sdk import adk
from orgmem_sdk.client import OrgMemoryClient
from orgmem_sdk.errors import ConfigurationError
from schemas.envelope import ChangeEnvelope
from services.api.app import create_app
from services.settings import Settings
from tests.integration.agents_helpers import free_port, serve_app
from tests.integration.helpers import eventually, fetchval, produce
from tests.integration.retriever_fixtures import T1, hierarchy_file

ALICE, MATE, OUTSIDER = (f"user:{uuid.uuid4()}" for _ in range(3))
APP = "orgmem-test"
FACT = "The snorkelwhip budget for next quarter is forty thousand euros."


class ScriptedLlm(BaseLlm):
    """Turn 1: call ``load_memory`` (when it is offered); turn 2: answer with what the tool returned.
    Records every request so the test can read what ``PreloadMemoryTool`` injected."""

    requests: list[LlmRequest] = Field(default_factory=list)

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        self.requests.append(llm_request)
        last = llm_request.contents[-1] if llm_request.contents else None
        responses = [p.function_response for p in (last.parts or []) if p.function_response] if last else []
        if responses and responses[0] is not None:
            text = f"memories: {responses[0].response}"
        elif "load_memory" in (llm_request.tools_dict or {}):
            call = types.FunctionCall(name="load_memory", args={"query": "snorkelwhip budget"})
            yield LlmResponse(content=types.Content(role="model", parts=[types.Part(function_call=call)]))
            return
        else:
            text = "ok"
        yield LlmResponse(content=types.Content(role="model", parts=[types.Part.from_text(text=text)]))


def _membership(group: str, members: list[str]) -> ChangeEnvelope:
    return ChangeEnvelope.model_validate(
        {
            "envelope_id": str(uuid.uuid4()),
            "op": "membership",
            "source": {"system": "directory", "external_id": group},
            "event_time": (datetime.now(UTC) - timedelta(minutes=5)).isoformat(),
            "membership": {"group": group, "added": members},
        }
    )


@pytest.fixture
async def org(settings_factory: Any, pipeline: Any, tmp_path: Path) -> AsyncIterator[tuple[Settings, str]]:
    s: Settings = await settings_factory(org_hierarchy_path=hierarchy_file(tmp_path))
    rt = await pipeline("ingest", "embed", "retrieve", settings_override=s)
    await produce(s, _membership(f"group:{T1}", [ALICE, MATE]))  # ADK sends only user ids: the directory knows

    async def applied() -> int:
        return int(await fetchval(s, "SELECT count(*) FROM group_memberships WHERE valid_to IS NULL"))

    await eventually(applied, until=lambda n: n == 2, timeout=60)
    async with serve_app(create_app(rt)) as url:
        yield s, url


async def _run(runner: Runner, user: str, text: str) -> str:
    session = await runner.session_service.create_session(app_name=APP, user_id=user)
    out: list[str] = []
    msg = types.Content(role="user", parts=[types.Part.from_text(text=text)])
    async for event in runner.run_async(user_id=user, session_id=session.id, new_message=msg):
        for part in (event.content.parts or []) if event.content else []:
            if part.text:
                out.append(part.text)
    return "\n".join(out)


async def test_team_memory_through_runner(org: tuple[Settings, str]) -> None:
    _, url = org
    memory = adk.OrgMemoryService(OrgMemoryClient.http(url, "test-key"), default_scope=f"group:{T1}")
    sessions = InMemorySessionService()
    plain = LlmAgent(name="scribe", model=ScriptedLlm(model="scripted"), instruction="take notes")
    runner = Runner(app_name=APP, agent=plain, session_service=sessions, memory_service=memory)

    # alice's session goes into memory at team scope (idempotent: added twice, one memory per event)
    session = await sessions.create_session(app_name=APP, user_id=ALICE)
    msg = types.Content(role="user", parts=[types.Part.from_text(text=FACT)])
    async for _ in runner.run_async(user_id=ALICE, session_id=session.id, new_message=msg):
        pass
    full = await sessions.get_session(app_name=APP, user_id=ALICE, session_id=session.id)
    assert full is not None
    await memory.add_session_to_memory(full)
    await memory.add_session_to_memory(full)

    async def mate_sees() -> bool:
        found = await memory.search_memory(app_name=APP, user_id=MATE, query="snorkelwhip budget")
        return any("snorkelwhip" in (m.content.parts or [])[0].text for m in found.memories)  # type: ignore[operator]

    await eventually(mate_sees, timeout=60, interval=0.5)
    found = await memory.search_memory(app_name=APP, user_id=MATE, query="snorkelwhip budget")
    entry = next(m for m in found.memories if "snorkelwhip" in str(m.content.parts))
    assert entry.custom_metadata["source"] == "agent" and entry.custom_metadata["scope"] == "team"
    assert entry.timestamp and entry.id == entry.custom_metadata["external_id"]
    assert len({m.id for m in found.memories if "snorkelwhip" in str(m.content.parts)}) == 1

    # the Kafka transport searches the same way (groups from the directory, server-side)
    settings = org[0]
    over_kafka = adk.OrgMemoryService(
        OrgMemoryClient.kafka(settings.kafka_bootstrap_servers, namespace=settings.topic_namespace, api_key="test-key")
    )
    try:
        via_kafka = await over_kafka.search_memory(app_name=APP, user_id=MATE, query="snorkelwhip budget")
        assert entry.id in {m.id for m in via_kafka.memories}
        outsider = await over_kafka.search_memory(app_name=APP, user_id=OUTSIDER, query="snorkelwhip budget")
        assert entry.id not in {m.id for m in outsider.memories}
    finally:
        await over_kafka.aclose()

    # load_memory: the teammate's new session finds it; the outsider's does not
    loader = LlmAgent(name="helper", model=ScriptedLlm(model="scripted"), tools=[load_memory_tool])
    runner2 = Runner(app_name=APP, agent=loader, session_service=sessions, memory_service=memory)
    assert "snorkelwhip" in await _run(runner2, MATE, "what is our budget?")
    assert "snorkelwhip" not in await _run(runner2, OUTSIDER, "what is our budget?")

    # PreloadMemoryTool: the memory lands in the teammate's model request, not in the outsider's
    model = ScriptedLlm(model="scripted")
    preload = LlmAgent(name="preloader", model=model, tools=[PreloadMemoryTool()])
    runner3 = Runner(app_name=APP, agent=preload, session_service=sessions, memory_service=memory)
    await _run(runner3, MATE, "what is the snorkelwhip budget?")
    assert "snorkelwhip budget for next quarter" in str(model.requests[-1].contents)
    await _run(runner3, OUTSIDER, "what is the snorkelwhip budget?")
    assert "PAST_CONVERSATIONS" not in str(model.requests[-1].contents)

    # delete_memory tombstones it (the author only)
    with pytest.raises(Exception, match="403"):
        await memory.delete_memory(app_name=APP, user_id=MATE, memory_id=entry.id)
    await memory.delete_memory(app_name=APP, user_id=ALICE, memory_id=entry.id)

    async def gone() -> bool:
        return not await mate_sees()

    await eventually(gone, timeout=60, interval=0.5)
    await memory.aclose()


async def test_wiring_paths(org: tuple[Settings, str], monkeypatch: pytest.MonkeyPatch) -> None:
    _, url = org
    monkeypatch.delenv(adk.ENV_URL, raising=False)
    monkeypatch.delenv(adk.ENV_KEY, raising=False)
    assert await adk.build_memory_service() is None  # unset: off, no exception
    adk.register_org_memory_scheme()
    adk.register_org_memory_scheme()  # idempotent
    with pytest.raises(ConfigurationError, match=adk.ENV_URL):  # opted in but unset: raises, naming it
        get_service_registry().create_memory_service("orgmem://default")
    monkeypatch.setenv(adk.ENV_URL, f"http://127.0.0.1:{free_port(0)}")
    monkeypatch.setenv(adk.ENV_KEY, "test-key")
    assert await adk.build_memory_service() is None  # nothing answers there
    monkeypatch.setenv(adk.ENV_URL, url)
    built = get_service_registry().create_memory_service("orgmem://default")
    assert isinstance(built, adk.OrgMemoryService)
    live = await adk.build_memory_service()
    assert isinstance(live, adk.OrgMemoryService)
    assert isinstance(await adk.build_default_service(), adk.OrgMemoryService)
    empty = await live.search_memory(app_name=APP, user_id="not-a-uuid", query="anything")
    assert empty.memories == []  # never a default user
    await live.aclose()
