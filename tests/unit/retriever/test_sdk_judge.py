"""``orgmem_sdk.judge`` without a server: the throttle (cap first, then cooldown, per fork type and session), the
config's environment switch, the tool whitelist, the judge being off by default, and a drain that cancels a run
still going at its cap (a real ADK Runner with a scripted model that never answers)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncGenerator
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

from orgmem_sdk import judge as j
from orgmem_sdk.client import OrgMemoryClient


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_throttle_cooldown_per_fork_and_session() -> None:
    clock = Clock()
    t = j.JudgeThrottle(j.JudgeConfig(cooldown_s=120, per_session_cap=50), clock)
    assert t.claim("judge", "s1")
    assert not t.claim("judge", "s1") and t.skip_reason("judge", "s1") == "cooldown"
    assert t.claim("judge", "s2")  # another session
    assert t.claim("curator", "s1")  # another fork type
    clock.now += 119.9
    assert not t.claim("judge", "s1")
    clock.now += 0.2
    assert t.skip_reason("judge", "s1") is None and t.claim("judge", "s1")


def test_throttle_cap_is_checked_first() -> None:
    clock = Clock()
    t = j.JudgeThrottle(j.JudgeConfig(cooldown_s=10, per_session_cap=2), clock)
    assert t.claim("judge", "s")
    clock.now += 11
    assert t.claim("judge", "s")
    assert t.skip_reason("judge", "s") == "cap"  # both the cap and the cooldown apply: the cap wins
    clock.now += 1_000_000
    assert not t.claim("judge", "s") and t.skip_reason("judge", "s") == "cap"  # the cap never expires
    assert t.claim("judge", "other")


def test_config_defaults_and_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(j.ENV_JUDGE, raising=False)
    c = j.JudgeConfig()
    assert (c.cooldown_s, c.per_session_cap, c.drain_s, c.enabled) == (120.0, 50, 4.5, False)
    for on in ("1", "true", "YES", " on "):
        monkeypatch.setenv(j.ENV_JUDGE, on)
        assert j.JudgeConfig().enabled
    for off in ("0", "false", "", "enabled"):
        monkeypatch.setenv(j.ENV_JUDGE, off)
        assert not j.JudgeConfig().enabled
    monkeypatch.setenv(j.ENV_JUDGE, "1")
    assert not j.JudgeConfig(enabled=False).enabled  # given wins over the environment


async def test_whitelist() -> None:
    def remember(text: str) -> str:
        """r"""
        return text

    def shell(cmd: str) -> str:
        """s"""
        return cmd

    ctx: Any = None
    assert await j.whitelist(FunctionTool(remember), {"text": "x"}, ctx) is None
    refused = await j.whitelist(FunctionTool(shell), {"cmd": "rm"}, ctx)
    assert refused is not None and "not available to the judge" in refused["error"]


class Silent(BaseLlm):
    """Never answers (a judge stuck on its model)."""

    calls: list[int] = Field(default_factory=list)

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        self.calls.append(1)
        await asyncio.sleep(3600)
        yield LlmResponse()


class Parent(BaseLlm):
    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        yield LlmResponse(content=types.Content(role="model", parts=[types.Part.from_text(text="ok")]))


async def _turn(cb: j.JudgeCallback, user: str) -> None:
    sessions = InMemorySessionService()
    runner = Runner(
        app_name="t",
        agent=LlmAgent(name="parent", model=Parent(model="p"), after_agent_callback=cb),
        session_service=sessions,
    )
    s = await sessions.create_session(app_name="t", user_id=user)
    msg = types.Content(role="user", parts=[types.Part.from_text(text="hello")])
    async for _ in runner.run_async(user_id=user, session_id=s.id, new_message=msg):
        pass
    await runner.close()


async def test_off_by_default_and_no_judge_without_a_user_principal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(j.ENV_JUDGE, raising=False)
    client = OrgMemoryClient.http("http://127.0.0.1:9", "k")
    model = Silent(model="s")
    off = j.judge_callback(client, model=model)
    await _turn(off, f"user:{uuid.uuid4()}")
    assert off.runs == 0 and off.pending == 0
    on = j.judge_callback(client, model=model, config=j.JudgeConfig(enabled=True))
    await _turn(on, "not-a-uuid")
    assert on.runs == 0 and model.calls == []


async def test_drain_cancels_at_its_cap(caplog: pytest.LogCaptureFixture) -> None:
    client = OrgMemoryClient.http("http://127.0.0.1:9", "k")
    model = Silent(model="s")
    cb = j.judge_callback(client, model=model, config=j.JudgeConfig(enabled=True, drain_s=0.3))
    await _turn(cb, f"user:{uuid.uuid4()}")
    assert cb.pending == 1
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    assert await cb.drain() == 1
    assert loop.time() - t0 < 2.0 and cb.pending == 0 and model.calls == [1]
    assert "drain timed out" in caplog.text


class Recording(OrgMemoryClient):
    """An HTTP client whose ``remember`` records (principal, body) instead of sending."""

    def __init__(self) -> None:
        super().__init__(transport="http", http_url="http://127.0.0.1:9", api_key="k")
        self.sent: list[tuple[str, Any]] = []

    async def remember(self, request: Any, *, principal_id: str, **_: Any) -> Any:
        from orgmem_sdk.client import validated
        from orgmem_sdk.memory_models import RememberRequest

        req = validated(RememberRequest, request)
        self.sent.append((principal_id, req))
        return type("R", (), {"memory_id": "m1", "scope": req.scope})()

    async def propose_procedure(self, title: str, steps: Any, *, principal_id: str, **fields: Any) -> Any:
        from orgmem_sdk.client import validated
        from orgmem_sdk.procedure_models import ProposeProcedureRequest

        req = validated(ProposeProcedureRequest, {"title": title, "steps": steps, **fields})
        self.sent.append((principal_id, req))
        return type("P", (), {"proposal_id": "p1", "status": "pending"})()


async def test_tools_bind_the_viewer_and_report_errors() -> None:
    client = Recording()
    cb = j.judge_callback(client, model="unused", scope="user", workspace="default")
    remember, _, propose = (t.func for t in cb.tools("user:alice-id", "sess-1"))
    assert await remember(text="Use Thursday.", kind="decision") == {"memory_id": "m1", "scope": "user"}
    pid, req = client.sent[0]
    assert pid == "user:alice-id" and req.scope == "user" and req.source.agent == "orgmem-judge"
    assert req.source.session_id == "sess-1" and req.source.event_id.startswith("judge-")
    bad = await remember(text="x", kind="gossip")
    assert "error" in bad and len(client.sent) == 1  # invalid kind: an error result, nothing sent
    assert await propose(title="Ship it", steps=["build", "deploy"]) == {"proposal_id": "p1", "status": "pending"}
    pid, preq = client.sent[1]
    assert pid == "user:alice-id" and preq.scope == [] and preq.source.agent == "orgmem-judge"
    assert preq.source.session_id == "sess-1" and preq.steps == ["build", "deploy"]
    assert "error" in await propose(title="t", steps=[])  # no steps: an error result, nothing sent
    assert len(client.sent) == 2
    await client.close()
