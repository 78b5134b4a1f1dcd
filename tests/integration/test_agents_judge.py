"""The after-turn judge (``orgmem_sdk.judge``) with ADK's real ``Runner`` and scripted models against a real API
server and pipeline: the judge saves a decision (searchable afterwards), a second turn inside the cooldown is not
judged, a non-whitelisted tool gets an error result and writes nothing, and ``drain`` finishes a write in flight
while the parent's reply was not delayed by it."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any

import pytest
from google.adk.agents import LlmAgent
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.runners import Runner
from google.adk.sessions import InMemorySessionService
from google.adk.tools.function_tool import FunctionTool
from google.genai import types
from pydantic import Field

from orgmem_sdk import adk
from orgmem_sdk.client import OrgMemoryClient
from orgmem_sdk.judge import JudgeConfig, judge_callback
from services.api.app import create_app
from services.settings import Settings
from tests.integration.agents_helpers import serve_app
from tests.integration.helpers import eventually

APP = "orgmem-judge-test"
DECISION = "We decided to ship the quillfern migration on Thursday, not Friday."


class ParentLlm(BaseLlm):
    """The parent agent: answers every turn with text."""

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        yield LlmResponse(content=types.Content(role="model", parts=[types.Part.from_text(text="noted")]))


class JudgeLlm(BaseLlm):
    """The judge: calls ``tool`` with ``args`` (after ``delay_s``), then records the tool's result and stops."""

    tool: str
    args: dict[str, Any]
    delay_s: float = 0.0
    prompts: list[str] = Field(default_factory=list)
    results: list[dict[str, Any]] = Field(default_factory=list)

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        last = llm_request.contents[-1]
        responses = [p.function_response for p in last.parts or [] if p.function_response]
        if responses:
            self.results.extend(dict(r.response or {}) for r in responses)
            yield LlmResponse(content=types.Content(role="model", parts=[types.Part.from_text(text="done")]))
            return
        self.prompts.append(" ".join(p.text or "" for p in last.parts or []))
        await asyncio.sleep(self.delay_s)
        call = types.FunctionCall(name=self.tool, args=self.args)
        yield LlmResponse(content=types.Content(role="model", parts=[types.Part(function_call=call)]))


@pytest.fixture
async def api(settings_factory: Any, pipeline: Any) -> AsyncIterator[str]:
    s: Settings = await settings_factory()
    rt = await pipeline("ingest", "embed", "retrieve", settings_override=s)
    async with serve_app(create_app(rt)) as url:
        yield url


async def _turn(runner: Runner, user: str, session_id: str, text: str) -> None:
    msg = types.Content(role="user", parts=[types.Part.from_text(text=text)])
    async for _ in runner.run_async(user_id=user, session_id=session_id, new_message=msg):
        pass


async def _found(memory: adk.OrgMemoryService, user: str, needle: str) -> bool:
    res = await memory.search_memory(app_name=APP, user_id=user, query="quillfern migration Thursday")
    return any(needle in str(m.content.parts) for m in res.memories)


async def test_judge_saves_throttles_and_refuses(api: str) -> None:
    alice = f"user:{uuid.uuid4()}"
    client = OrgMemoryClient.http(api, "test-key")
    memory = adk.OrgMemoryService(OrgMemoryClient.http(api, "test-key"))
    model = JudgeLlm(model="scripted-judge", tool="remember", args={"text": DECISION, "kind": "decision"})
    judge = judge_callback(client, model=model, config=JudgeConfig(enabled=True))
    parent = LlmAgent(name="parent", model=ParentLlm(model="scripted"), after_agent_callback=judge)
    sessions = InMemorySessionService()
    runner = Runner(app_name=APP, agent=parent, session_service=sessions)
    session = await sessions.create_session(app_name=APP, user_id=alice)

    await _turn(runner, alice, session.id, "Let's move the quillfern migration to Thursday.")
    assert judge.runs == 1
    assert await judge.drain() == 0
    assert "quillfern migration to Thursday" in model.prompts[0] and "parent: noted" in model.prompts[0]
    assert model.results and "memory_id" in model.results[0], model.results
    await eventually(lambda: _found(memory, alice, "quillfern"), timeout=60, interval=0.5)
    detail = await client.get_memory(model.results[0]["memory_id"], principal_id=alice)
    assert detail.kind == "decision" and detail.author == alice and detail.session_id == session.id

    # the second turn of the same session is inside the cooldown: no second judge run
    await _turn(runner, alice, session.id, "Thanks, that's all.")
    assert judge.runs == 1 and judge.pending == 0 and len(model.prompts) == 1

    # a judge asking for a tool outside the whitelist gets an error result; the tool never runs, nothing is written
    bob = f"user:{uuid.uuid4()}"
    wiped: list[str] = []

    def wipe_memories(reason: str) -> dict[str, Any]:
        """Delete every memory."""
        wiped.append(reason)
        return {"ok": True}

    rogue = JudgeLlm(model="scripted-judge", tool="wipe_memories", args={"reason": "tidy"})
    judge2 = judge_callback(
        client, model=rogue, config=JudgeConfig(enabled=True), extra_tools=[FunctionTool(wipe_memories)]
    )
    runner2 = Runner(
        app_name=APP,
        agent=LlmAgent(name="parent", model=ParentLlm(model="scripted"), after_agent_callback=judge2),
        session_service=sessions,
    )
    s2 = await sessions.create_session(app_name=APP, user_id=bob)
    await _turn(runner2, bob, s2.id, "The quillfern migration moves to Thursday.")
    assert await judge2.drain() == 0
    assert wiped == [] and "not available to the judge" in str(rogue.results)
    assert (await client.list_memories(principal_id=bob)).memories == []

    await client.close()
    await memory.aclose()


async def test_drain_finishes_a_write_in_flight(api: str) -> None:
    carol = f"user:{uuid.uuid4()}"
    client = OrgMemoryClient.http(api, "test-key")
    memory = adk.OrgMemoryService(OrgMemoryClient.http(api, "test-key"))
    slow = JudgeLlm(model="scripted-judge", tool="remember", args={"text": DECISION}, delay_s=1.0)
    judge = judge_callback(client, model=slow, config=JudgeConfig(enabled=True))
    sessions = InMemorySessionService()
    runner = Runner(
        app_name=APP,
        agent=LlmAgent(name="parent", model=ParentLlm(model="scripted"), after_agent_callback=judge),
        session_service=sessions,
    )
    session = await sessions.create_session(app_name=APP, user_id=carol)
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    await _turn(runner, carol, session.id, "Ship the quillfern migration on Thursday.")
    assert loop.time() - t0 < 1.0  # the reply did not wait for the judge
    assert judge.pending == 1 and slow.results == []
    assert await judge.drain(timeout=4.5) == 0  # finished, not cancelled
    assert judge.pending == 0 and "memory_id" in slow.results[0]
    await eventually(lambda: _found(memory, carol, "quillfern"), timeout=60, interval=0.5)
    await judge.aclose()
    await memory.aclose()
