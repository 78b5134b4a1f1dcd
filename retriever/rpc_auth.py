"""Authentication of Kafka requests on ``<ns>.rpc.retrieve.v1`` (the contract: ``retriever/rpc.py``).

Why an HMAC and not the broker's SASL/SCRAM + ACLs: the local broker (``deploy/kafka.sh``) and every client
(stages, the SDK, tests) speak PLAINTEXT today; SCRAM would authenticate the producing *service* but not
bind it to an Org Memory key's scopes and workspace, and reply topics are per client. So each request is
signed with the caller's API key (``retriever.rpc.sign_rpc``) and verified here against ``api_keys``:
the same keys, scopes, workspaces, rotation and revocation as the HTTP doors. What it does not do:
hide request or reply bodies from someone who can read the topics (that needs broker TLS + ACLs).
"""

from __future__ import annotations

import hashlib
import hmac
import time
from collections.abc import Mapping

import asyncpg

from retriever.rpc import (
    CORRELATION_ID,
    DEADLINE,
    KEY_ID_HEADER,
    REPLY_TO,
    RPC_SKEW_MS,
    SIGNATURE_HEADER,
    TIMESTAMP_HEADER,
    rpc_message,
)
from services.credentials import Credential, CredentialError, KeyStore, require

NONCE_KEEP_S = 15 * 60


async def verify_rpc(
    store: KeyStore,
    pool: asyncpg.Pool,
    headers: Mapping[str, str | None],
    body: bytes,
    *,
    position: str,
    now_ms: int | None = None,
) -> Credential:
    """The credential of a signed request, or ``CredentialError``: unsigned, unknown or revoked key, bad
    signature, timestamp outside ±5 min, a request id already served from another record (a replay), or a
    key without the ``agent`` scope."""
    now = now_ms if now_ms is not None else int(time.time() * 1000)
    kid, ts, sig = (headers.get(h) for h in (KEY_ID_HEADER, TIMESTAMP_HEADER, SIGNATURE_HEADER))
    rid = headers.get(CORRELATION_ID) or ""
    if not kid or not ts or not sig:
        missing = KEY_ID_HEADER if not kid else TIMESTAMP_HEADER if not ts else SIGNATURE_HEADER
        raise CredentialError(401, missing, f"unsigned request: missing {missing} header", "unauthenticated")
    if not ts.isdigit() or abs(int(ts) - now) > RPC_SKEW_MS:
        raise CredentialError(401, TIMESTAMP_HEADER, "timestamp missing or more than 5 minutes off", "stale")
    found = await store.verifier(kid)
    if found is None:
        raise CredentialError(401, KEY_ID_HEADER, "unknown or revoked key", "unauthenticated")
    cred, verifier = found
    msg = rpc_message(kid, ts, rid, headers.get(REPLY_TO) or "", headers.get(DEADLINE) or "", body)
    expected = hmac.new(verifier, msg, hashlib.sha256).hexdigest()
    if not hmac.compare_digest(expected.encode(), sig.encode()):
        raise CredentialError(401, SIGNATURE_HEADER, "signature does not match the request", "bad_signature")
    require(cred, "agent", KEY_ID_HEADER)
    async with pool.acquire() as conn:
        seen = await conn.fetchval(
            "WITH ins AS (INSERT INTO rpc_request_ids (key_id, request_id, position) VALUES ($1, $2, $3)"
            " ON CONFLICT (key_id, request_id) DO NOTHING RETURNING position)"
            " SELECT position FROM ins UNION ALL SELECT position FROM rpc_request_ids"
            " WHERE key_id = $1 AND request_id = $2 LIMIT 1",
            kid,
            rid,
            position,
        )
    if seen != position:  # the same signed bytes in another record: a replay (a redelivery keeps its position)
        raise CredentialError(401, "correlation_id", "request id already used (a replayed request)", "replayed")
    return cred


async def prune_request_ids(pool: asyncpg.Pool) -> int:
    async with pool.acquire() as conn:
        status = await conn.execute(
            "DELETE FROM rpc_request_ids WHERE seen_at < now() - make_interval(secs => $1)", float(NONCE_KEEP_S)
        )
    return int(status.rsplit(" ", 1)[-1])
