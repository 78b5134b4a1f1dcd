"""Daily token budgets for optional LLM work, and the record of work a budget stopped.

A budget never stops the core pipeline (ingest, embeddings, zero-LLM extraction): callers ask
``admit`` before an optional call and fall back to the zero-LLM path when it refuses; the refusal is
counted in ``spend_refusals`` with its reason.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date
from typing import Any

import asyncpg

WARNING_RATIO = 0.8
ANY_MODEL = "*"


@dataclass(frozen=True, slots=True)
class Admission:
    allowed: bool
    reason: str | None
    budget: int | None
    spent: int


async def set_budget(conn: asyncpg.Connection, workspace: str, model: str, daily_tokens: int, actor: str) -> None:
    await conn.execute(
        "INSERT INTO budgets (workspace, model, daily_tokens, updated_by) VALUES ($1, $2, $3, $4)"
        " ON CONFLICT (workspace, model) DO UPDATE SET daily_tokens = EXCLUDED.daily_tokens,"
        " updated_at = now(), updated_by = EXCLUDED.updated_by",
        workspace,
        model,
        daily_tokens,
        actor,
    )


async def budgets(conn: asyncpg.Connection, workspace: str | None = None) -> list[dict[str, Any]]:
    rows = await conn.fetch(
        "SELECT workspace, model, daily_tokens FROM budgets WHERE $1::text IS NULL OR workspace = $1"
        " ORDER BY workspace, model",
        workspace,
    )
    return [dict(r) for r in rows]


async def budget_for(conn: asyncpg.Connection, workspace: str, model: str) -> tuple[int, str] | None:
    """The most specific budget and the model it is set for: the model's own row, else the workspace's
    '*' row (which counts every model's spend), else none."""
    row = await conn.fetchrow(
        "SELECT daily_tokens, model FROM budgets WHERE workspace = $1 AND model = ANY($2::text[])"
        " ORDER BY (model = '*') LIMIT 1",
        workspace,
        [model, ANY_MODEL],
    )
    return None if row is None else (int(row["daily_tokens"]), str(row["model"]))


async def tokens_today(conn: asyncpg.Connection, workspace: str, model: str = ANY_MODEL) -> int:
    """Optional-LLM tokens spent today (embeddings are core work and never count)."""
    value = await conn.fetchval(
        "SELECT COALESCE(sum(tokens), 0) FROM spend WHERE day = current_date AND workspace = $1"
        " AND ($2 = '*' OR model = $2) AND purpose <> 'embed'",
        workspace,
        model,
    )
    return int(value)


async def admit(
    conn: asyncpg.Connection,
    *,
    workspace: str,
    model: str,
    purpose: str,
    estimate: int,
    pending: int = 0,
    default_budget: int | None = None,
) -> Admission:
    """May optional work of ~``estimate`` tokens run? Records the refusal (with its reason) when not."""
    found = await budget_for(conn, workspace, model)
    budget, scope = found if found is not None else (default_budget, ANY_MODEL)
    if budget is None:
        return Admission(True, None, None, 0)
    spent = await tokens_today(conn, workspace, scope)
    if spent + pending + estimate <= budget:
        return Admission(True, None, budget, spent)
    reason = "budget_exhausted" if spent + pending >= budget else "budget_would_exceed"
    await record_refusal(conn, workspace=workspace, model=model, purpose=purpose, reason=reason)
    return Admission(False, reason, budget, spent)


async def record_refusal(conn: asyncpg.Connection, *, workspace: str, model: str, purpose: str, reason: str) -> None:
    await conn.execute(
        "INSERT INTO spend_refusals (day, workspace, model, purpose, reason, count) VALUES ($1,$2,$3,$4,$5,1)"
        " ON CONFLICT (day, workspace, model, purpose, reason) DO UPDATE"
        " SET count = spend_refusals.count + 1, last_at = now()",
        date.today(),
        workspace,
        model,
        purpose,
        reason,
    )


async def spend_rows(
    conn: asyncpg.Connection, *, workspace: str | None, since: date | None, until: date | None
) -> list[dict[str, Any]]:
    columns = "day, workspace, provider, model, purpose, calls, items, tokens"
    return await _daily(conn, "spend", columns, "provider, model, purpose", workspace, since, until)


async def refusals(
    conn: asyncpg.Connection, *, workspace: str | None, since: date | None, until: date | None
) -> list[dict[str, Any]]:
    columns = "day, workspace, model, purpose, reason, count"
    return await _daily(conn, "spend_refusals", columns, "model, purpose, reason", workspace, since, until)


async def _daily(
    conn: asyncpg.Connection,
    table: str,
    columns: str,
    order: str,
    workspace: str | None,
    since: date | None,
    until: date | None,
) -> list[dict[str, Any]]:
    """Rows of a per-day ledger (``spend``, ``spend_refusals``) in an optional workspace and day window, newest
    day first, at most 10 000. ``table``, ``columns`` and ``order`` are this module's constants, never input."""
    rows = await conn.fetch(
        f"SELECT {columns} FROM {table}"
        " WHERE ($1::text IS NULL OR workspace = $1) AND ($2::date IS NULL OR day >= $2)"
        f" AND ($3::date IS NULL OR day <= $3) ORDER BY day DESC, workspace, {order} LIMIT 10000",
        workspace,
        since,
        until,
    )
    return [dict(r) for r in rows]


def alert_level(tokens: int, budget: int) -> str | None:
    """``exhausted`` at ≥ 100 %, ``warning`` at ≥ 80 % of the daily budget, else none."""
    if budget <= 0:
        return "exhausted"
    ratio = tokens / budget
    if ratio >= 1.0:
        return "exhausted"
    if ratio >= WARNING_RATIO:
        return "warning"
    return None


async def alerts(conn: asyncpg.Connection) -> list[dict[str, Any]]:
    """Spend alerts for every budget today (per-model budgets count that model, '*' counts all)."""
    rows = await conn.fetch(
        "SELECT b.workspace, b.model, b.daily_tokens,"
        " (SELECT COALESCE(sum(s.tokens), 0) FROM spend s WHERE s.day = current_date AND s.workspace = b.workspace"
        "  AND s.purpose <> 'embed' AND (b.model = '*' OR s.model = b.model)) AS tokens"
        " FROM budgets b ORDER BY b.workspace, b.model"
    )
    out: list[dict[str, Any]] = []
    for r in rows:
        level = alert_level(int(r["tokens"]), int(r["daily_tokens"]))
        if level:
            budget = int(r["daily_tokens"])
            out.append(
                {
                    "workspace": r["workspace"],
                    "model": r["model"],
                    "level": level,
                    "tokens_today": int(r["tokens"]),
                    "daily_tokens": budget,
                    "ratio": round(int(r["tokens"]) / budget, 4) if budget else 1.0,
                }
            )
    return out
