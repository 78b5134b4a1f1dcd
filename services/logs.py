"""Process logging: plain text by default, one JSON object per line with ``LOG_FORMAT=json``.

Inside a stage batch every log line carries the batch's position — stage, topic, partition, first and
last offset, and the envelope ids (``x-envelope-id`` headers, up to ``MAX_IDS``) — from a context
variable the stage kit sets around each handler call (``stage_context``).
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import logging
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from typing import Any

from services.kafka.records import Record

MAX_IDS = 20
PLAIN = "%(asctime)s %(levelname)s %(name)s: %(message)s"
_context: contextvars.ContextVar[dict[str, Any] | None] = contextvars.ContextVar("orgmem_log_context", default=None)


def batch_context(stage: str, records: Sequence[Record]) -> dict[str, Any]:
    """Pure: the log fields of one batch (one topic; partitions and offset range summarised)."""
    if not records:
        return {"stage": stage}
    partitions = sorted({r.partition for r in records})
    ids = [e for e in (r.header("x-envelope-id") for r in records) if e]
    out: dict[str, Any] = {
        "stage": stage,
        "topic": records[0].topic,
        "partition": partitions[0] if len(partitions) == 1 else partitions,
        "offset": records[0].offset
        if len(records) == 1
        else [min(r.offset for r in records), max(r.offset for r in records)],
        "records": len(records),
    }
    if ids:
        out["envelope_id"] = ids[0] if len(ids) == 1 else ids[:MAX_IDS]
    return out


@contextlib.contextmanager
def stage_context(stage: str, records: Sequence[Record]) -> Iterator[None]:
    token = _context.set(batch_context(stage, records))
    try:
        yield
    finally:
        _context.reset(token)


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        body: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(),
            "level": record.levelname,
            "logger": record.name,
            "msg": record.getMessage(),
        }
        ctx = _context.get()
        if ctx:
            body.update(ctx)
        if record.exc_info:
            body["exc"] = self.formatException(record.exc_info)
        return json.dumps(body, default=str)


class ContextTextFormatter(logging.Formatter):
    """The plain format, with the batch position appended inside a stage."""

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        ctx = _context.get()
        if ctx:
            pos = " ".join(f"{k}={v}" for k, v in ctx.items() if k in ("stage", "topic", "partition", "offset"))
            line = f"{line} [{pos}]"
        return line


def configure(level: str = "INFO", fmt: str = "text") -> None:
    handler = logging.StreamHandler()
    handler.setFormatter(JsonFormatter() if fmt == "json" else ContextTextFormatter(PLAIN))
    root = logging.getLogger()
    for h in list(root.handlers):
        root.removeHandler(h)
    root.addHandler(handler)
    root.setLevel(level.upper())
