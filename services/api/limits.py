"""The door of the HTTP API (pure ASGI, outermost): authenticate before a byte of the body is read, and
bound the bytes actually read.

- Our routes (``KEYED_PREFIXES``) need ``X-Api-Key``: a missing, unknown or revoked key is answered 401
  at once, the body left unread (``services/credentials.py``; the route's dependency checks the scope).
- A key bound to a workspace acts only there: a ``workspace`` query parameter or JSON body field (an
  envelope's, each of a batch's) naming another workspace -> 403 naming it; where the route takes a
  workspace and the request names none, the key's is filled in (never the default workspace).
- Every database statement a request runs is bounded by ``API_STATEMENT_TIMEOUT_MS``.
- ``Content-Length`` over ``MAX_REQUEST_BYTES`` -> 413 at once; a body without one (chunked) is
  counted as it streams and cut at the bound -> 413 (the handler never sees more than the bound).
- A JSON body is parsed once here, the one bounded way (``schemas.validation.load_json``), and
  scanned: a NUL, a lone surrogate (keys included) or nesting past 64 levels anywhere -> 422 naming
  the path, before FastAPI or pydantic see it (neither can render such an input in an error).
  Routes find the parsed body in ``request.state.json_body``.
"""

from __future__ import annotations

import json
import logging
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


class BodyTooLarge(HTTPException):
    """The streamed body passed the bound."""

    def __init__(self, limit: int) -> None:
        super().__init__(413, detail={"field": "body", "msg": f"request body over {limit} bytes", "type": "too_large"})


def is_keyed(path: str) -> bool:
    return path.startswith(KEYED_PREFIXES)


class RequestLimits:
    def __init__(self, app: ASGIApp, *, keys: KeyStore, max_bytes: int, statement_ms: int | None = None) -> None:
        self.app = app
        self.keys = keys
        self.max_bytes = max_bytes
        self.statement_ms = statement_ms

    async def _credential(self, scope: Scope) -> Credential | None:
        for k, v in scope.get("headers", ()):
            if k == b"x-api-key":
                return await self.keys.authenticate(v.decode("latin-1"))
        return None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        keyed = is_keyed(scope.get("path", ""))
        cred: Credential | None = None
        if keyed:
            try:
                cred = await self._credential(scope)
            except Exception as exc:  # the key table is unreachable: not the caller's fault
                log.warning("cannot check the API key: %s: %s", type(exc).__name__, exc)
                msg = f"cannot check the API key now ({type(exc).__name__})"
                await error_response(503, {"field": "database", "msg": msg, "type": "unavailable"})(
                    scope, receive, send
                )
                return
            if cred is None:
                detail = {
                    "field": "X-Api-Key",
                    "msg": "missing, unknown or revoked X-Api-Key",
                    "type": "unauthenticated",
                }
                await error_response(401, detail)(scope, receive, send)
                return
            scope.setdefault("state", {})[CREDENTIAL_STATE] = cred
        length = _content_length(scope)
        if length == -1:
            await error_response(400, {"field": "Content-Length", "msg": "not a number"})(scope, receive, send)
            return
        if length is not None and length > self.max_bytes:
            await error_response(413, BodyTooLarge(self.max_bytes).detail)(scope, receive, send)
            return
        try:
            body = await self._read_body(receive)
        except BodyTooLarge as exc:
            await error_response(413, exc.detail)(scope, receive, send)
            return
        if keyed and body and _is_json(scope):
            try:
                obj = load_json(body)
                scan(obj, max_depth=MAX_JSON_DEPTH)
            except Rejected as exc:
                await error_response(422, {"field": exc.field, "errors": exc.errors})(scope, receive, send)
                return
            scope.setdefault("state", {})["json_body"] = obj
        if cred is not None and cred.workspace is not None:
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
