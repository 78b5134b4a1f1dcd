"""Apply ``membership`` envelopes to the org directory (``group_memberships``), inside the ingest batch's
transaction.

Last-writer-wins per (workspace, group, member) by ``event_time``: an add or remove whose event time
is not newer than the head (``group_membership_heads``) is ignored, so a redelivered or out-of-order
older envelope never reopens or closes a stay. An add of a present member and a remove of an absent
one only move the head. A stay is a row ``[valid_from, valid_to)``; removal closes the open row.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import asyncpg

from schemas.envelope import ChangeEnvelope, Op


@dataclass(frozen=True, slots=True)
class MembershipResult:
    opened: int = 0
    closed: int = 0
    ignored: int = 0


def is_membership(env: ChangeEnvelope) -> bool:
    return env.op is Op.MEMBERSHIP


async def apply_memberships(conn: asyncpg.Connection, envelopes: Sequence[ChangeEnvelope]) -> MembershipResult:
    """Apply membership envelopes in log order (the caller has claimed their envelope ids)."""
    opened = closed = ignored = 0
    for env in envelopes:
        m = env.membership
        if m is None:  # validated away; a membership envelope always carries one
            continue
        changes = [(member, True) for member in m.added] + [(member, False) for member in m.removed]
        for member, add in changes:
            head = await conn.fetchrow(
                "SELECT present, event_time FROM group_membership_heads"
                " WHERE workspace = $1 AND group_id = $2 AND member = $3 FOR UPDATE",
                env.workspace,
                m.group,
                member,
            )
            if head is not None and head["event_time"] >= env.event_time:
                ignored += 1
                continue
            present = bool(head["present"]) if head is not None else False
            if add and not present:
                await conn.execute(
                    "INSERT INTO group_memberships (workspace, group_id, member, valid_from, added_by)"
                    " VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING",
                    env.workspace,
                    m.group,
                    member,
                    env.event_time,
                    env.envelope_id,
                )
                opened += 1
            elif not add and present:
                await conn.execute(
                    "UPDATE group_memberships SET valid_to = $4, removed_by = $5"
                    " WHERE workspace = $1 AND group_id = $2 AND member = $3 AND valid_to IS NULL",
                    env.workspace,
                    m.group,
                    member,
                    env.event_time,
                    env.envelope_id,
                )
                closed += 1
            await conn.execute(
                "INSERT INTO group_membership_heads (workspace, group_id, member, present, event_time, envelope_id)"
                " VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (workspace, group_id, member) DO UPDATE"
                " SET present = EXCLUDED.present, event_time = EXCLUDED.event_time, envelope_id = EXCLUDED.envelope_id",
                env.workspace,
                m.group,
                member,
                add,
                env.event_time,
                env.envelope_id,
            )
    return MembershipResult(opened, closed, ignored)
