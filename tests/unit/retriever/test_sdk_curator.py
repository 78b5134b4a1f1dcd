"""The skill curator (``orgmem_sdk.curator``): the seed's thresholds, the deterministic draft, off by default, and
the plugin under ADK's real ``Runner`` with a scripted model and a recording client (the fork type's throttle
skips a second run inside the cooldown; the run's reply is unchanged)."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from google.adk.agents import LlmAgent
from google.adk.apps.app import App
from google.adk.runners import Runner
from google.adk.sessions import InMemorySessionService
from google.genai import types

from orgmem_sdk import curator as cur
from orgmem_sdk.client import OrgMemoryClient, validated
from orgmem_sdk.procedure_models import ProposeProcedureRequest
from tests.unit.retriever.curator_helpers import ERROR_RUN, ScriptedLlm, deploy_tools

CFG = cur.CuratorConfig(min_tools=5, min_events=12, min_errors=3, enabled=True)


def _stats(calls: list[tuple[str, str | None]], events: int = 0) -> cur.RunStats:
    return cur.RunStats(request="ship it", events=events, calls=[cur.ToolCall(t, ("a",), e) for t, e in calls])


def test_thresholds_trip_at_the_seeds_values() -> None:
    assert cur.tripped(_stats([("x", "boom")] * 2 + [("y", None)] * 2, events=11), CFG) is None
    assert cur.tripped(_stats([("x", "boom")] * 3), CFG) == "3 errors from x"
    # three errors from three different tools are not "the same tool" failing
    assert cur.tripped(_stats([("x", "e"), ("y", "e"), ("z", "e")]), CFG) is None
    assert cur.tripped(_stats([("x", None)] * 5), CFG) == "5 tool calls"
    assert cur.tripped(_stats([], events=12), CFG) == "12 events"
    assert cur.tripped(_stats([], events=11), CFG) is None


def test_defaults_off_and_thresholds_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(cur.ENV_CURATOR, raising=False)
    c = cur.CuratorConfig()
    assert not c.enabled and (c.min_tools, c.min_events, c.min_errors) == (5, 12, 3)
    assert (c.cooldown_s, c.per_session_cap, c.drain_s) == (120.0, 50, 4.5)
    monkeypatch.setenv(cur.ENV_CURATOR, "on")
    monkeypatch.setenv("ORGMEM_CURATOR_MIN_ERRORS", "2")
    assert cur.CuratorConfig().enabled and cur.CuratorConfig().min_errors == 2


def test_the_draft_is_deterministic_and_names_the_failures() -> None:
    stats = _stats([("flaky", "timed out")] * 3 + [("deploy", None), ("deploy", None), ("check", None)])
    d = cur.draft(stats, "3 errors from flaky")
    assert d == cur.draft(stats, "3 errors from flaky")
    assert d["title"] == "ship it" and d["tools"] == ["flaky", "deploy", "check"]
    assert len(d["steps"]) == 3 and "failed 3×" in d["steps"][0] and "timed out" in d["steps"][0]
    assert d["steps"][1] == "Call `deploy` with a." and "trigger: 3 errors from flaky" in d["description"]
    validated(ProposeProcedureRequest, d)  # a valid proposal as it stands
    assert cur.draft(cur.RunStats(calls=[cur.ToolCall("t", ())] * 5), "r")["title"] == "Tool chain: t"


class Recording(OrgMemoryClient):
    def __init__(self) -> None:
        super().__init__(transport="http", http_url="http://127.0.0.1:9", api_key="k")
        self.sent: list[tuple[str, ProposeProcedureRequest]] = []

    async def propose_procedure(self, title: str, steps: Any, *, principal_id: str, **fields: Any) -> Any:
        req = validated(ProposeProcedureRequest, {"title": title, "steps": steps, **fields})
        self.sent.append((principal_id, req))
        return type("P", (), {"proposal_id": f"p{len(self.sent)}"})()


async def _run(runner: Runner, user: str, session_id: str) -> list[str]:
    msg = types.Content(role="user", parts=[types.Part.from_text(text="Deploy billing to the EU region")])
    texts = []
    async for e in runner.run_async(user_id=user, session_id=session_id, new_message=msg):
        texts += [p.text for p in (e.content.parts if e.content else None) or [] if p.text]
    return texts


async def _runner(plugin: cur.SkillCuratorPlugin) -> tuple[Runner, InMemorySessionService]:
    agent = LlmAgent(name="ops", model=ScriptedLlm(model="scripted", script=ERROR_RUN), tools=deploy_tools())
    sessions = InMemorySessionService()
    app = App(name="curator-unit", root_agent=agent, plugins=[plugin])
    return Runner(app=app, session_service=sessions), sessions


async def test_the_plugin_proposes_once_per_cooldown_and_stays_off_by_default() -> None:
    user = f"user:{uuid.uuid4()}"
    client = Recording()
    plugin = cur.SkillCuratorPlugin(client, config=CFG)
    runner, sessions = await _runner(plugin)
    s = await sessions.create_session(app_name="curator-unit", user_id=user)
    assert await _run(runner, user, s.id) == ["deployed"]  # the run's own reply is unchanged
    assert await plugin.drain() == 0
    [(pid, req)] = client.sent
    assert pid == user and req.title == "Deploy billing to the EU region" and req.source.agent == "orgmem-curator"
    assert req.tools == ["flaky_deploy", "deploy"] and "failed 3×" in req.steps[0] and req.scope == []
    assert req.source.session_id == s.id and req.source.event_id and req.source.event_id.startswith("curator-")
    await _run(runner, user, s.id)  # inside the cooldown: skipped
    assert await plugin.drain() == 0 and len(client.sent) == 1

    off = Recording()
    plugin_off = cur.SkillCuratorPlugin(off, config=cur.CuratorConfig(enabled=False))
    runner2, sessions2 = await _runner(plugin_off)
    s2 = await sessions2.create_session(app_name="curator-unit", user_id=user)
    assert await _run(runner2, user, s2.id) == ["deployed"]
    assert await plugin_off.drain() == 0 and off.sent == [] and plugin_off._runs == {}
    await runner.close()
    await runner2.close()
