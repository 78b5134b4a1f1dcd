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
from typing import Annotated, Any

from pydantic import AfterValidator, AwareDatetime, Field, ValidationError
from pydantic_core import PydanticCustomError

from orgmem_sdk.validation import (
    MAX_QUERY_TIME,
    MIN_QUERY_TIME,
    UNSTORABLE_RE,
    BoundedDatetime,
    SafeStr,
    storable,
    storable_value,
    utc_in_range,
)

MAX_NESTING = 32  # structured values: dicts/lists inside each other, counted from the field itself
MAX_JSON_DEPTH = 64  # any JSON body, checked on the text before parsing (no recursion, no interpreter limit)
_CONTROL_RE = re.compile("[\x00-\x1f\x7f]")  # escaped in field names: they travel in headers too
_JSON_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}:,]')
__all__ = [  # the value rules are the SDK's (one source, client and server); the rest is the server's
    "CURSOR_RE",
    "INT4_MAX",
    "INT8_MAX",
    "MAX_DAYS",
    "MAX_JSON_DEPTH",
    "MAX_NESTING",
    "MAX_QUERY_TIME",
    "MIN_QUERY_TIME",
    "UNSTORABLE_RE",
    "AwareBoundedDatetime",
    "BoundedDatetime",
    "Days",
    "NonNegativeBigInt",
    "PgBigInt",
    "PgInt",
    "Rejected",
    "SafeStr",
    "bigint_cursor",
    "check_structured",
    "field_errors",
    "load_json",
    "scan",
    "storable",
    "storable_value",
    "too_deep",
    "utc_in_range",
]


def check_structured(value: Any, path: str = "", depth: int = 0, max_depth: int = MAX_NESTING) -> None:
    """Every key and string of a JSON-like value is storable, nesting stays within ``max_depth``,
    numbers are finite. Errors carry the dotted ``path`` inside the value."""
    if depth > max_depth:
        top = ".".join(path.split(".")[:2])  # the item that is too deep, not a path of a thousand levels
        raise PydanticCustomError(
            "nesting_too_deep",
            "{path}: nested deeper than {limit} levels",
            {"path": top, "limit": max_depth},
        )
    if isinstance(value, str):
        storable(value, path)
    elif isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            raise PydanticCustomError("non_finite_number", "{path}: NaN or infinity", {"path": path})
    elif isinstance(value, Mapping):
        for k, v in value.items():
            key = str(k)
            sub = f"{path}.{_printable(key)}" if path else _printable(key)  # paths are always renderable
            storable(key, sub)
            check_structured(v, sub, depth + 1, max_depth)
    elif isinstance(value, list | tuple):
        for i, v in enumerate(value):
            check_structured(v, f"{path}.{i}" if path else str(i), depth + 1, max_depth)


# the same range, but a naive datetime is an error (admin filters and legal holds say which offset they mean)
AwareBoundedDatetime = Annotated[AwareDatetime, AfterValidator(utc_in_range)]

# integers bound for the Postgres column they land in (asyncpg refuses a value past int4/int8: it was a 500)
INT4_MAX = 2**31 - 1
INT8_MAX = 2**63 - 1
PgInt = Annotated[int, Field(ge=-(2**31), le=INT4_MAX)]
PgBigInt = Annotated[int, Field(ge=-(2**63), le=INT8_MAX)]
NonNegativeBigInt = Annotated[int, Field(ge=0, le=INT8_MAX)]
# a number of days subtracted from now() in SQL: more than about 6,700 years leaves the timestamp range
MAX_DAYS = 1_000_000
Days = Annotated[int, Field(le=MAX_DAYS)]  # the lower bound is the field's (0 or 1)
CURSOR_RE = re.compile(r"[0-9]{1,19}")


def bigint_cursor(value: str) -> int | None:
    """A keyset cursor (an int8 id as ASCII digits), ``None`` when it is not one."""
    if not CURSOR_RE.fullmatch(value):
        return None
    n = int(value)
    return n if n <= INT8_MAX else None


def scan(obj: Any, *, max_depth: int, prefix: str = "") -> None:
    """Refuse, naming the path, any unstorable string (keys included), non-finite number or nesting
    beyond ``max_depth`` anywhere in a parsed JSON body — before a model sees it (pydantic cannot even
    render an error whose location holds a lone surrogate)."""
    try:
        check_structured(obj, max_depth=max_depth)
    except PydanticCustomError as exc:
        path = str((exc.context or {}).get("path") or "")
        field = ".".join(p for p in (prefix, path) if p) or "body"
        raise Rejected([{"field": _printable(field), "msg": _printable(exc.message()), "type": exc.type}]) from None


def field_errors(exc: ValidationError, *, prefix: str = "") -> list[dict[str, str]]:
    """Pydantic's errors as ``{"field", "msg", "type"}``; the input is never echoed (it may not even be
    encodable). A nested path carried in the error's context (structured values) extends the field."""
    try:
        errors = exc.errors(include_input=False, include_url=False)
    except UnicodeError:  # a location that cannot be encoded; ``scan`` normally refuses these first
        return [{"field": prefix or "body", "msg": "invalid input (unencodable text)", "type": "unstorable_string"}]
    out: list[dict[str, str]] = []
    for e in errors:
        loc = [str(p) for p in e["loc"]]
        ctx = e.get("ctx") or {}
        inner = ctx.get("path")
        if isinstance(inner, str) and inner:
            loc.append(inner)
        field = ".".join(([prefix] if prefix else []) + loc) or prefix or "body"
        out.append({"field": _printable(field), "msg": _printable(str(e["msg"])), "type": str(e["type"])})
    return out


def _printable(text: str) -> str:
    """Error text that is always UTF-8 encodable and header-safe (lone surrogates and control characters
    escaped as ``\\udxxx`` / ``\\xNN``)."""
    text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    return _CONTROL_RE.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


class Rejected(ValueError):
    """Input refused by a contract: ``errors`` in the ``{"field", "msg", "type"}`` shape, ``field`` the first."""

    def __init__(self, errors: list[dict[str, str]]) -> None:
        field, msg = errors[0]["field"], errors[0]["msg"]
        super().__init__(msg if msg.startswith(f"{field}: ") else f"{field}: {msg}")  # the field named once
        self.errors = errors
        self.field = errors[0]["field"]
        self.type = errors[0]["type"]


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def too_deep(text: str, limit: int = MAX_JSON_DEPTH) -> str | None:
    """``None`` when the JSON text nests at most ``limit`` levels, else the path (first two segments)
    of the item that goes deeper — found by scanning tokens, so any depth is safe to check."""
    if text.count("{") + text.count("[") <= limit:
        return None  # nesting never exceeds the number of opening brackets (those inside strings included)
    depth = 0
    keys: list[str] = []  # the key (object) or index (array) at each open level
    arrays: list[bool] = []
    last_string = ""
    for m in _JSON_TOKEN.finditer(text):
        tok = m.group()
        if tok in "{[":
            depth += 1
            if depth > limit:
                return ".".join(k for k in keys[:2] if k)
            arrays.append(tok == "[")
            keys.append("0" if tok == "[" else "")
        elif tok in "}]":
            depth -= 1
            if arrays:
                arrays.pop()
                keys.pop()
        elif tok == ":":
            if keys:
                keys[-1] = last_string
        elif tok == ",":
            if arrays and arrays[-1]:
                keys[-1] = str(int(keys[-1]) + 1)
        else:
            last_string = tok[1:-1]
    return None


def load_json(raw: bytes | str, *, field: str = "body") -> Any:
    """Parse JSON the one way every door does (UTF-8, no NaN/Infinity, at most ``MAX_JSON_DEPTH``
    levels); failures are ``Rejected`` naming ``field`` (or the path that nests too deep)."""
    try:
        text = raw.decode("utf-8") if isinstance(raw, bytes | bytearray) else raw
    except UnicodeDecodeError as exc:
        raise Rejected([{"field": field, "msg": f"not UTF-8 (byte {exc.start})", "type": "invalid_utf8"}]) from None
    deep = too_deep(text)
    if deep is not None:
        msg = f"nested deeper than {MAX_JSON_DEPTH} levels"
        raise Rejected([{"field": _printable(deep) or field, "msg": msg, "type": "nesting_too_deep"}])
    try:
        return json.loads(text, parse_constant=_no_constant)
    except RecursionError:
        raise Rejected([{"field": field, "msg": "JSON nested too deeply", "type": "nesting_too_deep"}]) from None
    except ValueError as exc:
        msg = _printable(str(exc))[:200]
        raise Rejected([{"field": field, "msg": f"invalid JSON: {msg}", "type": "json_invalid"}]) from None
