"""The door of the HTTP API (pure ASGI, outermost): authenticate before a byte of the body is read, and
bound the bytes actually read and the time taken to send them.

- Every route that needs a caller is checked here from the headers alone, before the body is read: our
  routes (``KEYED_PREFIXES``) and, when ``API_DOCS=keyed``, the API documents need ``X-Api-Key``
  (``auth.check_key``); ``/metrics`` takes the key or ``Bearer $METRICS_TOKEN``; ``/mcp`` the key or a
  bearer token of ``MCP_TOKENS_PATH``. Anything else is answered 401 at once, the body left unread (the
  routes still run their full checks after this).
- The whole body must arrive within ``REQUEST_BODY_TIMEOUT_S`` -> 408 (connection closed); the headers
  within ``REQUEST_HEADER_TIMEOUT_S`` (``services.api.server``).
- Every database statement a request runs is bounded by ``API_STATEMENT_TIMEOUT_MS``.
- ``Content-Length`` over ``MAX_REQUEST_BYTES`` -> 413 at once; a body without one (chunked) is
  counted as it streams and cut at the bound -> 413 (the handler never sees more than the bound).
- A JSON body is parsed once here, the one bounded way (``schemas.validation.load_json``), and
  scanned: a NUL, a lone surrogate (keys included) or nesting past 64 levels anywhere -> 422 naming
  the path, before FastAPI or pydantic see it (neither can render such an input in an error).
  Routes find the parsed body in ``request.state.json_body``.
"""

from __future__ import annotations

import asyncio
import hmac
from collections.abc import Callable

from fastapi import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from schemas.validation import MAX_JSON_DEPTH, Rejected, load_json, scan
from services.api.auth import check_key
from services.api.errors import error_response
from services.db.pool import statement_budget

# Our routes: X-Api-Key checked here, JSON bodies scanned here. Other paths (health, metrics, API documents,
# doors mounted with their own authentication and error format) only get the byte bound; routes under
# these prefixes still check the key in their dependencies too.
KEYED_PREFIXES = ("/ingress/", "/tools/", "/v1/", "/admin/")
DOCUMENT_PATHS = ("/openapi.json", "/docs", "/redoc", "/asyncapi")


class BodyTooLarge(HTTPException):
    """The streamed body passed the bound."""

    def __init__(self, limit: int) -> None:
        super().__init__(413, detail={"field": "body", "msg": f"request body over {limit} bytes", "type": "too_large"})


class BodyTimeout(HTTPException):
    def __init__(self, seconds: float) -> None:
        msg = f"request body not received within {seconds:g} s"
        super().__init__(408, detail={"field": "body", "msg": msg, "type": "timeout"})


def is_keyed(path: str) -> bool:
    return path.startswith(KEYED_PREFIXES)


def _header(scope: Scope, name: bytes) -> bytes | None:
    for k, v in scope.get("headers", ()):
        if k == name:
            return bytes(v)
    return None


def _bearer(scope: Scope) -> bytes | None:
    auth = _header(scope, b"authorization") or b""
    return auth[7:].strip() if auth[:7].lower() == b"bearer " else None


def _metrics_ok(scope: Scope) -> bool:
    """``/metrics``: the key, or ``Authorization: Bearer $METRICS_TOKEN``."""
    if check_key(scope):
        return True
    token = scope["app"].state.runtime.settings.metrics_token
    given = _bearer(scope)
    return token is not None and given is not None and hmac.compare_digest(given, token.get_secret_value().encode())


def _mcp_ok(scope: Scope) -> bool:
    """``/mcp``: the key (``McpAuth`` checks the principal headers after), or a known bearer token."""
    if _header(scope, b"x-api-key") is not None:
        return check_key(scope)
    given = _bearer(scope)
    if given is None:
        return False
    found = False
    for known in getattr(scope["app"].state, "mcp_tokens", ()):  # constant time per token, every token compared
        found = hmac.compare_digest(known.encode(), given) or found
    return found


Gate = tuple[Callable[[Scope], bool], str, dict[str, str]]
KEY_GATE: Gate = (check_key, "missing or invalid X-Api-Key", {})
METRICS_GATE: Gate = (_metrics_ok, "missing or invalid X-Api-Key or METRICS_TOKEN bearer", {})
MCP_GATE: Gate = (_mcp_ok, "missing or invalid X-Api-Key or bearer token", {"WWW-Authenticate": "Bearer"})


class RequestLimits:
    def __init__(
        self,
        app: ASGIApp,
        *,
        max_bytes: int,
        statement_ms: int | None = None,
        body_timeout_s: float | None = None,
        docs_keyed: bool = False,
    ) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.statement_ms = statement_ms
        self.body_timeout_s = body_timeout_s
        self.docs_keyed = docs_keyed

    def gate(self, path: str) -> Gate | None:
        """The pre-body check of ``path`` (``None``: a public route)."""
        if is_keyed(path) or (self.docs_keyed and path in DOCUMENT_PATHS):
            return KEY_GATE
        if path == "/metrics":
            return METRICS_GATE
        if path == "/mcp" or path.startswith("/mcp/"):
            return MCP_GATE
        return None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = scope.get("path", "")
        keyed = is_keyed(path)
        gate = self.gate(path)
        if gate is not None and not gate[0](scope):
            # the body is never read: the connection closes after the answer (no slow body held open)
            headers = gate[2] | {"Connection": "close"}
            await error_response(401, {"field": "X-Api-Key", "msg": gate[1]}, headers)(scope, receive, send)
            return
        length = _content_length(scope)
        if length == -1:
            await error_response(400, {"field": "Content-Length", "msg": "not a number"})(scope, receive, send)
            return
        if length is not None and length > self.max_bytes:
            await error_response(413, BodyTooLarge(self.max_bytes).detail)(scope, receive, send)
            return
        try:
            async with asyncio.timeout(self.body_timeout_s):
                body = await self._read_body(receive)
        except BodyTooLarge as exc:
            await error_response(413, exc.detail)(scope, receive, send)
            return
        except TimeoutError:
            assert self.body_timeout_s is not None
            await error_response(408, BodyTimeout(self.body_timeout_s).detail, {"Connection": "close"})(
                scope, receive, send
            )
            return
        if keyed and body and _is_json(scope):
            try:
                obj = load_json(body)
                scan(obj, max_depth=MAX_JSON_DEPTH)
            except Rejected as exc:
                await error_response(422, {"field": exc.field, "errors": exc.errors})(scope, receive, send)
                return
            scope.setdefault("state", {})["json_body"] = obj
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()  # after the body: wait for the disconnect as usual

        with statement_budget(self.statement_ms):
            await self.app(scope, replay, send)

    async def _read_body(self, receive: Receive) -> bytes:
        """The whole body, never more than the bound (a chunked stream is cut as soon as it passes)."""
        chunks: list[bytes] = []
        read = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                break
            chunk = message.get("body", b"")
            read += len(chunk)
            if read > self.max_bytes:
                raise BodyTooLarge(self.max_bytes)
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        return b"".join(chunks)


def _is_json(scope: Scope) -> bool:
    for k, v in scope.get("headers", ()):
        if k == b"content-type":
            media = v.split(b";", 1)[0].strip().lower()
            return bool(media == b"application/json" or media.endswith(b"+json"))
    return True  # no content type: FastAPI parses the body as JSON too


def _content_length(scope: Scope) -> int | None:
    """The declared length, ``None`` when absent, -1 when malformed."""
    for k, v in scope.get("headers", ()):
        if k == b"content-length":
            return int(v) if v.isdigit() else -1
    return None
