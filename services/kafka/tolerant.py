"""Record parsing that a header key cannot break (issue 20 §1).

aiokafka decodes every header key as strict UTF-8 while it iterates a fetched batch (its C parser,
``DefaultRecordBatch._read_msg``). A key that is not UTF-8 — the protocol says String, but any producer can
write bytes there, aiokafka's own pure-Python builder included — raised ``UnicodeDecodeError`` out of
``consumer.getmany``: the records already drained from other partitions in that call were dropped while the
consumer's positions had moved past them (so the next commit lost them), and the partition holding the bad
record raised again on every fetch, for ever (and ``orgmem replay`` crashed on it).

Why a parser and not an exception handler: once aiokafka has raised, the failing record's bytes are gone and
the drained records of the same call with them; only the parser still has the record. So the fetcher's
``MemoryRecords`` is replaced (``install``, done once on import of ``services.kafka``) by
``TolerantMemoryRecords``: batches are still iterated by aiokafka's C parser (the fast path, unchanged for
every well-formed batch); a batch whose iteration raises ``UnicodeDecodeError`` is re-read from its own bytes
by ``_TolerantBatch``, the pure-Python parser with one difference — header keys are decoded with
``surrogateescape``, which is lossless (``key.encode("utf-8", "surrogateescape")`` gives the wire bytes back).
The record then reaches the stage like any other; ``services.kafka.decode.check_headers`` finds the key that
is not UTF-8 and the record is dead-lettered with its bytes and the reason — that one record, nothing else.

Header *values* were never decoded by aiokafka (bytes); we keep them bytes and decode only the ones the
product reads. The fetch loop's own invariant (``services.kafka.consumer``) covers whatever else a fetch may
raise.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import aiokafka.consumer.fetcher as _fetcher
from aiokafka.errors import CorruptRecordException
from aiokafka.record.default_records import _DefaultRecordBatchPy, _DefaultRecordPy
from aiokafka.record.memory_records import _MemoryRecordsPy
from aiokafka.record.util import decode_varint

log = logging.getLogger("orgmem.kafka")


def raw_header_key(key: str) -> bytes:
    """The wire bytes of a header key as ``TolerantMemoryRecords`` hands it out (lossless)."""
    return key.encode("utf-8", "surrogateescape")


def header_key_is_utf8(key: str) -> bool:
    try:
        key.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _nullable_bytes(
    buffer: Any, pos: int, decode_varint: Callable[[Any, int], tuple[int, int]]
) -> tuple[bytes | None, int]:
    """A varint-length-prefixed byte string at ``pos`` (a negative length is null: record keys and values, header
    values), and the position after it."""
    size, pos = decode_varint(buffer, pos)
    if size < 0:
        return None, pos
    return bytes(buffer[pos : pos + size]), pos + size


class _LenientKeyBatchPy(_DefaultRecordBatchPy):  # type: ignore[misc]  # @final in the stubs only
    """aiokafka's pure-Python v2 batch parser; header keys decoded with ``surrogateescape`` (lossless)."""

    def _read_msg(self, decode_varint: Callable[[Any, int], tuple[int, int]] = decode_varint) -> _DefaultRecordPy:
        # Adapted from aiokafka 0.14 ``_DefaultRecordBatchPy._read_msg`` (Apache-2.0); only the key decode differs.
        buffer = self._buffer
        pos: int = self._pos  # type: ignore[has-type]
        length, pos = decode_varint(buffer, pos)
        start_pos = pos
        _, pos = decode_varint(buffer, pos)  # attributes
        ts_delta, pos = decode_varint(buffer, pos)
        log_append = self.timestamp_type == self.LOG_APPEND_TIME
        timestamp = self.max_timestamp if log_append else self.first_timestamp + ts_delta
        offset_delta, pos = decode_varint(buffer, pos)
        offset = self.base_offset + offset_delta
        key, pos = _nullable_bytes(buffer, pos, decode_varint)
        value, pos = _nullable_bytes(buffer, pos, decode_varint)
        header_count, pos = decode_varint(buffer, pos)
        if header_count < 0:
            raise CorruptRecordException(f"Found invalid number of record headers {header_count}")
        headers: list[tuple[str, bytes | None]] = []
        for _ in range(header_count):
            h_key_len, pos = decode_varint(buffer, pos)
            if h_key_len < 0:
                raise CorruptRecordException(f"Invalid negative header key size {h_key_len}")
            h_key = bytes(buffer[pos : pos + h_key_len]).decode("utf-8", "surrogateescape")
            pos += h_key_len
            h_value, pos = _nullable_bytes(buffer, pos, decode_varint)
            headers.append((h_key, h_value))
        if pos - start_pos != length:
            raise CorruptRecordException(
                f"Invalid record size: expected to read {length} bytes in record payload, but instead read"
                f" {pos - start_pos}"
            )
        self._pos = pos
        return _DefaultRecordPy(offset, timestamp, self.timestamp_type, key, value, headers)


class _TolerantBatch:
    """One v2 batch: aiokafka's (C) parser first; on ``UnicodeDecodeError`` the rest of the batch is read
    again from its bytes by ``_LenientKeyBatchPy`` (records already yielded are not yielded twice)."""

    def __init__(self, fast: Any, data: Any) -> None:
        self._fast = fast
        self._data = data
        self._slow: _LenientKeyBatchPy | None = None
        self._last: int | None = None
        self._started = False

    def __getattr__(self, name: str) -> Any:  # base_offset, next_offset, is_control_batch, validate_crc, ...
        return getattr(self._fast, name)

    def __iter__(self) -> _TolerantBatch:
        if not self._started:
            self._started = True
            self._fast = iter(self._fast)  # the C batch decompresses on iter()
        return self

    def __next__(self) -> Any:
        if self._slow is None:
            try:
                record = next(self._fast)
            except UnicodeDecodeError as exc:
                log.warning(
                    "batch at offset %d has a header key that is not UTF-8 (%s): re-read with the tolerant parser",
                    self._fast.base_offset,
                    exc.reason,
                )
                self._slow = iter(_LenientKeyBatchPy(bytes(self._data)))
            else:
                self._last = record.offset
                return record
        while True:
            record = next(self._slow)
            if self._last is None or record.offset > self._last:
                self._last = record.offset
                return record


class TolerantMemoryRecords(_MemoryRecordsPy):  # type: ignore[misc]  # @final in the stubs only
    """The fetcher's ``MemoryRecords``: the batch walk in Python (a few struct reads per batch), every v2 batch
    wrapped in ``_TolerantBatch``; v0/v1 batches (no headers) are aiokafka's own."""

    def next_batch(self, *args: Any, **kwargs: Any) -> Any:
        data = self._next_slice
        batch = super().next_batch(*args, **kwargs)
        if batch is None or data is None or batch.magic < 2:
            return batch
        return _TolerantBatch(batch, data)


def install() -> None:
    """Make every aiokafka consumer of this process parse fetched records with ``TolerantMemoryRecords``."""
    current = _fetcher.MemoryRecords
    if current is TolerantMemoryRecords:
        return
    _fetcher.MemoryRecords = TolerantMemoryRecords
