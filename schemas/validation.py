"""Validation helpers shared by every contract: storable strings, bounded nesting, bounded datetimes and
one shape for validation errors (``{"field", "msg", "type"}``, the first error's field at the top).

Pure data rules, no I/O: what Postgres cannot store (NUL, lone surrogates) and what our serialisers
cannot round-trip (deep nesting, NaN, datetimes that overflow when moved to UTC) is refused here, so
HTTP answers 422 naming the field and the Kafka path dead-letters the same input.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Annotated, Any

from pydantic import AfterValidator, ValidationError
from pydantic_core import PydanticCustomError

UNSTORABLE_RE = re.compile("[\x00\ud800-\udfff]")
MAX_NESTING = 32  # structured values: dicts/lists inside each other, counted from the field itself
MIN_QUERY_TIME = datetime(1000, 1, 1, tzinfo=UTC)
MAX_QUERY_TIME = datetime(9000, 12, 31, 23, 59, 59, tzinfo=UTC)


def storable(value: str, path: str = "") -> str:
    """The string unchanged, or a ``unstorable_string`` error: Postgres text holds no NUL and UTF-8 no
    lone surrogate."""
    m = UNSTORABLE_RE.search(value)
    if m is not None:
        what = "a NUL character" if m.group() == "\x00" else "a lone surrogate"
        raise PydanticCustomError(
            "unstorable_string",
            "{where}contains {what} at position {pos} (cannot be stored)",
            {"where": f"{path}: " if path else "", "what": what, "pos": m.start(), "path": path},
        )
    return value


def storable_value(value: str) -> str:
    return storable(value)


SafeStr = Annotated[str, AfterValidator(storable_value)]


def check_structured(value: Any, path: str = "", depth: int = 0, max_depth: int = MAX_NESTING) -> None:
    """Every key and string of a JSON-like value is storable, nesting stays within ``max_depth``,
    numbers are finite. Errors carry the dotted ``path`` inside the value."""
    if depth > max_depth:
        raise PydanticCustomError(
            "nesting_too_deep",
            "{path}: nested deeper than {limit} levels",
            {"path": path, "limit": max_depth},
        )
    if isinstance(value, str):
        storable(value, path)
    elif isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            raise PydanticCustomError("non_finite_number", "{path}: NaN or infinity", {"path": path})
    elif isinstance(value, Mapping):
        for k, v in value.items():
            key = str(k)
            sub = f"{path}.{key}" if path else key
            storable(key, sub)
            check_structured(v, sub, depth + 1, max_depth)
    elif isinstance(value, list | tuple):
        for i, v in enumerate(value):
            check_structured(v, f"{path}.{i}" if path else str(i), depth + 1, max_depth)


def utc_in_range(value: datetime, lo: datetime = MIN_QUERY_TIME, hi: datetime = MAX_QUERY_TIME) -> datetime:
    """Aware (naive = UTC) and, once moved to UTC, within [lo, hi]; an offset that overflows the
    datetime range is an error, not an exception."""
    if value.tzinfo is None or value.utcoffset() is None:
        value = value.replace(tzinfo=UTC)
    try:
        utc = value.astimezone(UTC)
    except (OverflowError, ValueError):
        raise ValueError("out of the supported date range") from None
    if not lo <= utc <= hi:
        raise ValueError(f"must be between {lo.isoformat()} and {hi.isoformat()}")
    return utc


BoundedDatetime = Annotated[datetime, AfterValidator(utc_in_range)]


def field_errors(exc: ValidationError, *, prefix: str = "") -> list[dict[str, str]]:
    """Pydantic's errors as ``{"field", "msg", "type"}``; the input is never echoed (it may not even be
    encodable). A nested path carried in the error's context (structured values) extends the field."""
    out: list[dict[str, str]] = []
    for e in exc.errors(include_input=False, include_url=False):
        loc = [str(p) for p in e["loc"]]
        ctx = e.get("ctx") or {}
        inner = ctx.get("path")
        if isinstance(inner, str) and inner:
            loc.append(inner)
        field = ".".join(([prefix] if prefix else []) + loc) or prefix or "body"
        out.append({"field": field, "msg": _printable(str(e["msg"])), "type": str(e["type"])})
    return out


def _printable(text: str) -> str:
    """Error text that is always UTF-8 encodable (lone surrogates replaced)."""
    return text.encode("utf-8", "replace").decode("utf-8")


class Rejected(ValueError):
    """Input refused by a contract: ``errors`` in the ``{"field", "msg", "type"}`` shape, ``field`` the first."""

    def __init__(self, errors: list[dict[str, str]]) -> None:
        super().__init__(f"{errors[0]['field']}: {errors[0]['msg']}")
        self.errors = errors
        self.field = errors[0]["field"]
        self.type = errors[0]["type"]


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def load_json(raw: bytes | str, *, field: str = "body") -> Any:
    """Parse JSON the one way every door does (UTF-8, no NaN/Infinity, nesting bounded by the
    interpreter); failures are ``Rejected`` naming ``field``."""
    try:
        text = raw.decode("utf-8") if isinstance(raw, bytes | bytearray) else raw
        return json.loads(text, parse_constant=_no_constant)
    except UnicodeDecodeError as exc:
        raise Rejected([{"field": field, "msg": f"not UTF-8 (byte {exc.start})", "type": "invalid_utf8"}]) from None
    except RecursionError:
        raise Rejected([{"field": field, "msg": "JSON nested too deeply", "type": "nesting_too_deep"}]) from None
    except ValueError as exc:
        msg = _printable(str(exc))[:200]
        raise Rejected([{"field": field, "msg": f"invalid JSON: {msg}", "type": "json_invalid"}]) from None
