"""Decoding records is ours, and it never fails a batch.

- ``safe_batch_parser``: FastStream's batch parser decodes every header value as UTF-8 before our handler
  runs; one non-UTF-8 header failed the whole poll. This parser hands FastStream a copy whose header
  values are decoded with replacement, and keeps the untouched records (raw bytes) for the handler.
- ``decode``: check a record's headers (``check_headers``) and validate its value against a model;
  ``InvalidPayloadError`` names the field at fault (``services.unit_of_work`` dead-letters that record alone).
- Headers are carried as bytes. Only the ones the product reads (``READ_HEADERS``) must decode as UTF-8; any
  other header value, whatever its bytes, never makes a record fail. Every header *key* must be UTF-8 (the
  protocol's String): a record with one that is not is dead-lettered, naming the key's bytes.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from services.errors import InvalidPayloadError
from services.kafka.records import Record
from services.kafka.tolerant import header_key_is_utf8, raw_header_key
from services.payload_errors import invalid_payload

M = TypeVar("M", bound=BaseModel)


def _printable_headers(headers: Sequence[tuple[str, Any]]) -> list[tuple[str, bytes]]:
    out: list[tuple[str, bytes]] = []
    for k, v in headers or ():
        raw = v if isinstance(v, bytes) else b"" if v is None else str(v).encode("utf-8", "replace")
        out.append((k, raw.decode("utf-8", "replace").encode()))
    return out


async def safe_batch_parser(raw: Any, original: Callable[[Any], Awaitable[Any]]) -> Any:
    """A FastStream custom parser (``parser=``) for batch subscribers; see the module docstring."""
    records = raw if isinstance(raw, (tuple, list)) else (raw,)
    printable = tuple(dataclasses.replace(r, headers=_printable_headers(r.headers)) for r in records)
    message = await original(printable if isinstance(raw, (tuple, list)) else printable[0])
    message.raw_message = raw  # the handler reads the original bytes
    return message


READ_HEADERS = frozenset({"x-envelope-id"})
"""Header values a stage reads as data (the others, e.g. ``traceparent``, are read leniently or not at all)."""


def check_headers(record: Record) -> None:
    """Every header key is UTF-8 (``headers`` names the culprit: its bytes, escaped), and so is the value of
    every header the product reads (``headers.<name>``)."""
    for name, value in record.headers:
        if not header_key_is_utf8(name):
            raise InvalidPayloadError(
                f"headers: header key {raw_header_key(name)!r} is not UTF-8", field="headers"
            ) from None
        if name not in READ_HEADERS:
            continue
        try:
            value.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InvalidPayloadError(
                f"headers.{name}: header value is not UTF-8 ({exc.reason} at byte {exc.start})",
                field=f"headers.{name}",
            ) from None


def decode(record: Record, model: type[M]) -> M:
    """Check the headers and validate the value; ``InvalidPayloadError`` names the first field at fault."""
    check_headers(record)
    try:
        return model.model_validate_json(record.value)
    except ValidationError as exc:
        raise invalid_payload(exc) from None
