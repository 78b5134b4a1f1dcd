"""The door of the HTTP API (pure ASGI, outermost): authenticate before a byte of the body is read, and
bound the bytes actually read.

- Every route but the open ones (health, metrics, API documents) needs ``X-Api-Key``: a missing or
  wrong key is answered 401 at once, the body left unread.
- Every database statement a request runs is bounded by ``API_STATEMENT_TIMEOUT_MS``.
- ``Content-Length`` over ``MAX_REQUEST_BYTES`` -> 413 at once; a body without one (chunked) is
  counted as it streams and cut at the bound -> 413 (the handler never sees more than the bound).
"""

from __future__ import annotations

import hmac
from typing import Any

from fastapi import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from services.api.errors import error_response
from services.db.pool import statement_budget

OPEN_PATHS = frozenset({"/healthz", "/readyz", "/metrics", "/asyncapi", "/openapi.json", "/docs", "/redoc"})
OPEN_PREFIXES = ("/docs/",)


class BodyTooLarge(HTTPException):
    """Raised from ``receive`` once the streamed body passes the bound (FastAPI re-raises HTTPExceptions
    met while reading a body, so it reaches the handlers as a 413)."""

    def __init__(self, limit: int) -> None:
        super().__init__(413, detail={"field": "body", "msg": f"request body over {limit} bytes", "type": "too_large"})


def is_open(path: str) -> bool:
    return path in OPEN_PATHS or path.startswith(OPEN_PREFIXES)


class RequestLimits:
    def __init__(self, app: ASGIApp, *, api_key: str, max_bytes: int, statement_ms: int | None = None) -> None:
        self.app = app
        self._key = api_key.encode()
        self.max_bytes = max_bytes
        self.statement_ms = statement_ms

    def _key_ok(self, scope: Scope) -> bool:
        for k, v in scope.get("headers", ()):
            if k == b"x-api-key":
                return hmac.compare_digest(v, self._key)
        return False

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if not is_open(scope.get("path", "")) and not self._key_ok(scope):
            await error_response(401, {"field": "X-Api-Key", "msg": "missing or invalid X-Api-Key"})(
                scope, receive, send
            )
            return
        length = _content_length(scope)
        if length == -1:
            await error_response(400, {"field": "Content-Length", "msg": "not a number"})(scope, receive, send)
            return
        if length is not None and length > self.max_bytes:
            await error_response(413, BodyTooLarge(self.max_bytes).detail)(scope, receive, send)
            return
        state: dict[str, Any] = {"read": 0, "started": False}
        limit = self.max_bytes

        async def bounded_receive() -> Message:
            message = await receive()
            if message["type"] == "http.request":
                state["read"] += len(message.get("body", b""))
                if state["read"] > limit:
                    raise BodyTooLarge(limit)
            return message

        async def tracking_send(message: Message) -> None:
            if message["type"] == "http.response.start":
                state["started"] = True
            await send(message)

        try:
            with statement_budget(self.statement_ms):
                await self.app(scope, bounded_receive, tracking_send)
        except BodyTooLarge as exc:  # read outside FastAPI's body parsing (e.g. a raw request.body())
            if state["started"]:
                raise
            await error_response(413, exc.detail)(scope, receive, send)


def _content_length(scope: Scope) -> int | None:
    """The declared length, ``None`` when absent, -1 when malformed."""
    for k, v in scope.get("headers", ()):
        if k == b"content-length":
            return int(v) if v.isdigit() else -1
    return None
