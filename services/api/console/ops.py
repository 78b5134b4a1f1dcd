"""What the operator console's admin routes compute, from the functions the CLI uses.

- pipeline status: ``services.governance.health.stage_health`` (lag, records/s, oldest unprocessed age, dead
  letters waiting — as ``GET /v1/admin/health``), the ``/readyz`` checks, the paused stages of this process,
  spend against budgets; every computation appends a lag sample to a ring buffer kept in the API process
  (15 minutes), sampled in the background while the console is in use;
- dead letters: ``services.ops.dlq`` (``orgmem dlq list|redrive``);
- jobs (:mod:`services.api.console.jobs`) and why-not (:mod:`services.api.console.whynot`) live in their own
  modules.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
import uuid
from collections import deque
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from fastapi import FastAPI, HTTPException, status

from services.governance.health import stage_health
from services.health import readiness
from services.runtime import Runtime
from services.settings import Settings
from services.stages import CATALOGUE

if TYPE_CHECKING:
    from services.api.console.jobs import Job

log = logging.getLogger(__name__)

HISTORY_S = 15 * 60


LIVE_S = 2.0  # sampling period while a console is open (polled in the last minute)


WATCHING_S = 60.0


IDLE_SAMPLE_S = 10.0  # afterwards, until 15 minutes after the last visit


CACHE_S = 1.0


PAYLOAD_CHARS = 4_000


SCAN_LIMIT = 5_000  # dead letters read per listing (topic and Postgres each)


@dataclass
class ConsoleState:
    """Per app: lag samples (oldest first), the last status, jobs, and when the console was last used."""

    history: deque[dict[str, Any]] = field(default_factory=lambda: deque(maxlen=int(HISTORY_S / 2) + 1))
    last: dict[str, Any] | None = None
    last_at: float = float("-inf")
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    seen_at: float = float("-inf")
    sampling: bool = False
    jobs: dict[uuid.UUID, Job] = field(default_factory=dict)
    redriven: dict[str, datetime] = field(default_factory=dict)


def state_of(app: FastAPI) -> ConsoleState:
    st: ConsoleState | None = getattr(app.state, "console", None)
    if st is None:
        st = app.state.console = ConsoleState()
    return st


async def _budget_use(rt: Runtime) -> list[dict[str, Any]]:
    from services.governance.budgets import alert_level

    async with rt.pool.acquire() as conn:
        rows = await conn.fetch(
            "SELECT b.workspace, b.model, b.daily_tokens,"
            " (SELECT COALESCE(sum(s.tokens), 0) FROM spend s WHERE s.day = current_date AND s.workspace = b.workspace"
            "  AND s.purpose <> 'embed' AND (b.model = '*' OR s.model = b.model)) AS tokens"
            " FROM budgets b ORDER BY b.workspace, b.model"
        )
    out = []
    for r in rows:
        budget, used = int(r["daily_tokens"]), int(r["tokens"])
        out.append(
            {
                "workspace": r["workspace"],
                "model": r["model"],
                "daily_tokens": budget,
                "tokens_today": used,
                "ratio": round(used / budget, 4) if budget else 1.0,
                "level": alert_level(used, budget),
            }
        )
    return out


async def _compute(rt: Runtime) -> dict[str, Any]:
    checks = await readiness(rt.pool, rt.store, rt.settings.kafka_bootstrap_servers)
    infra = [{"name": c.name, "ok": c.ok, "detail": c.detail, "latency_ms": round(c.latency_ms, 1)} for c in checks]
    ok = {c.name: c.ok for c in checks}
    stages: list[dict[str, Any]] = []
    if ok.get("kafka") and ok.get("postgres"):
        stages = await asyncio.wait_for(stage_health(rt.settings, rt.pool, {s.name: s.topic for s in CATALOGUE}), 20)
    paused = [
        {
            "stage": name,
            "down": [str(d) for d in st["down"]],  # type: ignore[attr-defined]
            "detail": {str(k): str(v) for k, v in st["detail"].items()},  # type: ignore[attr-defined]
            "paused_for_s": float(st["paused_for_s"]),  # type: ignore[arg-type]
        }
        for name, w in rt.watches.items()
        if w.paused
        for st in [w.state()]
    ]
    return {
        "checked_at": datetime.now(UTC),
        "generation": rt.settings.generation,
        "db_schema": rt.settings.db_schema,
        "stages": stages,
        "infrastructure": infra,
        "paused": paused,
        "budgets": await _budget_use(rt) if ok.get("postgres") else [],
    }


async def pipeline_status(app: FastAPI, *, visit: bool = True) -> dict[str, Any]:
    """The status plus the lag history. While the background sampler runs (it refreshes every ``LIVE_S`` while
    a console polls) a visit gets its latest sample at once; otherwise one computation at most every ``CACHE_S``
    (several open consoles share it)."""
    st = state_of(app)
    fresh_enough = LIVE_S + 1.0 if (visit and st.sampling) else CACHE_S
    if visit:
        st.seen_at = time.monotonic()
    if st.last is not None and time.monotonic() - st.last_at < fresh_enough:  # no wait for a sample under way
        return {**st.last, "history": list(st.history)}
    async with st.lock:
        if st.last is None or time.monotonic() - st.last_at >= fresh_enough:
            st.last = await _compute(app.state.runtime)
            st.last_at = time.monotonic()
            lags = {s["stage"]: int(s["lag"]) for s in st.last["stages"] if s["lag"] is not None}
            if lags:
                st.history.append({"at": st.last["checked_at"], "lag": lags})
        cutoff = datetime.now(UTC).timestamp() - HISTORY_S
        while st.history and st.history[0]["at"].timestamp() < cutoff:
            st.history.popleft()
        return {**st.last, "history": list(st.history)}


async def _sampler(app: FastAPI) -> None:
    """Sample every ``LIVE_S`` while a console polls, every ``IDLE_SAMPLE_S`` until 15 minutes after the last
    visit (the sparkline goes on filling), not at all otherwise."""
    st = state_of(app)
    try:
        while True:
            idle = time.monotonic() - st.seen_at
            st.sampling = idle <= WATCHING_S
            if idle > HISTORY_S:
                await asyncio.sleep(LIVE_S)
                continue
            wait = (LIVE_S if st.sampling else IDLE_SAMPLE_S) - (time.monotonic() - st.last_at)
            if wait > 0:
                await asyncio.sleep(min(wait, LIVE_S))  # re-check soon: a console may open meanwhile
                continue
            try:
                await pipeline_status(app, visit=False)
            except Exception as exc:  # a failed sample is skipped; the page shows the failure itself
                st.last_at = time.monotonic()
                log.debug("console lag sample failed: %s", exc)
    finally:
        st.sampling = False


@contextlib.asynccontextmanager
async def running(app: FastAPI) -> AsyncIterator[None]:
    """The console's background work (the lag sampler, jobs) lives as long as the app's lifespan."""
    task = asyncio.create_task(_sampler(app))
    try:
        yield
    finally:
        task.cancel()
        st = state_of(app)
        pending = [task, *(j.task for j in st.jobs.values() if j.task is not None and not j.task.done())]
        for t in pending:
            t.cancel()
        await asyncio.gather(*pending, return_exceptions=True)


def sparkline(history: list[dict[str, Any]], stage: str, width: int = 160, height: int = 28) -> dict[str, Any]:
    """SVG polyline points of one stage's lag over the kept history (no inline style: CSP-friendly)."""
    values = [int(h["lag"].get(stage, 0)) for h in history]
    if not values:
        return {"points": "", "max": 0, "width": width, "height": height, "n": 0}
    top = max(values) or 1
    step = width / max(1, len(values) - 1)
    pts = " ".join(
        f"{round(i * step, 1)},{round(height - 2 - (v / top) * (height - 4), 1)}" for i, v in enumerate(values)
    )
    return {"points": pts, "max": max(values), "width": width, "height": height, "n": len(values)}


def redrive_group(settings: Settings, stage: str) -> str:
    return f"{settings.group_prefix}om-dlq-redrive-{stage}"


def _pretty(value: bytes) -> tuple[str, bool]:
    text = value.decode("utf-8", "replace")
    with contextlib.suppress(ValueError):
        text = json.dumps(json.loads(text), indent=2, ensure_ascii=False, sort_keys=True)
    return text[:PAYLOAD_CHARS], len(text) > PAYLOAD_CHARS


def known_stage(stage: str) -> str:
    names = [s.name for s in CATALOGUE if s.name != "retrieve"]
    if stage not in names:
        raise HTTPException(
            status.HTTP_404_NOT_FOUND, detail={"field": "stage", "msg": f"no such stage; stages: {', '.join(names)}"}
        )
    return stage


async def dead_letter_page(
    settings: Settings, stage: str, *, error_class: str | None, limit: int, include_redriven: bool
) -> dict[str, Any]:
    """``orgmem dlq list``: the topic's letters (those not redriven yet, unless ``include_redriven``) and the
    ones kept in Postgres, each with its payload."""
    from services.ops.dlq import read_dead_letters, read_stored_letters

    group = None if include_redriven else redrive_group(settings, stage)
    topic = await read_dead_letters(settings, stage, group=group, limit=SCAN_LIMIT)
    stored = await read_stored_letters(settings, stage, limit=SCAN_LIMIT)
    letters = topic + stored
    classes: dict[str, int] = {}
    for letter in letters:
        classes[letter.error_class] = classes.get(letter.error_class, 0) + 1
    chosen = [x for x in letters if error_class in (None, "", x.error_class)]
    items = []
    for letter in chosen[:limit]:
        payload, cut = _pretty(letter.record.value)
        s = letter.summary()
        items.append(
            {
                "stage": stage,
                "position": str(s["position"]),
                "key": str(s["key"]),
                "error_class": str(s["error_class"]),
                "error_field": s["error_field"],
                "message": str(s["message"]),
                "original": str(s["original"]),
                "failed_at": s["failed_at"],
                "stored_in": s["stored_in"],
                "payload": payload,
                "payload_truncated": cut,
            }
        )
    scanned_all = len(topic) < SCAN_LIMIT and len(stored) < SCAN_LIMIT
    return {"stage": stage, "items": items, "classes": classes, "total": len(chosen), "scanned_all": scanned_all}
