"""The skill curator (optional extra ``adk``; default **off**): an ADK ``BasePlugin`` that watches each run and, when
the run was complex by the seed's thresholds, files a **procedure proposal** — a draft nobody can search until a
human approves it (``/v1/procedure-proposals/{id}/approve``).

- Runner scope, like the seed's ``SkillCuratorPlugin``: ``before_run_callback`` starts a run's counters (keyed by
  invocation id, so concurrent runs never mix), ``on_event_callback`` / ``after_tool_callback`` /
  ``on_tool_error_callback`` accumulate (sub-agents included), ``after_run_callback`` evaluates once.
- Thresholds (any trips): tool calls ≥ ``min_tools`` (5), events ≥ ``min_events`` (12), the same tool failing
  ≥ ``min_errors`` (3) times. A failure is a raised tool error or a result dict with an ``error`` key.
- The draft is deterministic (no model): the title from the user's request, one step per stretch of the run's tool
  chain (consecutive calls of one tool collapsed), each failing stretch noting how often and how it failed. The
  model-written draft of the seed is not built.
- Fire-and-forget with the judge's throttle (``orgmem_sdk.forks``: per fork type ``curator`` and session, the cap
  first, then the cooldown): ``after_run_callback`` returns at once; ``close()`` (the runner's) drains up to
  ``drain_s`` (4.5 s, under ADK's 5 s plugin-close budget). Nothing the curator does can fail or delay the run.
- Off unless ``CuratorConfig(enabled=True)`` or ``ORGMEM_CURATOR`` in ``{"1", "true", "yes", "on"}``; thresholds
  from ``ORGMEM_CURATOR_MIN_TOOLS`` / ``_MIN_EVENTS`` / ``_MIN_ERRORS`` when not given.
- Identity never comes from the model: the proposer is the run's ADK ``user_id`` (``adk.user_principal``).
"""

from __future__ import annotations

import logging
import os
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from google.adk.plugins.base_plugin import BasePlugin

from orgmem_sdk.adk import user_principal
from orgmem_sdk.client import OrgMemoryClient
from orgmem_sdk.errors import OrgMemoryClientError
from orgmem_sdk.forks import ClientLease, ForkThrottle, Siblings

if TYPE_CHECKING:
    from google.adk.agents.invocation_context import InvocationContext
    from google.adk.events.event import Event
    from google.adk.tools.base_tool import BaseTool
    from google.adk.tools.tool_context import ToolContext
    from google.genai import types

log = logging.getLogger("orgmem.curator")
ENV_CURATOR = "ORGMEM_CURATOR"
TRUTHY = frozenset({"1", "true", "yes", "on"})
FORK = "curator"
MAX_STEPS = 99
MAX_ERROR_CHARS = 200


def _env_int(name: str, default: int) -> int:
    raw = os.environ.get(name, "").strip()
    return int(raw) if raw.isdigit() else default


def _env_enabled() -> bool:
    return os.environ.get(ENV_CURATOR, "").strip().lower() in TRUTHY


@dataclass(frozen=True)
class CuratorConfig:
    min_tools: int = field(default_factory=lambda: _env_int("ORGMEM_CURATOR_MIN_TOOLS", 5))
    min_events: int = field(default_factory=lambda: _env_int("ORGMEM_CURATOR_MIN_EVENTS", 12))
    min_errors: int = field(default_factory=lambda: _env_int("ORGMEM_CURATOR_MIN_ERRORS", 3))
    cooldown_s: float = 120.0
    per_session_cap: int = 50
    drain_s: float = 4.5
    enabled: bool = field(default_factory=_env_enabled)


@dataclass(frozen=True, slots=True)
class ToolCall:
    tool: str
    args: tuple[str, ...]
    error: str | None = None


@dataclass
class RunStats:
    """What one run showed the curator."""

    request: str = ""
    events: int = 0
    calls: list[ToolCall] = field(default_factory=list)

    @property
    def errors(self) -> Counter[str]:
        return Counter(c.tool for c in self.calls if c.error is not None)


def tripped(stats: RunStats, config: CuratorConfig) -> str | None:
    """Which threshold the run crossed (repeated errors first, then tool calls, then events), or None."""
    worst = stats.errors.most_common(1)
    if worst and worst[0][1] >= config.min_errors:
        return f"{worst[0][1]} errors from {worst[0][0]}"
    if len(stats.calls) >= config.min_tools:
        return f"{len(stats.calls)} tool calls"
    if stats.events >= config.min_events:
        return f"{stats.events} events"
    return None


def _stretches(calls: Sequence[ToolCall]) -> list[list[ToolCall]]:
    out: list[list[ToolCall]] = []
    for c in calls:
        if out and out[-1][0].tool == c.tool:
            out[-1].append(c)
        else:
            out.append([c])
    return out


def _step(stretch: list[ToolCall]) -> str:
    tool = stretch[0].tool
    args = sorted({a for c in stretch for a in c.args})
    call = f"Call `{tool}`" + (f" with {', '.join(args)}" if args else "")
    failed = [c for c in stretch if c.error is not None]
    if not failed:
        return call + "."
    last = (failed[-1].error or "")[:MAX_ERROR_CHARS]
    if len(failed) == len(stretch):
        return f"{call}: it failed {len(failed)}× in the drafting run ({last}); fix the cause before calling it again."
    return f"{call}: it failed {len(failed)}× before it succeeded ({last}); check its arguments first."


def draft(stats: RunStats, reason: str) -> dict[str, Any]:
    """The proposal's fields, deterministically from the run: title, steps, tools, description, when_to_use."""
    request = " ".join(stats.request.split())
    tools = list(dict.fromkeys(c.tool for c in stats.calls))
    title = (request[:80] or "Tool chain: " + " → ".join(tools))[:200] or "An agent run"
    steps = [_step(s) for s in _stretches(stats.calls)][:MAX_STEPS] or ["Answer without tools."]
    return {
        "title": title,
        "steps": steps,
        "tools": tools[:50],
        "when_to_use": request[:4000],
        "description": f"Drafted by the Org Memory skill curator from a run with {len(stats.calls)} tool calls and "
        f"{stats.events} events (trigger: {reason}).",
    }


def _error_of(result: Any) -> str | None:
    if isinstance(result, dict) and result.get("error"):
        return str(result["error"])
    return None


def _text(content: types.Content | None) -> str:
    parts = getattr(content, "parts", None) or []
    return " ".join(p.text for p in parts if getattr(p, "text", None)).strip()


class SkillCuratorPlugin(BasePlugin):
    """``Runner(..., plugins=[SkillCuratorPlugin(client)])`` (or an ``App``'s plugins)."""

    def __init__(
        self,
        client: OrgMemoryClient,
        *,
        config: CuratorConfig | None = None,
        scope: Sequence[str] = (),
        workspace: str = "default",
        clock: Callable[[], float] = time.monotonic,
        name: str = "orgmem_skill_curator",
    ) -> None:
        super().__init__(name)
        self.client = client
        self.config = config or CuratorConfig()
        self.scope = list(scope)
        self.workspace = workspace
        self.throttle = ForkThrottle(self.config, clock)
        self.proposals: list[str] = []  # proposal ids filed (this process)
        self._runs: dict[str, RunStats] = {}
        self._siblings = Siblings("curator", log)
        self._lease = ClientLease()

    @property
    def pending(self) -> int:
        return self._siblings.pending

    def _stats(self, invocation_id: str) -> RunStats:
        return self._runs.setdefault(invocation_id, RunStats())

    async def before_run_callback(self, *, invocation_context: InvocationContext) -> types.Content | None:
        if self.config.enabled:
            self._runs[invocation_context.invocation_id] = RunStats(request=_text(invocation_context.user_content))
        return None

    async def on_event_callback(self, *, invocation_context: InvocationContext, event: Event) -> Event | None:
        if self.config.enabled:
            self._stats(invocation_context.invocation_id).events += 1
        return None

    def _record(self, tool: BaseTool, args: dict[str, Any], ctx: ToolContext, error: str | None) -> None:
        if self.config.enabled:
            self._stats(ctx.invocation_id).calls.append(ToolCall(tool.name, tuple(sorted(args)), error))

    async def after_tool_callback(
        self, *, tool: BaseTool, tool_args: dict[str, Any], tool_context: ToolContext, result: dict[str, Any]
    ) -> dict[str, Any] | None:
        self._record(tool, tool_args, tool_context, _error_of(result))
        return None

    async def on_tool_error_callback(
        self, *, tool: BaseTool, tool_args: dict[str, Any], tool_context: ToolContext, error: Exception
    ) -> dict[str, Any] | None:
        self._record(tool, tool_args, tool_context, f"{type(error).__name__}: {error}")
        return None  # the error goes on as it would without the curator

    async def after_run_callback(self, *, invocation_context: InvocationContext) -> None:
        stats = self._runs.pop(invocation_context.invocation_id, None)
        if not self.config.enabled or stats is None or (reason := tripped(stats, self.config)) is None:
            return None
        pid = user_principal(str(invocation_context.user_id or ""))
        if pid is None:
            log.warning("curator: ADK user_id is not user:<uuid> or a uuid; no proposal")
            return None
        session_id = invocation_context.session.id
        if not self.throttle.claim(FORK, session_id):
            log.debug("curator: skipped (%s) for %s", self.throttle.skip_reason(FORK, session_id), session_id)
            return None
        body = draft(stats, reason) | {
            "scope": self.scope,
            "workspace": self.workspace,
            "source": {
                "agent": "orgmem-curator",
                "session_id": session_id[:128],
                "event_id": f"curator-{invocation_context.invocation_id}"[:128],
            },
        }
        self._siblings.spawn(self._propose(pid, body), name=f"orgmem-curator-{session_id}")
        return None

    async def on_run_error_callback(self, *, invocation_context: InvocationContext, error: Exception) -> None:
        self._runs.pop(invocation_context.invocation_id, None)  # a failed run is not curated; forget its counters
        return None

    async def _propose(self, principal_id: str, body: dict[str, Any]) -> None:
        await self._lease.ready(self.client)
        fields = {k: v for k, v in body.items() if k not in ("title", "steps")}
        try:
            out = await self.client.propose_procedure(body["title"], body["steps"], principal_id=principal_id, **fields)
        except OrgMemoryClientError as exc:
            log.warning("curator: proposal refused: %s", exc)
            return
        self.proposals.append(str(out.proposal_id))

    async def drain(self, timeout: float | None = None) -> int:  # noqa: ASYNC109 - the drain's cap
        """Wait for proposals in flight up to ``timeout`` (default ``drain_s``); cancel the rest."""
        return await self._siblings.drain(self.config.drain_s if timeout is None else timeout)

    async def close(self) -> None:
        """ADK calls this when the runner closes: drain, then close the client if the curator started it."""
        await self.drain()
        await self._lease.release(self.client)
