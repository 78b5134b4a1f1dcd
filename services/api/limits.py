"""The door of the HTTP API (pure ASGI, outermost): authenticate before a byte of the body is read, and
bound the bytes actually read.

- Our routes (``KEYED_PREFIXES``) need ``X-Api-Key``: a missing or wrong key is answered 401 at once,
  the body left unread.
- Every database statement a request runs is bounded by ``API_STATEMENT_TIMEOUT_MS``.
- ``Content-Length`` over ``MAX_REQUEST_BYTES`` -> 413 at once; a body without one (chunked) is
  counted as it streams and cut at the bound -> 413 (the handler never sees more than the bound).
- A JSON body is parsed once here, the one bounded way (``schemas.validation.load_json``), and
  scanned: a NUL, a lone surrogate (keys included) or nesting past 64 levels anywhere -> 422 naming
  the path, before FastAPI or pydantic see it (neither can render such an input in an error).
  Routes find the parsed body in ``request.state.json_body``.
"""

from __future__ import annotations

import hmac

from fastapi import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from schemas.validation import MAX_JSON_DEPTH, Rejected, load_json, scan
from services.api.errors import error_response
from services.db.pool import statement_budget

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
        keyed = is_keyed(scope.get("path", ""))
        if keyed and not self._key_ok(scope):
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
