"""One root exception for the whole project.

Two branches matter to the delivery machinery:
- ``TransientError``: worth retrying (vendor 5xx / timeout, DB connection, object store down).
  Stages retry with bounded, jittered backoff, then dead-letter.
- ``PermanentError``: retrying cannot help (invalid payload, poison message, unresolved author).
  Stages dead-letter at once and the partition moves on.

Errors carry ids (``context``) so logs and dead-letter headers can name what failed, and their own
answer to a caller: ``status`` (the HTTP status every door reports: HTTP, MCP, Kafka request/reply),
``field`` (the input at fault, if any) and ``retry_after_s`` (with 429/503: when to try again).
"""

from __future__ import annotations

from typing import Any


class OrgMemoryError(Exception):
    """Root of every error raised on purpose by Org Memory code."""

    status: int = 500
    field: str | None = None
    retry_after_s: float | None = None

    def __init__(self, message: str, **context: Any) -> None:
        super().__init__(message)
        self.message = message
        self.context: dict[str, Any] = context

    def __str__(self) -> str:
        if not self.context:
            return self.message
        ctx = ", ".join(f"{k}={v}" for k, v in sorted(self.context.items()))
        return f"{self.message} ({ctx})"


class TransientError(OrgMemoryError):
    """Retry with backoff; dead-letter once the retry budget is spent."""

    status = 503


class PermanentError(OrgMemoryError):
    """Dead-letter immediately; never retried."""


class ConfigurationError(OrgMemoryError):
    """Invalid or missing configuration. The process stops at boot naming the setting."""


class FieldError(PermanentError):
    """A client error about one input: ``field`` names it (the 4xx body's ``field``, and in ``context``)."""

    def __init__(self, message: str, *, field: str | None = None, **context: Any) -> None:
        super().__init__(message, field=field, **context)
        self.field = field


class RefusedError(OrgMemoryError):
    """A request refused with a status its raiser decides (403, 404, 409, 422) and the field at fault; the
    app's ``OrgMemoryError`` handler answers with both."""

    def __init__(self, message: str, *, status: int, field: str) -> None:
        super().__init__(message)
        self.status = status
        self.field = field


class InvalidPayloadError(FieldError):
    """A message or request body failed validation. ``field`` names the culprit."""

    status = 422


class NotFoundError(FieldError):
    """Nothing the viewer may see has this id or name (a 404: never says whether it exists)."""

    status = 404


class UnresolvedAuthorError(PermanentError):
    """Registry-bound structured fields need an author that resolves to a person."""

    status = 422


class VendorError(TransientError):
    """An embedding / LLM / rerank vendor call failed (5xx, timeout, connection)."""

    status = 502


class VendorRejectedError(PermanentError):
    """The vendor refused the request for a reason retrying cannot fix (4xx)."""

    status = 502


class ObjectStoreError(TransientError):
    """The object store could not be reached or refused a write."""


class SchemaVersionError(ConfigurationError):
    """The database schema is not at the version this code expects."""


class IdempotencyConflictError(FieldError):
    """An ``envelope_id`` (the idempotency key) re-used with different content: a client error."""

    status = 409

    def __init__(self, message: str, *, field: str = "envelope_id", **context: Any) -> None:
        super().__init__(message, field=field, **context)


class BusyError(TransientError):
    """Too many requests of this kind right now (a 429 with ``retry_after_s``), e.g. concurrent graph walks."""

    status = 429

    def __init__(self, message: str, *, field: str = "request", retry_after_s: float = 1.0, **context: Any) -> None:
        super().__init__(message, field=field, **context)
        self.field = field
        self.retry_after_s = retry_after_s
