"""The Kafka request/reply contract shared by the retriever stage and ``OrgMemoryClient`` (pure).

Request record on ``<ns>.rpc.retrieve.v1``: body = ``RpcRequest`` JSON; headers ``reply_to`` (the
requester's topic, which must be ``<ns>.rpc.reply.<client-id>.v1``), ``correlation_id`` and
``deadline`` (epoch milliseconds; the retriever drops requests past it). Reply record on
``reply_to``: body = ``RpcReply`` JSON, header ``correlation_id`` (also the record key).

Authentication (``sign_rpc``; verified by ``services.credentials.verify_rpc``): headers ``x-orgmem-key-id``
(the public id of the API key, ``dev`` for ``SERVICE_API_KEY``), ``x-orgmem-timestamp`` (epoch ms, within
±5 min of the retriever's clock) and ``x-orgmem-signature`` = hex HMAC-SHA256 over ``rpc_message`` with the
key's RPC signing key ``HMAC-SHA256(key, "orgmem-rpc-signing/v1")``. The key itself never travels: a
reader of the request topic learns nothing it can sign with; the retriever holds only the derived
verifier (``api_keys.rpc_verifier``), never the key.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import time
from typing import Any

from services.credentials import key_id_of, rpc_signing_key
from services.errors import OrgMemoryError

REPLY_TO = "reply_to"
CORRELATION_ID = "correlation_id"
DEADLINE = "deadline"
DEFAULT_TTL_MS = 30_000
CLIENT_ID_RE = re.compile(r"^[a-z0-9][a-z0-9_\-]{0,80}$")
# headers of a signed request (the correlation id is the request id)
KEY_ID_HEADER = "x-orgmem-key-id"
TIMESTAMP_HEADER = "x-orgmem-timestamp"
SIGNATURE_HEADER = "x-orgmem-signature"
RPC_SKEW_MS = 5 * 60 * 1000


def rpc_message(key_id: str, timestamp_ms: str, request_id: str, reply_to: str, deadline: str, body: bytes) -> bytes:
    """What a request's signature covers: key id, timestamp, request id (correlation id), reply topic,
    deadline and the body's SHA-256 — so no header that steers the request can be changed."""
    parts = ("orgmem-rpc/v1", key_id, timestamp_ms, request_id, reply_to, deadline, hashlib.sha256(body).hexdigest())
    return "\n".join(parts).encode()


def sign_rpc(
    key: str, *, request_id: str, reply_to: str, deadline: str, body: bytes, now_ms: int | None = None
) -> list[tuple[str, bytes]]:
    """The signature headers of one request, signed with ``key``'s RPC signing key."""
    kid = key_id_of(key)
    ts = str(now_ms if now_ms is not None else int(time.time() * 1000))
    mac = hmac.new(rpc_signing_key(key), rpc_message(kid, ts, request_id, reply_to, deadline, body), hashlib.sha256)
    return [
        (KEY_ID_HEADER, kid.encode()),
        (TIMESTAMP_HEADER, ts.encode()),
        (SIGNATURE_HEADER, mac.hexdigest().encode()),
    ]


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
