"""The after-turn judge (optional extra ``adk``; default **off**): an ADK ``after_agent_callback`` that, after a
turn, asks a model what of the just-finished conversation is worth saving, and lets it call ONLY ``remember``,
``forget`` and ``propose_procedure``.

- ``judge_callback(client, model=...)`` returns a :class:`JudgeCallback`; pass it as an agent's
  ``after_agent_callback``. When enabled (``JudgeConfig.enabled``; from ``ORGMEM_JUDGE`` in
  ``{"1", "true", "yes", "on"}`` when not given) and the throttle grants a slot, it starts the judge as a
  fire-and-forget asyncio task (the parent's reply is not delayed) and returns ``None`` (the reply is unchanged).
- The judge is a throwaway ``LlmAgent`` on its own ``Runner`` and in-memory session, given the conversation's
  events as text. It has no ``after_agent_callback``: a judge never spawns a judge. A ``before_tool_callback``
  whitelist refuses any other tool (e.g. ``extra_tools`` a caller shares with it) with an error result; the
  tool is not run.
- Identity never comes from the model: the viewer/author is the ADK ``user_id`` (``user_principal``), the write
  scope and workspace are the caller's configuration, not tool arguments.
- ``propose_procedure`` files a procedure proposal (``OrgMemoryClient.propose_procedure``): a draft nobody can
  search until a human approves it (``/v1/procedure-proposals/{id}/approve``).
- Throttle (the seed's order): per (fork type, session), the cap (``per_session_cap``, 50) is checked first, then
  the cooldown (``cooldown_s``, 120 s). A failed claim means "skip this turn" — no error.
- ``await callback.drain()`` on close: waits for in-flight judge runs up to ``drain_s`` (4.5 s); runs still going
  are cancelled and logged.
"""

from __future__ import annotations

import hashlib
import logging
import os
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from orgmem_sdk.adk import _event_text, user_principal
from orgmem_sdk.client import OrgMemoryClient
from orgmem_sdk.errors import OrgMemoryClientError
from orgmem_sdk.forks import ClientLease, ForkThrottle, Siblings, Skip

if TYPE_CHECKING:
    from google.adk.agents.callback_context import CallbackContext
    from google.adk.events.event import Event
    from google.adk.models.base_llm import BaseLlm
    from google.adk.tools.base_tool import BaseTool
    from google.adk.tools.tool_context import ToolContext

log = logging.getLogger("orgmem.judge")
ENV_JUDGE = "ORGMEM_JUDGE"
TRUTHY = frozenset({"1", "true", "yes", "on"})
FORK = "judge"
ALLOWED_TOOLS = frozenset({"remember", "forget", "propose_procedure"})
MAX_TRANSCRIPT_CHARS = 20_000
INSTRUCTION = (
    "You review a conversation that just finished. Save what is worth remembering later (decisions, durable "
    "facts, preferences) with `remember`, one self-contained statement per call; retract a memory that the "
    "conversation shows is wrong with `forget`; suggest a reusable procedure with `propose_procedure`. Save "
    "nothing when nothing is worth saving. You may call no other tool."
)
__all__ = ["JudgeCallback", "JudgeConfig", "JudgeThrottle", "Skip", "judge_callback", "transcript", "whitelist"]


def _env_enabled() -> bool:
    return os.environ.get(ENV_JUDGE, "").strip().lower() in TRUTHY


@dataclass(frozen=True)
class JudgeConfig:
    cooldown_s: float = 120.0
    per_session_cap: int = 50
    drain_s: float = 4.5
    enabled: bool = field(default_factory=_env_enabled)


JudgeThrottle = ForkThrottle  # the seed's throttle, shared with the skill curator (orgmem_sdk.forks)


def transcript(events: Sequence[Event], limit: int = MAX_TRANSCRIPT_CHARS) -> str:
    """The events' texts as ``author: text`` lines (the newest ``limit`` characters)."""
    lines = [f"{e.author}: {t}" for e in events if (t := _event_text(e))]
    return "\n".join(lines)[-limit:]


async def whitelist(tool: BaseTool, args: dict[str, Any], tool_context: ToolContext) -> dict[str, Any] | None:
    """ADK ``before_tool_callback``: ``None`` (run it) for the judge's tools, an error result for any other."""
    if tool.name in ALLOWED_TOOLS:
        return None
    log.warning("judge: refused tool %r (only %s)", tool.name, ", ".join(sorted(ALLOWED_TOOLS)))
    return {"error": f"tool {tool.name!r} is not available to the judge; only remember, forget, propose_procedure"}


def _label(v: str) -> str:
    return v[:128]


class JudgeCallback:
    """The ``after_agent_callback`` (``await cb(callback_context)``) and the judge runs it started."""

    def __init__(
        self,
        client: OrgMemoryClient,
        *,
        model: BaseLlm | str,
        config: JudgeConfig | None = None,
        scope: str = "user",
        workspace: str = "default",
        instruction: str = INSTRUCTION,
        extra_tools: Sequence[Any] = (),
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.client = client
        self.model = model
        self.config = config or JudgeConfig()
        self.scope = scope
        self.workspace = workspace
        self.instruction = instruction
        self.extra_tools = list(extra_tools)
        self.throttle = JudgeThrottle(self.config, clock)
        self.runs = 0  # judge runs started
        self._siblings = Siblings("judge", log)
        self._lease = ClientLease()

    @property
    def pending(self) -> int:
        return self._siblings.pending

    async def __call__(self, callback_context: CallbackContext) -> None:
        if not self.config.enabled:
            return None
        pid = user_principal(str(callback_context.user_id or ""))
        if pid is None:
            log.warning("judge: ADK user_id is not user:<uuid> or a uuid; not judging")
            return None
        session = callback_context.session
        if not self.throttle.claim(FORK, session.id):
            log.debug("judge: skipped (%s) for session %s", self.throttle.skip_reason(FORK, session.id), session.id)
            return None
        text = transcript(session.events)
        if not text:
            return None
        self.runs += 1
        self._siblings.spawn(self._judge(pid, session.id, text), name=f"orgmem-judge-{session.id}")
        return None

    async def _client(self) -> OrgMemoryClient:
        await self._lease.ready(self.client)
        return self.client

    def tools(self, principal_id: str, session_id: str) -> list[Any]:
        """The judge's three tools, bound to the viewer (never a model argument)."""
        from google.adk.tools.function_tool import FunctionTool

        async def remember(text: str, kind: str = "decision", title: str = "") -> dict[str, Any]:
            """Save one self-contained statement worth remembering (kind: decision, fact, preference or note)."""
            digest = hashlib.sha256(text.strip().encode()).hexdigest()[:32]
            body: Mapping[str, Any] = {
                "text": text,
                "kind": kind,
                "scope": self.scope,
                "workspace": self.workspace,
                "source": {"agent": "orgmem-judge", "session_id": _label(session_id), "event_id": f"judge-{digest}"},
                **({"title": title} if title.strip() else {}),
            }
            try:
                client = await self._client()
                out = await client.remember(dict(body), principal_id=principal_id)
            except OrgMemoryClientError as exc:
                return {"error": str(exc)}
            return {"memory_id": out.memory_id, "scope": out.scope}

        async def forget(memory_id: str) -> dict[str, Any]:
            """Retract a memory you wrote that the conversation shows is wrong or outdated."""
            try:
                client = await self._client()
                out = await client.forget(memory_id, principal_id=principal_id, workspace=self.workspace)
            except OrgMemoryClientError as exc:
                return {"error": str(exc)}
            return out.model_dump(mode="json")

        async def propose_procedure(title: str, steps: list[str]) -> dict[str, Any]:
            """Propose a reusable procedure: a title and its ordered steps (a draft a human approves before
            anyone can search it)."""
            digest = hashlib.sha256(f"{title.strip()}\n{steps}".encode()).hexdigest()[:32]
            origin = {"agent": "orgmem-judge", "session_id": _label(session_id), "event_id": f"judge-{digest}"}
            scope = [] if self.scope == "user" else [self.scope]
            try:
                client = await self._client()
                out = await client.propose_procedure(
                    title, steps, principal_id=principal_id, scope=scope, workspace=self.workspace, source=origin
                )
            except OrgMemoryClientError as exc:
                return {"error": str(exc)}
            return {"proposal_id": str(out.proposal_id), "status": out.status}

        return [FunctionTool(remember), FunctionTool(forget), FunctionTool(propose_procedure)]

    async def _judge(self, principal_id: str, session_id: str, text: str) -> None:
        from google.adk.agents import LlmAgent
        from google.adk.runners import Runner
        from google.adk.sessions import InMemorySessionService
        from google.genai import types

        agent = LlmAgent(
            name="orgmem_judge",
            model=self.model,
            instruction=self.instruction,
            tools=[*self.tools(principal_id, session_id), *self.extra_tools],
            before_tool_callback=whitelist,
        )
        app = f"orgmem-judge-{uuid.uuid4().hex[:8]}"
        runner = Runner(app_name=app, agent=agent, session_service=InMemorySessionService())
        try:
            session = await runner.session_service.create_session(app_name=app, user_id=principal_id)
            msg = types.Content(role="user", parts=[types.Part.from_text(text=text)])
            async for _ in runner.run_async(user_id=principal_id, session_id=session.id, new_message=msg):
                pass
        finally:
            await runner.close()

    async def drain(self, timeout: float | None = None) -> int:  # noqa: ASYNC109 - the drain's cap
        """Wait for in-flight judge runs up to ``timeout`` (default ``drain_s``); cancel and log the rest.
        Returns how many were cancelled."""
        return await self._siblings.drain(self.config.drain_s if timeout is None else timeout)

    async def aclose(self) -> None:
        """Drain, then close the client if this callback started it."""
        await self.drain()
        await self._lease.release(self.client)


def judge_callback(
    client: OrgMemoryClient,
    *,
    model: BaseLlm | str,
    config: JudgeConfig | None = None,
    **kwargs: Any,
) -> JudgeCallback:
    """An ADK ``after_agent_callback``: ``LlmAgent(..., after_agent_callback=judge_callback(client, model=...))``."""
    return JudgeCallback(client, model=model, config=config, **kwargs)
