"""Read-your-writes across the replica: ``X-Primary-Lsn`` on write replies, ``X-Min-Lsn`` on reads.

A write's reply (any non-GET request answered 2xx) carries ``X-Primary-Lsn``: the primary's WAL position after
the write committed. A read that passes it back as ``X-Min-Lsn`` is answered from the replica only once the
replica has replayed that position (waiting at most ``READ_MIN_LSN_WAIT_S``), else from the primary
(``services.db.readpool``). A malformed ``X-Min-Lsn`` is a 400 naming the header.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from fastapi import FastAPI, Request, Response
from fastapi.responses import JSONResponse

from services.db.readpool import MIN_LSN, parse_lsn, primary_lsn

READ_METHODS = {"GET", "HEAD", "OPTIONS"}
READ_PREFIXES = ("/tools/", "/v1/tools/", "/mcp")  # POSTed reads: no token (a write of theirs is only the audit row)


def install(app: FastAPI) -> None:
    @app.middleware("http")
    async def read_your_writes(request: Request, call_next: Callable[[Request], Awaitable[Response]]) -> Response:
        wanted = request.headers.get("x-min-lsn")
        if wanted:
            try:
                parse_lsn(wanted)
            except ValueError as exc:
                detail = [{"loc": ["header", "X-Min-Lsn"], "msg": str(exc), "type": "value_error"}]
                return JSONResponse({"error": "invalid_request", "detail": detail}, status_code=400)
        token = MIN_LSN.set(wanted or None)
        try:
            response = await call_next(request)
        finally:
            MIN_LSN.reset(token)
        rt = request.app.state.runtime
        replicated = rt.read_pool is not None and rt.read_pool.replica is not None
        is_write = request.method not in READ_METHODS and not request.url.path.startswith(READ_PREFIXES)
        if replicated and is_write and response.status_code < 400:
            response.headers["X-Primary-Lsn"] = await primary_lsn(rt.pool)
        return response
