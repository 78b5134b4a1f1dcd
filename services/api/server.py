"""The uvicorn server of the API with a request-header deadline.

uvicorn bounds an idle keep-alive connection (``timeout_keep_alive``) but not one that sends its request
headers slowly: a client could hold a connection open forever with half a request line. ``HeaderDeadline``
gives every request ``REQUEST_HEADER_TIMEOUT_S`` from the moment the server waits for it (a new connection,
or the end of the previous response) until its headers are complete; past it the server answers 408 and
closes. The body's deadline is the door's (``services.api.limits``, ``REQUEST_BODY_TIMEOUT_S``)."""

from __future__ import annotations

import asyncio
from typing import Any

import h11
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from services.settings import Settings

TIMEOUT_RESPONSE = (
    b"HTTP/1.1 408 Request Timeout\r\ncontent-type: application/json\r\nconnection: close\r\ncontent-length: %d\r\n\r\n"
)
TIMEOUT_BODY = (
    b'{"detail":{"field":"headers","errors":[{"field":"headers","msg":"request headers not received in time",'
    b'"type":"timeout"}]}}'
)


class HeaderDeadline(H11Protocol):
    header_timeout_s: float = 10.0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._header_deadline: asyncio.TimerHandle | None = None

    def _arm(self) -> None:
        self._disarm()
        self._header_deadline = self.loop.call_later(self.header_timeout_s, self._headers_late)

    def _disarm(self) -> None:
        if self._header_deadline is not None:
            self._header_deadline.cancel()
            self._header_deadline = None

    def _headers_late(self) -> None:
        self._header_deadline = None
        if self.transport.is_closing() or self.conn.their_state is not h11.IDLE:
            return
        self.transport.write(TIMEOUT_RESPONSE % len(TIMEOUT_BODY) + TIMEOUT_BODY)
        self.transport.close()

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self.conn.their_state is not h11.IDLE:  # the request's headers are in: the body has its own deadline
            self._disarm()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing() and self.conn.their_state is h11.IDLE:
            self._arm()  # waiting for the next request on this connection

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)


def uvicorn_config(app: Any, settings: Settings, *, host: str, port: int) -> uvicorn.Config:
    protocol = type("HeaderDeadline", (HeaderDeadline,), {"header_timeout_s": settings.request_header_timeout_s})
    return uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level="warning",
        access_log=False,
        lifespan="on",
        http=protocol,
        timeout_keep_alive=5,
    )
