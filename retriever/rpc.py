"""The Kafka request/reply contract shared by the retriever stage and ``OrgMemoryClient`` (pure).

Request record on ``<ns>.rpc.retrieve.v1``: body = ``RpcRequest`` JSON; headers ``reply_to`` (the
requester's topic, which must be ``<ns>.rpc.reply.<client-id>.v1``), ``correlation_id`` and
``deadline`` (epoch milliseconds; the retriever drops requests past it). Reply record on
``reply_to``: body = ``RpcReply`` JSON, header ``correlation_id`` (also the record key).
"""

from __future__ import annotations

import re
from typing import Any

from services.errors import OrgMemoryError

REPLY_TO = "reply_to"
CORRELATION_ID = "correlation_id"
DEADLINE = "deadline"
DEFAULT_TTL_MS = 30_000
CLIENT_ID_RE = re.compile(r"^[a-z0-9][a-z0-9_\-]{0,80}$")


def reply_topic(namespace: str, client_id: str) -> str:
    if not CLIENT_ID_RE.match(client_id):
        raise ValueError(f"client id must match {CLIENT_ID_RE.pattern}, got {client_id!r}")
    return f"{namespace}.rpc.reply.{client_id}.v1"


def valid_reply_topic(namespace: str, topic: str) -> bool:
    """Replies may only go to this namespace's reply topics (never to arbitrary topics)."""
    prefix = f"{namespace}.rpc.reply."
    if not (topic.startswith(prefix) and topic.endswith(".v1")):
        return False
    return bool(CLIENT_ID_RE.match(topic[len(prefix) : -len(".v1")]))


def deadline_ms(header: str | None, record_timestamp_ms: int | None, now_ms: int) -> int:
    """The request's deadline: its header, else record time (or now) + ``DEFAULT_TTL_MS``."""
    if header:
        try:
            return int(header)
        except ValueError:
            pass
    return (record_timestamp_ms or now_ms) + DEFAULT_TTL_MS


def error_status(exc: BaseException) -> tuple[int, dict[str, Any]]:
    """The status and detail every door reports for an error raised while serving a tool call: the error's
    own ``status`` (``services.errors``), its ``field`` and message; anything else is a 500 that says nothing."""
    if isinstance(exc, OrgMemoryError):
        detail: dict[str, Any] = {"msg": str(exc) if exc.status > 500 else exc.message}  # 5xx: with its ids
        if exc.field is not None:
            detail["field"] = exc.field
        return exc.status, detail
    return 500, {"msg": "internal error"}
