"""The org directory: which groups a member belongs to (now or at a time), for viewers that arrive with
only a user principal (an MCP client, an ADK ``user_id``, a gateway that sends ``X-Principal-Id`` alone).

Two sources, unioned: the log-fed table ``group_memberships`` (envelope op ``membership``, applied by
``ingest/membership.py``, validity intervals — ``directory_members_at`` / ``directory_groups_at`` in SQL),
and static ``members`` lists in the org hierarchy file (``ORG_HIERARCHY_PATH``). Group ids are global
uuids, so a member's groups are looked up across workspaces, like ACL principals are.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import asyncpg

from schemas.envelope import PRINCIPAL_RE
from services.errors import ConfigurationError

MAX_DIRECTORY_GROUPS = 512


def static_members(config: Mapping[str, Any]) -> dict[str, frozenset[str]]:
    """``member -> groups`` from the optional ``members`` lists of the hierarchy config.

    ``ValueError`` naming the group for a malformed list or principal."""
    out: dict[str, set[str]] = {}
    for gid, attrs in (config.get("groups") or {}).items():
        members = attrs.get("members") if isinstance(attrs, Mapping) else None
        if members is None:
            continue
        if not isinstance(members, list):
            raise ValueError(f"group {gid}: members must be a list of user:<uuid> principals")
        for m in members:
            if not isinstance(m, str) or not PRINCIPAL_RE.match(m):
                raise ValueError(f"group {gid}: member {m!r} is not user:<uuid> or group:<uuid>")
            out.setdefault(m.lower(), set()).add(f"group:{str(gid).lower()}")
    return {k: frozenset(v) for k, v in out.items()}


def load_static_members(path: Path | None) -> dict[str, frozenset[str]]:
    """The hierarchy file's ``members``; ``ConfigurationError`` naming ``ORG_HIERARCHY_PATH`` when invalid."""
    if path is None:
        return {}
    try:
        data: dict[str, Any] = json.loads(path.read_text())
        return static_members(data)
    except (OSError, ValueError, AttributeError) as exc:
        raise ConfigurationError(f"invalid org hierarchy members: {exc}", setting="ORG_HIERARCHY_PATH") from exc


async def groups_of(conn: asyncpg.Connection, member: str, at: datetime | None = None) -> list[str]:
    """The groups ``member`` belongs to at ``at`` (default now), from the log-fed directory."""
    rows = await conn.fetch(
        "SELECT DISTINCT group_id FROM directory_groups_at($1, $2) ORDER BY group_id LIMIT $3",
        member,
        at or datetime.now(UTC),
        MAX_DIRECTORY_GROUPS,
    )
    return [r["group_id"] for r in rows]


async def members_at(conn: asyncpg.Connection, workspace: str, group: str, at: datetime) -> list[str]:
    """Who was a member of ``group`` at ``at`` (the table the governance permission history builds on)."""
    rows = await conn.fetch("SELECT member FROM directory_members_at($1, $2, $3) ORDER BY member", workspace, group, at)
    return [r["member"] for r in rows]


async def directory_groups(
    pool: asyncpg.Pool, static: Mapping[str, frozenset[str]], principal_id: str
) -> tuple[str, ...]:
    """A viewer's groups now: the log-fed directory plus the hierarchy file's ``members``."""
    async with pool.acquire() as conn:
        found = await groups_of(conn, principal_id)
    return tuple(sorted(set(found) | static.get(principal_id, frozenset())))
