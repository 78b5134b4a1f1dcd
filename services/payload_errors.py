"""The one formatter of a pydantic ``ValidationError``: which field, what is wrong with it.

Used wherever input is validated (HTTP ingress, the producer client, every stage's decode, the RPC stage,
settings and evaluation datasets), so every door names the field the same way: a dotted path
(``document.text``, ``participants.3.email``), ``body`` for the whole payload.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import ValidationError

from services.errors import InvalidPayloadError


def field_path(loc: Sequence[int | str], *, root: str = "body") -> str:
    return ".".join(str(p) for p in loc) or root


def field_errors(exc: ValidationError, *, root: str = "body") -> list[dict[str, Any]]:
    """Every error as ``{"field", "msg", "type"}`` (the HTTP 422 ``errors`` list)."""
    return [{"field": field_path(e["loc"], root=root), "msg": e["msg"], "type": e["type"]} for e in exc.errors()]


def first_error(exc: ValidationError, *, root: str = "body") -> tuple[str, str]:
    """``(field, message)`` of the first error."""
    first = exc.errors()[0]
    return field_path(first["loc"], root=root), first["msg"]


def invalid_payload(exc: ValidationError, *, prefix: str = "", **context: Any) -> InvalidPayloadError:
    """``InvalidPayloadError("<field>: <msg>", field=<field>)`` for the first error of ``exc``."""
    field, msg = first_error(exc)
    field = f"{prefix}{field}"
    return InvalidPayloadError(f"{field}: {msg}", field=field, errors=len(exc.errors()), **context)
