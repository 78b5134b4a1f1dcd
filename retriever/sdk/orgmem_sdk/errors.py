"""Typed errors of the Org Memory SDK (HTTP status or RPC error reply -> one class per meaning).

The SDK has its own root, ``OrgMemoryClientError``: it imports nothing of the server, so it ships alone.
"""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

M = TypeVar("M", bound=BaseModel)


class OrgMemoryClientError(Exception):
    """Root of every error the SDK raises on purpose. ``context`` carries ids and the field at fault."""

    def __init__(self, message: str, **context: Any) -> None:
        super().__init__(message)
        self.message = message
        self.context: dict[str, Any] = context

    def __str__(self) -> str:
        if not self.context:
            return self.message
        ctx = ", ".join(f"{k}={v}" for k, v in sorted(self.context.items()) if v is not None)
        return f"{self.message} ({ctx})" if ctx else self.message


class ConfigurationError(OrgMemoryClientError):
    """The SDK (or an adapter) is missing a setting; ``setting`` / ``field`` names it."""

    def __init__(self, message: str, *, setting: str | None = None, field: str | None = None) -> None:
        super().__init__(message, setting=setting, field=field)
        self.setting = setting
        self.field = field


class RpcTimeoutError(OrgMemoryClientError):
    """No reply within the timeout (after all retries)."""

    def __init__(self, message: str, *, correlation_id: str | None = None) -> None:
        super().__init__(message, correlation_id=correlation_id)
        self.correlation_id = correlation_id


class ToolCallError(OrgMemoryClientError):
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
    """422 (or 413), or a request the SDK's own contract refuses before sending: ``field`` names the field."""


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


def validated(model: type[M], value: BaseModel | dict[str, Any]) -> M:
    """``value`` as ``model``, or ``InvalidRequestError`` (status 422) whose ``field`` is the first error's
    dotted location — the same shape the server answers with; nothing is sent."""
    try:
        return model.model_validate(value.model_dump() if isinstance(value, BaseModel) else value)
    except ValidationError as exc:
        errors = exc.errors()
        field = ".".join(str(p) for p in errors[0]["loc"]) or None if errors else None
        msg = errors[0]["msg"] if errors else str(exc)
        raise InvalidRequestError(
            f"invalid {model.__name__}: {field or 'request'}: {msg}",
            status=422,
            type="ValidationError",
            field=field,
        ) from None
