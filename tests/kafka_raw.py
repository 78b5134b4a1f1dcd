"""Producing what our producers never write: a header key that is not UTF-8 (the protocol says String; aiokafka's
pure-Python record builder writes whatever ``key.encode()`` returns, so any producer can)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import aiokafka.producer.message_accumulator as accumulator
import aiokafka.producer.producer as producer_module
from aiokafka.record.default_records import _DefaultRecordBatchBuilderPy


class RawHeaderKey(str):
    """A header key whose wire bytes are ``raw`` (not UTF-8): the pure-Python builder writes ``key.encode()``."""

    raw: bytes

    def __new__(cls, raw: bytes) -> RawHeaderKey:
        obj = super().__new__(cls, raw.decode("latin-1"))
        obj.raw = raw
        return obj

    def encode(self, encoding: str = "utf-8", errors: str = "strict") -> bytes:
        return self.raw


@contextmanager
def python_record_builder() -> Iterator[None]:
    """Produce with aiokafka's pure-Python batch builder (the C one refuses a key it cannot encode)."""
    saved = accumulator.DefaultRecordBatchBuilder, producer_module.DefaultRecordBatchBuilder
    accumulator.DefaultRecordBatchBuilder = _DefaultRecordBatchBuilderPy
    producer_module.DefaultRecordBatchBuilder = _DefaultRecordBatchBuilderPy
    try:
        yield
    finally:
        accumulator.DefaultRecordBatchBuilder, producer_module.DefaultRecordBatchBuilder = saved
