"""The value rules every wire contract shares, client and server: principals, storable strings and bounded
datetimes. The server's ``schemas.validation`` and ``schemas.envelope`` re-export these (one source), so a
value the SDK accepts is one the server accepts, and the SDK still imports nothing of the server.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Annotated

from pydantic import AfterValidator, StringConstraints
from pydantic_core import PydanticCustomError

UNSTORABLE_RE = re.compile("[\x00\ud800-\udfff]")
MIN_QUERY_TIME = datetime(1000, 1, 1, tzinfo=UTC)
MAX_QUERY_TIME = datetime(9000, 12, 31, 23, 59, 59, tzinfo=UTC)
PRINCIPAL_RE = re.compile(r"^(user|group):[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")

Principal = Annotated[str, StringConstraints(pattern=PRINCIPAL_RE.pattern)]


def principal_set(principals: list[str]) -> list[str]:
    """Principals as a set in canonical form: lower-cased, de-duplicated, sorted, so two equal ACLs or scopes
    are equal lists (and hash, compare and store the same)."""
    return sorted({p.lower() for p in principals})


def storable(value: str, path: str = "") -> str:
    """The string unchanged, or a ``unstorable_string`` error: Postgres text holds no NUL and UTF-8 no
    lone surrogate."""
    if value.isascii() and "\x00" not in value:  # the common case in two C scans (no surrogate is ASCII)
        return value
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
    """:func:`storable` as a one-argument validator (``AfterValidator`` passes no path)."""
    return storable(value)


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
SafeStr = Annotated[str, AfterValidator(storable_value)]
