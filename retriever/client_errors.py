"""Typed errors of ``OrgMemoryClient`` (HTTP status or RPC error reply -> one class per meaning)."""

from __future__ import annotations

from services.errors import OrgMemoryError, TransientError


class RpcTimeoutError(TransientError):
    """No reply within the timeout (after all retries)."""


class ToolCallError(OrgMemoryError):
    """The service answered with an error (HTTP status >= 400 or an ``ok: false`` reply)."""

    def __init__(
        self,
        message: str,
        *,
        status: int,
        type: str = "error",
        field: str | None = None,
        retry_after_s: float | None = None,
    ) -> None:
        super().__init__(message, status=status, type=type, field=field)
        self.status = status
        self.type = type
        self.field = field
        self.retry_after_s = retry_after_s


class AuthenticationError(ToolCallError):
    """401: missing or wrong API key / bearer token."""


class ForbiddenError(ToolCallError):
    """403: e.g. a memory scope the caller does not hold, or forgetting someone else's memory."""


class NotFoundError(ToolCallError):
    """404."""


class InvalidRequestError(ToolCallError):
    """422 (or 413): ``field`` names the offending field."""


class ThrottledError(ToolCallError):
    """429: ``retry_after_s`` from ``Retry-After``."""


class ServerError(ToolCallError):
    """5xx: retried with jittered backoff by the client before it surfaces."""


def error_for(status: int) -> type[ToolCallError]:
    if status == 401:
        return AuthenticationError
    if status == 403:
        return ForbiddenError
    if status == 404:
        return NotFoundError
    if status in (413, 422):
        return InvalidRequestError
    if status == 429:
        return ThrottledError
    if status >= 500:
        return ServerError
    return ToolCallError
