"""The door of the HTTP API (pure ASGI, outermost): authenticate before a byte of the body is read, and
bound the bytes actually read and the time taken to send them.

- Every route that needs a caller is checked here from the headers alone, before the body is read: our routes
  (``KEYED_PREFIXES``) and, when ``API_DOCS=keyed``, the API documents need a valid ``X-Api-Key``
  (``services/credentials.py``; the route's dependency then checks the scope); ``/metrics`` takes a key or
  ``Bearer $METRICS_TOKEN``; ``/mcp`` a key or a bearer token of ``MCP_TOKENS_PATH``. A missing, unknown or
  revoked credential is answered 401 at once, the body left unread and the connection closed; a key table that
  cannot be read is 503 ``database``.
- A key bound to a workspace acts only there: a ``workspace`` query parameter or JSON body field (an
  envelope's, each of a batch's) naming another workspace -> 403 naming it; where the route takes a
  workspace and the request names none, the key's is filled in (never the default workspace).
- The whole body must arrive within ``REQUEST_BODY_TIMEOUT_S`` -> 408 (connection closed); the headers
  within ``REQUEST_HEADER_TIMEOUT_S`` (``services.api.server``).
- Every database statement a request runs is bounded by ``API_STATEMENT_TIMEOUT_MS``.
- ``Content-Length`` over ``MAX_REQUEST_BYTES`` -> 413 at once; a body without one (chunked) is
  counted as it streams and cut at the bound -> 413 (the handler never sees more than the bound).
- JSON bodies of our routes are parsed once, strictly (NUL, lone surrogates, NaN, nesting past 64 ->
  422 naming the field); the routes reuse the parsed object.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
from dataclasses import KW_ONLY, dataclass
from typing import Any
from urllib.parse import parse_qsl, urlencode

from fastapi import HTTPException
from fastapi.routing import APIRoute
from starlette.routing import Match
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from schemas.validation import MAX_JSON_DEPTH, Rejected, load_json, scan
from services.api.auth import CREDENTIAL_STATE
from services.api.errors import error_response
from services.credentials import Credential, KeyStore
from services.db.pool import statement_budget

log = logging.getLogger("orgmem.api")

# Our routes: X-Api-Key checked here, JSON bodies scanned here. Other paths (health, metrics, API documents,
# doors mounted with their own authentication and error format) only get the byte bound; routes under
# these prefixes still check the key in their dependencies too.
KEYED_PREFIXES = ("/ingress/", "/tools/", "/v1/", "/admin/")
DOCUMENT_PATHS = ("/openapi.json", "/docs", "/redoc", "/asyncapi")
UNAUTHENTICATED = {"field": "X-Api-Key", "msg": "missing, unknown or revoked X-Api-Key", "type": "unauthenticated"}


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


def _metrics_token_ok(scope: Scope) -> bool:
    token = scope["app"].state.runtime.settings.metrics_token
    given = _bearer(scope)
    return token is not None and given is not None and hmac.compare_digest(given, token.get_secret_value().encode())


def _mcp_token_ok(scope: Scope) -> bool:
    given = _bearer(scope)
    if given is None:
        return False
    found = False
    for known in getattr(scope["app"].state, "mcp_tokens", ()):  # constant time per token, every token compared
        found = hmac.compare_digest(known.encode(), given) or found
    return found


@dataclass
class RequestLimits:
    """The door every HTTP request passes (ASGI middleware around ``app``): key, size, time and workspace limits."""

    app: ASGIApp
    _: KW_ONLY
    keys: KeyStore
    max_bytes: int
    statement_ms: int | None = None
    body_timeout_s: float | None = None
    docs_keyed: bool = False

    async def _credential(self, scope: Scope) -> Credential | None:
        key = _header(scope, b"x-api-key")
        return None if key is None else await self.keys.authenticate(key.decode("latin-1"))

    async def _admit(self, scope: Scope, path: str) -> tuple[bool, Credential | None]:
        """(admitted, the key's credential) from the headers alone; raises when the key table is unreachable."""
        keyed = is_keyed(path) or (self.docs_keyed and path in DOCUMENT_PATHS)
        other = path == "/metrics" or path == "/mcp" or path.startswith("/mcp/")
        if not keyed and not other:
            return True, None
        if path == "/metrics" and _metrics_token_ok(scope):
            return True, None
        if other and _header(scope, b"x-api-key") is None and path != "/metrics":
            return _mcp_token_ok(scope), None
        cred = await self._credential(scope)
        return cred is not None, cred

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = scope.get("path", "")
        keyed = is_keyed(path)
        try:
            admitted, cred = await self._admit(scope, path)
        except Exception as exc:  # the key table is unreachable: not the caller's fault
            log.warning("cannot check the API key: %s: %s", type(exc).__name__, exc)
            msg = f"cannot check the API key now ({type(exc).__name__})"
            await error_response(503, {"field": "database", "msg": msg, "type": "unavailable"})(scope, receive, send)
            return
        if not admitted:
            # the body is never read: the connection closes after the answer (no slow body held open)
            headers = {"Connection": "close"} | ({"WWW-Authenticate": "Bearer"} if path.startswith("/mcp") else {})
            await error_response(401, UNAUTHENTICATED, headers)(scope, receive, send)
            return
        if cred is not None:
            scope.setdefault("state", {})[CREDENTIAL_STATE] = cred
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
        if keyed and cred is not None and cred.workspace is not None:
            refused = _bind_workspace(scope, cred.workspace)
            if refused is not None:
                await error_response(403, refused)(scope, receive, send)
                return
            obj = scope.get("state", {}).get("json_body")
            if obj is not None and body:
                body = json.dumps(obj, ensure_ascii=False).encode()
                _set_length(scope, len(body))
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


# ---- the key's workspace ---------------------------------------------------------------------------------
def _wrong(field: str, index: int | None = None) -> dict[str, Any]:
    detail: dict[str, Any] = {
        "field": field,
        "msg": "this API key acts in another workspace",
        "type": "wrong_workspace",
    }
    if index is not None:
        detail["index"] = index
    return detail


def _api_routes(routes: Any) -> Any:
    """Every ``APIRoute`` under ``routes`` (FastAPI wraps included routers; walk into them)."""
    for route in routes or ():
        if isinstance(route, APIRoute):
            yield route
        else:
            inner = getattr(route, "original_router", route)
            yield from _api_routes(getattr(inner, "routes", None))


def _route_takes_workspace(scope: Scope) -> tuple[bool, bool]:
    """(body model has ``workspace``, query has ``workspace``) of the route this request matches."""
    if scope.get("path", "").startswith("/ingress/"):
        return True, False  # envelopes (validated by hand there) carry a workspace
    app = scope.get("app")
    for route in _api_routes(getattr(getattr(app, "router", None), "routes", ())):
        match, _ = route.matches(scope)
        if match != Match.FULL:
            continue
        model = route.body_field.field_info.annotation if route.body_field else None
        fields = getattr(model, "model_fields", {})
        return "workspace" in fields, any(q.alias == "workspace" for q in route.dependant.query_params)
    return False, False


def _bind_workspace(scope: Scope, workspace: str) -> dict[str, Any] | None:
    """Refuse (the error detail) a request naming another workspace; fill in the key's where it is taken."""
    query = parse_qsl(scope.get("query_string", b"").decode("latin-1"), keep_blank_values=True)
    if any(k == "workspace" and v != workspace for k, v in query):
        return _wrong("workspace")
    state = scope.setdefault("state", {})
    obj = state.get("json_body")
    items = obj if isinstance(obj, list) else [obj] if isinstance(obj, dict) else []
    for i, item in enumerate(items):
        if isinstance(item, dict) and "workspace" in item and item["workspace"] != workspace:
            return _wrong(
                f"{i}.workspace" if isinstance(obj, list) else "workspace", i if isinstance(obj, list) else None
            )
    body_takes, query_takes = _route_takes_workspace(scope)
    if body_takes:
        for item in items:
            if isinstance(item, dict):
                item.setdefault("workspace", workspace)
    if query_takes and not any(k == "workspace" for k, _ in query):
        scope["query_string"] = urlencode([*query, ("workspace", workspace)]).encode()
    return None


def _set_length(scope: Scope, length: int) -> None:
    headers = [(k, v) for k, v in scope.get("headers", ()) if k != b"content-length"]
    scope["headers"] = [*headers, (b"content-length", str(length).encode())]
