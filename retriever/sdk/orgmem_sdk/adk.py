"""Google ADK memory service (optional extra ``adk``): ``OrgMemoryService(BaseMemoryService)``.

- ``search_memory(app_name, user_id, query)`` -> ``retrieve_context`` as the viewer ``user_id`` maps to
  (``user:<uuid>``, or a bare uuid; groups from the org directory, server-side) -> ``MemoryEntry``s with
  ``custom_metadata = {source, external_id, score, scope, url, title}``. ADK's ``load_memory`` tool
  and ``PreloadMemoryTool`` call it.
- ``add_session_to_memory`` / ``add_events_to_memory`` / ``add_memory`` -> ONE batch write
  (``POST /v1/memories/batch``: one write for the server's per-session throttle, however many events)
  at the configured default scope (``user`` unless configured; per call
  ``custom_metadata={"scope": "group:<uuid>"}``), one memory per (session id, event id): re-adding a
  session is idempotent. ``delete_memory`` -> tombstone.
- ``mcp_headers(api_key)``: the ``header_provider`` for ADK's ``McpToolset`` against ``/mcp``.

Wiring, two paths (neither is on by default):

1. ``register_org_memory_scheme()`` registers scheme ``orgmem`` in ADK's service registry — call it in
   the agents directory's ``services.py``, which ``adk api_server`` / ``adk web`` import (as the module
   ``services``; this package imports no module of that name) before building services — so
   ``adk api_server --memory_service_uri=orgmem://default`` and ``get_fast_api_app(memory_service_uri=…)``
   build this service. The caller opted in: the factory raises ``ConfigurationError`` naming
   ``ORGMEM_URL`` / ``ORGMEM_API_KEY`` when unset.
2. ``await build_memory_service()`` returns ``None`` — never raises — when ``ORGMEM_URL`` is unset,
   the extra is not installed, or the service does not answer ``/readyz``; it logs why.
``await build_default_service()`` is the plain constructor for scripts and evaluations (raises).

Environment: ``ORGMEM_URL`` (API base URL), ``ORGMEM_API_KEY`` (its ``SERVICE_API_KEY``),
``ORGMEM_MEMORY_SCOPE`` (default write scope), ``ORGMEM_MEMORY_LIMIT`` (passages per search, 10).
"""

from __future__ import annotations

import logging
import os
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import httpx

from orgmem_sdk.client import OrgMemoryClient
from orgmem_sdk.errors import ConfigurationError
from orgmem_sdk.validation import PRINCIPAL_RE

if TYPE_CHECKING:
    from google.adk.events.event import Event
    from google.adk.memory.base_memory_service import SearchMemoryResponse
    from google.adk.memory.memory_entry import MemoryEntry
    from google.adk.sessions.session import Session

try:
    from google.adk.memory.base_memory_service import BaseMemoryService
except ImportError:  # pragma: no cover - the extra is not installed
    BaseMemoryService = object  # type: ignore[misc,assignment]

log = logging.getLogger("orgmem.adk")
SCHEME = "orgmem"
BATCH = 500  # the server's RememberBatchRequest maximum
ENV_URL, ENV_KEY, ENV_SCOPE, ENV_LIMIT = "ORGMEM_URL", "ORGMEM_API_KEY", "ORGMEM_MEMORY_SCOPE", "ORGMEM_MEMORY_LIMIT"


def user_principal(user_id: str) -> str | None:
    """``user:<uuid>`` for an ADK user id (``user:<uuid>`` or a bare uuid); None when it is neither."""
    v = user_id.strip().lower()
    if not v.startswith("user:"):
        try:
            v = f"user:{uuid.UUID(v)}"
        except ValueError:
            return None
    return v if PRINCIPAL_RE.match(v) else None


def mcp_headers(api_key: str, *, principal_header: str = "X-Principal-Id") -> Callable[[Any], dict[str, str]]:
    """A ``header_provider`` for ADK's ``McpToolset`` against Org Memory's ``/mcp``: the API key and the
    viewer the ADK ``user_id`` maps to (``user:<uuid>`` or a bare uuid — never ``user:user:…``). An id
    that is neither sends no principal: the server then sees no user (no user-scoped memories), it never
    guesses one."""

    def provide(ctx: Any) -> dict[str, str]:
        headers = {"X-Api-Key": api_key}
        pid = user_principal(str(getattr(ctx, "user_id", "") or ""))
        if pid is not None:
            headers[principal_header] = pid
        else:
            log.warning("McpToolset: ADK user_id is not user:<uuid> or a uuid; no principal sent")
        return headers

    return provide


def _event_text(event: Event) -> str:
    content = getattr(event, "content", None)
    parts = getattr(content, "parts", None) or []
    return "\n".join(p.text for p in parts if getattr(p, "text", None) and not getattr(p, "thought", False)).strip()


class OrgMemoryService(BaseMemoryService):
    def __init__(
        self,
        client: OrgMemoryClient,
        *,
        writer: OrgMemoryClient | None = None,
        default_scope: str = "user",
        limit: int = 10,
        workspace: str = "default",
    ) -> None:
        """``client`` searches (HTTP or Kafka); writes go through ``writer`` (HTTP), default ``client``."""
        self.client = client
        self.writer = writer or client
        self.default_scope = default_scope
        self.limit = limit
        self.workspace = workspace
        self._started: set[int] = set()
        self._written: set[tuple[str, str, str | None, str]] = set()  # (app, user, session, event) sent

    async def _ready(self, client: OrgMemoryClient) -> OrgMemoryClient:
        if id(client) not in self._started:
            await client.start()
            self._started.add(id(client))
        return client

    async def _client(self) -> OrgMemoryClient:
        return await self._ready(self.client)

    async def aclose(self) -> None:
        for c in {id(self.client): self.client, id(self.writer): self.writer}.values():
            if id(c) in self._started:
                await c.close()
        self._started.clear()

    def _viewer(self, user_id: str) -> str:
        pid = user_principal(user_id)
        if pid is None:
            raise ConfigurationError(
                f"ADK user_id must be user:<uuid> or a uuid, got {user_id[:80]!r}", field="user_id"
            )
        return pid

    # ---- reads ------------------------------------------------------------------------------------------
    async def search_memory(self, *, app_name: str, user_id: str, query: str) -> SearchMemoryResponse:
        from google.adk.memory.base_memory_service import SearchMemoryResponse
        from google.adk.memory.memory_entry import MemoryEntry
        from google.genai import types

        pid = user_principal(user_id)
        if pid is None:  # an unknown viewer sees nothing; never a default user
            log.warning("search_memory: user_id %r is not user:<uuid>; no memories", user_id[:80])
            return SearchMemoryResponse()
        client = await self._client()
        # relevance-conditioned preload (seed 002): the viewer's top memories, then passages, deduplicated;
        # ADK's PreloadMemoryTool and load_memory both come through here
        block = await client.preload(
            {"text": query[:2000], "top_k": max(1, self.limit // 2), "workspace": self.workspace}, principal_id=pid
        )
        entries = [
            MemoryEntry(
                content=types.Content(role="user", parts=[types.Part.from_text(text=p.text)]),
                author=p.title or p.source_system,
                timestamp=p.event_time.isoformat(),
                id=p.external_id if p.source_system == "agent" else str(p.document_id),
                custom_metadata={
                    "source": p.source_system,
                    "external_id": p.external_id,
                    "score": p.score,
                    "scope": p.scope,
                    "url": p.url,
                    "title": p.title,
                    "citation": p.citation,
                },
            )
            for p in block.items
        ]
        return SearchMemoryResponse(memories=entries)

    # ---- writes -----------------------------------------------------------------------------------------
    def _body(
        self,
        *,
        app_name: str,
        text: str,
        session_id: str | None,
        event_id: str | None,
        custom_metadata: Mapping[str, object] | None,
        title: str | None = None,
    ) -> dict[str, Any]:
        scope = str((custom_metadata or {}).get("scope") or self.default_scope)
        body: dict[str, Any] = {
            "text": text,
            "scope": scope,
            "workspace": self.workspace,
            "source": {"agent": app_name[:128] or "adk", "session_id": session_id, "event_id": event_id},
        }
        if title:
            body["title"] = title[:256]
        kind = (custom_metadata or {}).get("kind")
        if isinstance(kind, str):
            body["kind"] = kind
        return body

    async def add_session_to_memory(self, session: Session) -> None:
        await self.add_events_to_memory(
            app_name=session.app_name, user_id=session.user_id, events=session.events, session_id=session.id
        )

    async def add_events_to_memory(
        self,
        *,
        app_name: str,
        user_id: str,
        events: Sequence[Event],
        session_id: str | None = None,
        custom_metadata: Mapping[str, object] | None = None,
    ) -> None:
        """The events' texts as ONE batch write (``POST /v1/memories/batch``): the server's per-session
        throttle counts a session once, however many events it has; re-adding a session sends only its
        new events (and the server's ids make a resent event the same memory)."""
        pid = self._viewer(user_id)
        fresh: list[tuple[tuple[str, str, str | None, str], dict[str, Any]]] = []
        for event in events:
            text = _event_text(event)
            seen = (app_name, user_id, session_id, event.id)
            if not text or seen in self._written or any(s == seen for s, _ in fresh):
                continue
            body = self._body(
                app_name=app_name,
                text=text,
                session_id=session_id,
                event_id=event.id,
                custom_metadata=custom_metadata,
                title=f"{event.author} in {app_name}",
            )
            fresh.append((seen, body))
        client = await self._ready(self.writer)
        for start in range(0, len(fresh), BATCH):
            chunk = fresh[start : start + BATCH]
            await client.remember_batch([b for _, b in chunk], principal_id=pid)
            self._written.update(s for s, _ in chunk)

    async def add_memory(
        self,
        *,
        app_name: str,
        user_id: str,
        memories: Sequence[MemoryEntry],
        custom_metadata: Mapping[str, object] | None = None,
    ) -> None:
        """The entries as one batch write (one write for the throttle)."""
        pid = self._viewer(user_id)
        bodies: list[dict[str, Any]] = []
        for entry in memories:
            parts = entry.content.parts or []
            text = "\n".join(p.text for p in parts if p.text).strip()
            if not text:
                continue
            meta = {**(custom_metadata or {}), **entry.custom_metadata}
            session = meta.get("session_id")
            bodies.append(
                self._body(
                    app_name=app_name,
                    text=text,
                    session_id=str(session) if session else None,
                    event_id=entry.id,
                    custom_metadata=meta,
                    title=entry.author,
                )
            )
        client = await self._ready(self.writer)
        for start in range(0, len(bodies), BATCH):
            await client.remember_batch(bodies[start : start + BATCH], principal_id=pid)

    async def delete_memory(self, *, app_name: str, user_id: str, memory_id: str | None = None) -> None:
        if not memory_id:
            raise ConfigurationError("delete_memory needs memory_id", field="memory_id")
        client = await self._ready(self.writer)
        await client.forget(memory_id, principal_id=self._viewer(user_id), workspace=self.workspace)


# ---- construction -----------------------------------------------------------------------------------------
def _from_env(env: Mapping[str, str]) -> OrgMemoryService:
    missing = [name for name in (ENV_URL, ENV_KEY) if not env.get(name)]
    if missing:
        raise ConfigurationError(
            f"org memory needs {', '.join(missing)} (base URL and API key of the Org Memory API)",
            setting=missing[0],
        )
    limit = int(env.get(ENV_LIMIT) or 10)
    return OrgMemoryService(
        OrgMemoryClient.http(env[ENV_URL], env[ENV_KEY], retries=2),
        default_scope=env.get(ENV_SCOPE) or "user",
        limit=limit,
    )


def _factory(uri: str, **_: Any) -> OrgMemoryService:
    """Registry factory for ``orgmem://default`` (configuration from the environment)."""
    if not uri.startswith(f"{SCHEME}://"):
        raise ConfigurationError(f"not an {SCHEME}:// URI: {uri!r}", setting="memory_service_uri")
    return _from_env(os.environ)


def register_org_memory_scheme() -> None:
    """Register scheme ``orgmem`` with ADK's service registry (idempotent)."""
    from google.adk.cli.service_registry import get_service_registry

    get_service_registry().register_memory_service(SCHEME, _factory)


async def build_default_service() -> OrgMemoryService:
    """For scripts and evaluations: the service from the environment; raises ``ConfigurationError``."""
    return _from_env(os.environ)


async def build_memory_service() -> OrgMemoryService | None:
    """The service when configured and answering, else ``None`` (never raises; logs why)."""
    if not os.environ.get(ENV_URL):
        log.info("org memory off: %s is unset", ENV_URL)
        return None
    try:
        import google.adk.memory  # noqa: F401
    except ImportError:
        log.warning("org memory off: the 'adk' extra (google-adk) is not installed")
        return None
    try:
        service = _from_env(os.environ)
        async with httpx.AsyncClient(base_url=os.environ[ENV_URL], timeout=3.0) as http:
            resp = await http.get("/readyz")
        if resp.status_code != 200:
            log.warning("org memory off: %s/readyz answered %s", os.environ[ENV_URL], resp.status_code)
            return None
    except Exception as exc:  # never raises: the agent keeps running without org memory
        log.warning("org memory off: %s: %s", type(exc).__name__, exc)
        return None
    return service
