"""One error shape for every HTTP answer >= 400: ``{"detail": {"field", "errors": [{"field", "msg", "type"}]}}``.

Request validation errors, ``HTTPException`` raised by routes and dependencies, unknown routes and the
middleware's 401/413 all render through ``error_body``; the input is never echoed (it may not even be
encodable), and every message is made UTF-8 safe. ``responses(...)`` documents the shape in OpenAPI.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

import asyncpg
from aiokafka.errors import KafkaError
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field
from starlette.exceptions import HTTPException as StarletteHTTPException

from retriever.rpc import error_status
from services.errors import ObjectStoreError, OrgMemoryError

ExceptionHandler = Callable[[Request, Exception], Awaitable[JSONResponse]]

# the field an error names when the raiser named none
DEFAULT_FIELD = {
    400: "body",
    401: "X-Api-Key",
    403: "X-Principal-Roles",
    404: "path",
    405: "method",
    408: "body",
    409: "envelope_id",
    413: "body",
    429: "request",
    502: "vendor",
    503: "database",
    # 503 also names "broker" (ingress could not produce) and "object_store"
    504: "database",
}
SOURCES = {"body", "query", "path", "header", "cookie"}


class FieldError(BaseModel):
    field: str = Field(description="dotted path of the input at fault (body field, query parameter or header)")
    msg: str
    type: str


class ErrorDetail(BaseModel):
    field: str = Field(description="the first field at fault")
    errors: list[FieldError]
    index: int | None = Field(default=None, description="batch requests: the position of the offending item")


class ErrorBody(BaseModel):
    """Every error answer of the API."""

    detail: ErrorDetail


DESCRIPTIONS = {
    400: "Malformed request",
    401: "Missing or invalid X-Api-Key",
    403: "Admin route without the admin role, or a memory scope the caller does not hold",
    404: "Not found, or not visible to this viewer",
    408: "The request's headers or body did not arrive in time (REQUEST_HEADER_TIMEOUT_S / REQUEST_BODY_TIMEOUT_S)",
    409: "Conflicts with an earlier request (an envelope_id reused with different content)",
    413: "Request body over MAX_REQUEST_BYTES",
    422: "Invalid input; `field` names it",
    429: "Too many requests of this kind (concurrent graph walks, the memory-write throttle); see Retry-After",
    502: "A vendor (embedding, rerank, LLM) failed",
    503: "A dependency is unavailable or the request's database time budget ran out",
}
COMMON = (400, 401, 413, 422, 429, 503)


def responses(*codes: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI ``responses`` entries in the project's error shape for ``codes`` (plus the common ones)."""
    return {c: {"model": ErrorBody, "description": DESCRIPTIONS[c]} for c in sorted(set(COMMON + codes))}


ERROR_RESPONSES = responses()


def _safe(text: Any) -> str:
    return str(text).encode("utf-8", "replace").decode("utf-8")[:500]


def _validation_field(loc: Sequence[Any]) -> str:
    parts = [str(p) for p in loc]
    if parts and parts[0] in SOURCES:
        parts = parts[1:]
    return ".".join(parts) or "body"


def validation_errors(errors: Sequence[Mapping[str, Any]]) -> list[dict[str, str]]:
    """FastAPI's request-validation errors (``loc`` starts with body/query/path/header) in our shape."""
    out = []
    for e in errors:
        field = _validation_field(e.get("loc", ()))
        inner = (e.get("ctx") or {}).get("path")
        if isinstance(inner, str) and inner:
            field = f"{field}.{inner}"
        out.append({"field": _safe(field), "msg": _safe(e.get("msg", "")), "type": _safe(e.get("type", ""))})
    return out or [{"field": "body", "msg": "invalid request", "type": "invalid"}]


def error_body(status_code: int, detail: Any) -> dict[str, Any]:
    """Normalise whatever a raiser put in ``detail`` to ``{"field", "errors", ...}``."""
    default = DEFAULT_FIELD.get(status_code, "request")
    kind = f"http_{status_code}"
    if isinstance(detail, Mapping):
        extra = {k: v for k, v in detail.items() if k not in ("field", "errors", "msg", "type")}
        field = _safe(detail.get("field") or default)
        errors = detail.get("errors")
        if isinstance(errors, list) and errors:
            errs = [
                {
                    "field": _safe(e.get("field", field)),
                    "msg": _safe(e.get("msg", "")),
                    "type": _safe(e.get("type", kind)),
                }
                for e in errors
                if isinstance(e, Mapping)
            ]
        else:
            errs = [{"field": field, "msg": _safe(detail.get("msg", "")), "type": _safe(detail.get("type", kind))}]
        body: dict[str, Any] = {"field": field, "errors": errs}
        if isinstance(extra.get("index"), int):
            body["index"] = extra["index"]
        return {"detail": body}
    msg = _safe(detail if detail is not None else "")
    return {"detail": {"field": default, "errors": [{"field": default, "msg": msg, "type": kind}]}}


def error_response(status_code: int, detail: Any, headers: Mapping[str, str] | None = None) -> JSONResponse:
    return JSONResponse(error_body(status_code, detail), status_code=status_code, headers=dict(headers or {}))


async def _on_validation(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    errs = validation_errors(exc.errors())
    return error_response(422, {"field": errs[0]["field"], "errors": errs})


async def _on_http(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    return error_response(exc.status_code, exc.detail, getattr(exc, "headers", None))


def _unavailable(field: str, msg: str, kind: str = "unavailable") -> ExceptionHandler:
    """A 503 naming the dependency (``field``) that failed the request, retryable after a second;
    ``msg`` gets the exception's type name as ``{}``."""

    async def handler(request: Request, exc: Exception) -> JSONResponse:
        detail = {"field": field, "msg": msg.format(type(exc).__name__), "type": kind}
        return error_response(503, detail, {"Retry-After": "1"})

    return handler


_on_budget = _unavailable("database", "the request's database time budget ran out", "budget_exhausted")
_on_database_down = _unavailable("database", "database unavailable ({})")
_on_broker_down = _unavailable("broker", "the broker did not accept the record ({})")
_on_store_down = _unavailable("object_store", "object store unavailable ({})")


# What a request meets when Postgres is gone: a refused or reset socket (OSError), a connection lost mid-query,
# a server shutting down or refusing connections, an acquire/connect that timed out. The object store and the
# broker fail with their own types (ObjectStoreError, aiokafka's KafkaError).
DATABASE_DOWN: tuple[type[Exception], ...] = (
    OSError,
    TimeoutError,
    asyncpg.PostgresConnectionError,  # class 08 (connection exceptions), CannotConnectNow's siblings
    asyncpg.TooManyConnectionsError,
    asyncpg.CannotConnectNowError,
    asyncpg.AdminShutdownError,
    asyncpg.CrashShutdownError,
    asyncpg.ConnectionDoesNotExistError,
)


async def _on_org_memory_error(request: Request, exc: Exception) -> JSONResponse:
    """An ``OrgMemoryError`` a route let through answers with its own ``status`` / ``field`` (the same
    status the MCP and Kafka request/reply doors report for it)."""
    assert isinstance(exc, OrgMemoryError)
    code, detail = error_status(exc)
    headers = {"Retry-After": str(max(1, math.ceil(exc.retry_after_s)))} if exc.retry_after_s is not None else None
    if code == 429 and headers is None:
        headers = {"Retry-After": "3600"}  # a cap refusal: no useful retry time within the session
    return error_response(code, detail, headers)


def install(app: FastAPI) -> None:
    """Register the handlers (our error shape everywhere; database budget and outages are 503)."""
    app.add_exception_handler(OrgMemoryError, _on_org_memory_error)
    app.add_exception_handler(RequestValidationError, _on_validation)
    app.add_exception_handler(StarletteHTTPException, _on_http)
    app.add_exception_handler(asyncpg.QueryCanceledError, _on_budget)
    for kind in DATABASE_DOWN:
        app.add_exception_handler(kind, _on_database_down)
    app.add_exception_handler(KafkaError, _on_broker_down)
    app.add_exception_handler(ObjectStoreError, _on_store_down)
