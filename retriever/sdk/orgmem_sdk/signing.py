"""Signing of Kafka request/reply calls: the client side of the retriever's check (server: ``retriever/rpc.py`` and
``retriever/rpc_auth.py``). Standard library only — the SDK ships without the server — and byte-compatible with
the server's ``rpc_message`` / ``sign_rpc`` (``tests/unit/retriever/test_sdk_signing.py`` checks both on shared
vectors).

Headers ``x-orgmem-key-id`` (the public id in ``omk_<id>.<secret>``, ``dev`` for a development key),
``x-orgmem-timestamp`` (epoch ms) and ``x-orgmem-signature`` = hex HMAC-SHA256, keyed with the key's RPC signing
key ``HMAC-SHA256(key, "orgmem-rpc-signing/v1")``, over key id, timestamp, request id, reply topic, deadline and the
body's SHA-256. The key itself never travels on the broker.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import time

KEY_ID_HEADER = "x-orgmem-key-id"
TIMESTAMP_HEADER = "x-orgmem-timestamp"
SIGNATURE_HEADER = "x-orgmem-signature"
_KEY_RE = re.compile(r"^omk_([0-9a-f]{12})\.([A-Za-z0-9_\-]{20,200})$")
_LABEL = b"orgmem-rpc-signing/v1"


def key_id_of(key: str) -> str:
    m = _KEY_RE.match(key)
    return m.group(1) if m else "dev"


def sign_rpc(
    key: str, *, request_id: str, reply_to: str, deadline: str, body: bytes, now_ms: int | None = None
) -> list[tuple[str, bytes]]:
    """The signature headers of one request."""
    kid = key_id_of(key)
    ts = str(now_ms if now_ms is not None else int(time.time() * 1000))
    signing_key = hmac.new(key.encode(), _LABEL, hashlib.sha256).digest()
    message = "\n".join(
        ("orgmem-rpc/v1", kid, ts, request_id, reply_to, deadline, hashlib.sha256(body).hexdigest())
    ).encode()
    mac = hmac.new(signing_key, message, hashlib.sha256).hexdigest()
    return [(KEY_ID_HEADER, kid.encode()), (TIMESTAMP_HEADER, ts.encode()), (SIGNATURE_HEADER, mac.encode())]
