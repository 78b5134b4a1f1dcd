"""Scoped API keys: who may call which door, in which workspace (table ``api_keys``, migration 0012).

A key is ``omk_<id>.<secret>`` (``id``: 12 hex characters, public; ``secret``: 256 random bits). It is shown
once, by ``orgmem keys create``; at rest the table keeps only

- ``secret_sha256``: SHA-256 of the whole key. HTTP and MCP callers present the key (``X-Api-Key``); the
  door hashes it and looks the hash up. The key carries 256 random bits, so a plain hash is not
  brute-forceable and needs no salt or stretching (scrypt buys nothing here).
- ``rpc_verifier``: ``HMAC-SHA256(key, "orgmem-rpc-signing/v1")``. Kafka request/reply has no
  bearer-over-TLS door: a key put in a record would be readable by everyone who can read the request
  topic, and a hash cannot verify an HMAC. So the client derives this signing key from the key it holds
  and signs each request with it (``sign_rpc``); the retriever verifies with the stored copy. The verifier
  only signs RPC requests: it cannot be presented to HTTP or MCP (that needs the preimage of
  ``secret_sha256``). Someone who reads the ``api_keys`` table can forge RPC requests for unrevoked keys —
  protect the database as you protect the keys; revoking a key revokes its verifier.

Scopes (``SCOPES``): ``ingest`` (POST /ingress/*), ``directory`` (envelopes with ``op: membership``; needs
``ingest`` too to reach the ingress), ``agent`` (tools, memory writes, graph reads, MCP, Kafka RPC), ``admin``
(``/v1/admin/*``, taxonomy decisions, the ``X-Principal-Roles: admin`` role). A key with a ``workspace`` acts
in that workspace only (``bind_workspace``); ``NULL`` = any.

Lookups are cached for ``KEY_CACHE_S`` (2 s), so a created, rotated or revoked key takes effect within that
time in every running process, without a restart. ``SERVICE_API_KEY`` alone is single-key development mode:
that key has every scope in every workspace (``DEV_CREDENTIAL``), and the API logs a WARNING at start-up.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar

import asyncpg
from pydantic import BaseModel

SCOPES = ("ingest", "directory", "agent", "admin")
KEY_RE = re.compile(r"^omk_([0-9a-f]{12})\.([A-Za-z0-9_\-]{20,200})$")
DEV_KEY_ID = "dev"
RPC_SIGNING_LABEL = b"orgmem-rpc-signing/v1"
KEY_CACHE_S = 2.0
MAX_CACHED = 10_000
WORKSPACE_RE = re.compile(r"^[A-Za-z0-9_.\-]{1,64}$")

M = TypeVar("M", bound=BaseModel)
V = TypeVar("V")


@dataclass(frozen=True, slots=True)
class Credential:
    """An authenticated caller: the key's id, name, scopes and workspace (``None`` = any)."""

    key_id: str
    name: str
    scopes: frozenset[str]
    workspace: str | None = None

    def has(self, scope: str) -> bool:
        return scope in self.scopes

    @property
    def dev(self) -> bool:
        return self.key_id == DEV_KEY_ID


DEV_CREDENTIAL = Credential(DEV_KEY_ID, "SERVICE_API_KEY (single-key development mode)", frozenset(SCOPES))


class CredentialError(Exception):
    """A refused credential: ``status`` 401 (unknown, revoked, malformed) or 403 (lacks a scope, or a
    workspace other than the key's), ``field`` the input at fault."""

    def __init__(self, status: int, field: str, msg: str, kind: str) -> None:
        super().__init__(msg)
        self.status, self.field, self.msg, self.kind = status, field, msg, kind

    def detail(self) -> dict[str, str]:
        return {"field": self.field, "msg": self.msg, "type": self.kind}


def missing_scope(scope: str, field: str = "X-Api-Key") -> CredentialError:
    return CredentialError(403, field, f"this API key lacks the {scope!r} scope", "missing_scope")


def require(cred: Credential, scope: str, field: str = "X-Api-Key") -> None:
    if not cred.has(scope):
        raise missing_scope(scope, field)


# ---- key material -------------------------------------------------------------------------------------
def secret_sha256(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def rpc_signing_key(key: str) -> bytes:
    """The key's RPC signing key (the client derives it; ``api_keys`` stores it as ``rpc_verifier``)."""
    return hmac.new(key.encode(), RPC_SIGNING_LABEL, hashlib.sha256).digest()


def key_id_of(key: str) -> str:
    """The public id inside an ``omk_<id>.<secret>`` key; ``dev`` for any other string (SERVICE_API_KEY)."""
    m = KEY_RE.match(key)
    return m.group(1) if m else DEV_KEY_ID


def new_key() -> tuple[str, str]:
    """A fresh ``(id, key)``."""
    kid = secrets.token_hex(6)
    return kid, f"omk_{kid}.{secrets.token_urlsafe(32)}"


def check_scopes(scopes: list[str]) -> list[str]:
    bad = [s for s in scopes if s not in SCOPES]
    if bad or not scopes:
        raise ValueError(f"scopes must be some of {', '.join(SCOPES)}; got {scopes}")
    return sorted(set(scopes), key=SCOPES.index)


# ---- the table ------------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class KeyRow:
    id: str
    name: str
    scopes: list[str]
    workspace: str | None
    created_at: datetime
    revoked_at: datetime | None


async def create_key(
    conn: asyncpg.Connection, name: str, scopes: list[str], workspace: str | None = None
) -> tuple[KeyRow, str]:
    """Insert a key; returns its row and the key itself (shown once, never stored)."""
    wanted = check_scopes(scopes)
    if workspace is not None and not WORKSPACE_RE.match(workspace):
        raise ValueError(f"workspace must match {WORKSPACE_RE.pattern}")
    if not 1 <= len(name) <= 200:
        raise ValueError("name must be 1..200 characters")
    kid, key = new_key()
    row = await conn.fetchrow(
        "INSERT INTO api_keys (id, name, secret_sha256, rpc_verifier, scopes, workspace)"
        " VALUES ($1, $2, $3, $4, $5, $6) RETURNING id, name, scopes, workspace, created_at, revoked_at",
        kid,
        name,
        secret_sha256(key),
        rpc_signing_key(key),
        wanted,
        workspace,
    )
    return _row(row), key


async def list_keys(conn: asyncpg.Connection) -> list[KeyRow]:
    rows = await conn.fetch(
        "SELECT id, name, scopes, workspace, created_at, revoked_at FROM api_keys ORDER BY created_at, id"
    )
    return [_row(r) for r in rows]


async def revoke_key(conn: asyncpg.Connection, key_id: str) -> KeyRow | None:
    """Revoke (idempotent: an already revoked key keeps its first ``revoked_at``); ``None`` if unknown."""
    row = await conn.fetchrow(
        "UPDATE api_keys SET revoked_at = COALESCE(revoked_at, now()) WHERE id = $1"
        " RETURNING id, name, scopes, workspace, created_at, revoked_at",
        key_id,
    )
    return _row(row) if row else None


def _row(r: Mapping[str, Any]) -> KeyRow:
    return KeyRow(r["id"], r["name"], list(r["scopes"]), r["workspace"], r["created_at"], r["revoked_at"])


def _credential(r: Mapping[str, Any]) -> Credential:
    return Credential(r["id"], r["name"], frozenset(r["scopes"]), r["workspace"])


# ---- per-process lookups ----------------------------------------------------------------------------
class KeyStore:
    """Authenticates keys against ``SERVICE_API_KEY`` (dev mode) and the ``api_keys`` table, caching each
    answer (found or not) for ``ttl_s`` so revocation and rotation reach a running process within it."""

    def __init__(self, pool_of: Callable[[], asyncpg.Pool], dev_key: str | None, ttl_s: float = KEY_CACHE_S) -> None:
        self._pool_of = pool_of
        self._dev = dev_key.encode() if dev_key else None
        self._dev_signing = rpc_signing_key(dev_key) if dev_key else None
        self.ttl_s = ttl_s
        self._by_hash: dict[str, tuple[float, Credential | None]] = {}
        self._by_id: dict[str, tuple[float, tuple[Credential, bytes] | None]] = {}

    @property
    def dev_mode(self) -> bool:
        return self._dev is not None

    async def authenticate(self, key: str | None) -> Credential | None:
        """The credential of a presented key, ``None`` for a missing, unknown or revoked one."""
        if not key:
            return None
        if self._dev is not None and hmac.compare_digest(key.encode(), self._dev):
            return DEV_CREDENTIAL
        if not KEY_RE.match(key):
            return None
        sql = "SELECT id, name, scopes, workspace FROM api_keys WHERE secret_sha256 = $1 AND revoked_at IS NULL"
        return await self._cached(self._by_hash, secret_sha256(key), sql, _credential)

    async def verifier(self, key_id: str) -> tuple[Credential, bytes] | None:
        """The credential and RPC verifier of key ``key_id``; ``None`` for an unknown or revoked one."""
        if key_id == DEV_KEY_ID:
            return (DEV_CREDENTIAL, self._dev_signing) if self._dev_signing else None
        if not re.fullmatch(r"[0-9a-f]{12}", key_id):
            return None
        sql = "SELECT id, name, scopes, workspace, rpc_verifier FROM api_keys WHERE id = $1 AND revoked_at IS NULL"
        return await self._cached(self._by_id, key_id, sql, lambda row: (_credential(row), bytes(row["rpc_verifier"])))

    async def _cached(
        self, cache: dict[str, tuple[float, V | None]], key: str, sql: str, shape: Callable[[asyncpg.Record], V]
    ) -> V | None:
        """The live key row ``sql`` finds for ``key``, shaped, remembered for ``ttl_s`` (a miss too: a revoked or
        unknown key is not re-read on every request within the TTL)."""
        now = time.monotonic()
        hit = cache.get(key)
        if hit is not None and hit[0] > now:
            return hit[1]
        async with self._pool_of().acquire() as conn:
            row = await conn.fetchrow(sql, key)
        found = shape(row) if row else None
        if len(cache) >= MAX_CACHED:
            cache.clear()  # bounded: a flood of unknown keys cannot grow the process
        cache[key] = (now + self.ttl_s, found)
        return found


# ---- workspace from the credential ------------------------------------------------------------------------
def bind_workspace(req: M, workspace: str | None, field: str = "workspace") -> M:
    """The request in the credential's workspace: unchanged for a key of any workspace or a model without
    one; a request that names another workspace is refused (403 naming ``field``), never silently moved."""
    if workspace is None or "workspace" not in type(req).model_fields:
        return req
    given = getattr(req, "workspace", None)
    if "workspace" in req.model_fields_set and given != workspace:
        raise wrong_workspace(field)
    return req.model_copy(update={"workspace": workspace})


def wrong_workspace(field: str = "workspace") -> CredentialError:
    return CredentialError(403, field, "this API key acts in another workspace", "wrong_workspace")
