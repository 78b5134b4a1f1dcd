"""The admin health report: per stage backlog and throughput, dead letters, infrastructure, spend
alerts and retention warnings, folded into ``ok | degraded | failing``.

- failing: Postgres, Kafka or the object store is down.
- degraded: a stage's oldest unprocessed record is older than ``STALE_AFTER_S``, dead letters are
  waiting, a stage cannot be inspected, a spend budget is exhausted, or purged blobs are still queued.
"""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime
from typing import Any

import asyncpg
from aiokafka import AIOKafkaConsumer
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.structs import TopicPartition

from services.governance import budgets, retention, retention_policies
from services.health import readiness
from services.kafka.records import stop_consumer, topic_partitions
from services.kafka.topics import dlq_topic
from services.objectstore.port import ObjectStore
from services.settings import Settings

STALE_AFTER_S = 300.0
RATE_WINDOW_S = 60


async def _positions(
    admin: AIOKafkaAdminClient, consumer: AIOKafkaConsumer, topic: str, group: str
) -> tuple[dict[TopicPartition, int], dict[TopicPartition, int]]:
    """(end offset, next offset the group will read) per partition; an uncommitted group reads from the start."""
    tps = await topic_partitions(consumer, topic)
    if not tps:
        raise LookupError(f"topic {topic} does not exist")
    ends = await consumer.end_offsets(tps)
    begin = await consumer.beginning_offsets(tps)
    committed = await admin.list_consumer_group_offsets(group, partitions=tps)
    done = {
        tp: (committed[tp].offset if tp in committed and committed[tp].offset >= 0 else begin.get(tp, 0)) for tp in tps
    }
    return dict(ends), {tp: max(done[tp], begin.get(tp, 0)) for tp in tps}


async def _oldest_age_s(bootstrap: str, pending: dict[TopicPartition, int]) -> float | None:
    """Age of the oldest record among the first unprocessed record of each lagging partition."""
    if not pending:
        return None
    reader = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    await reader.start()
    try:
        reader.assign(list(pending))
        for tp, offset in pending.items():
            reader.seek(tp, offset)
        oldest: int | None = None
        want = set(pending)
        deadline = time.monotonic() + 3.0
        while want and time.monotonic() < deadline:
            got = await reader.getmany(timeout_ms=500, max_records=len(pending))
            for tp, records in got.items():
                if tp in want and records:
                    want.discard(tp)
                    reader.pause(tp)
                    ts = records[0].timestamp
                    oldest = ts if oldest is None else min(oldest, ts)
        return None if oldest is None else max(0.0, time.time() - oldest / 1000)
    finally:
        await stop_consumer(reader)


async def stage_health(settings: Settings, pool: asyncpg.Pool, stages: dict[str, str]) -> list[dict[str, Any]]:
    """``stages``: stage name -> its logical input topic (the stage catalogue)."""
    async with pool.acquire() as conn:
        rates = {
            r["stage"]: int(r["n"])
            for r in await conn.fetch(
                "SELECT stage, count(*) AS n FROM processed_events"
                " WHERE processed_at > now() - make_interval(secs => $1) GROUP BY stage",
                float(RATE_WINDOW_S),
            )
        }
    admin = AIOKafkaAdminClient(bootstrap_servers=settings.kafka_bootstrap_servers, request_timeout_ms=10_000)
    consumer = AIOKafkaConsumer(bootstrap_servers=settings.kafka_bootstrap_servers, enable_auto_commit=False)
    await admin.start()
    await consumer.start()
    out: list[dict[str, Any]] = []
    try:
        for stage, logical in stages.items():
            topic, group = settings.topic(logical), settings.group(stage)
            row: dict[str, Any] = {
                "stage": stage,
                "group": group,
                "topic": topic,
                "lag": None,
                "records_per_s": round(rates.get(stage, 0) / RATE_WINDOW_S, 3) if stage != "retrieve" else None,
                "oldest_unprocessed_age_s": None,
                "dead_letters_waiting": None,
                "error": None,
            }
            try:
                ends, done = await _positions(admin, consumer, topic, group)
                row["lag"] = sum(max(0, ends[tp] - done[tp]) for tp in ends)
                pending = {tp: done[tp] for tp in ends if ends[tp] > done[tp]}
                age = await _oldest_age_s(settings.kafka_bootstrap_servers, pending)
                row["oldest_unprocessed_age_s"] = None if age is None else round(age, 1)
                if stage != "retrieve":
                    d_ends, d_done = await _positions(
                        admin, consumer, dlq_topic(settings, stage), f"{settings.group_prefix}om-dlq-redrive-{stage}"
                    )
                    row["dead_letters_waiting"] = sum(max(0, d_ends[tp] - d_done[tp]) for tp in d_ends)
            except Exception as exc:  # a report names what it could not inspect
                row["error"] = f"{type(exc).__name__}: {exc}"[:300]
            out.append(row)
    finally:
        await stop_consumer(consumer)
        await admin.close()
    return out


def fold_status(
    infra: list[dict[str, Any]],
    stages: list[dict[str, Any]],
    alerts: list[dict[str, Any]],
    warnings: list[dict[str, Any]],
) -> tuple[str, list[str]]:
    """Pure: the overall status and the reasons for it."""
    failing = [f"{c['name']} down: {c['detail']}" for c in infra if not c["ok"]]
    if failing:
        return "failing", failing
    reasons: list[str] = []
    for s in stages:
        if s["error"]:
            reasons.append(f"stage {s['stage']}: {s['error']}")
        if (s["oldest_unprocessed_age_s"] or 0) > STALE_AFTER_S:
            reasons.append(f"stage {s['stage']}: oldest unprocessed record {s['oldest_unprocessed_age_s']:.0f}s old")
        if s["dead_letters_waiting"]:
            reasons.append(f"stage {s['stage']}: {s['dead_letters_waiting']} dead letters waiting")
    reasons += [f"budget exhausted: {a['workspace']} / {a['model']}" for a in alerts if a["level"] == "exhausted"]
    reasons += [f"retention: {w['detail']}" for w in warnings if w["kind"] == "blob_queue"]
    return ("degraded" if reasons else "ok"), reasons


def _warning(workspace: str, kind: str, count: int, detail: str) -> list[dict[str, Any]]:
    """One retention warning when ``count`` is non-zero, none otherwise (the list to extend with)."""
    return [{"workspace": workspace, "kind": kind, "count": count, "detail": detail}] if count else []


async def admin_health(
    settings: Settings, pool: asyncpg.Pool, store: ObjectStore, stages: dict[str, str]
) -> dict[str, Any]:
    checks = await readiness(pool, store, settings.kafka_bootstrap_servers)
    infra = [{"name": c.name, "ok": c.ok, "detail": c.detail, "latency_ms": round(c.latency_ms, 1)} for c in checks]
    db_ok = all(c.ok for c in checks if c.name == "postgres")
    kafka_ok = all(c.ok for c in checks if c.name == "kafka")
    stage_rows: list[dict[str, Any]] = []
    alerts: list[dict[str, Any]] = []
    warnings: list[dict[str, Any]] = []
    if db_ok:
        async with pool.acquire() as conn:
            alerts = await budgets.alerts(conn)
            for w in await retention_policies.due_summary_cached(conn, settings.db_schema):
                ws = w["workspace"]
                warnings += _warning(ws, "purge_due", int(w["due"]), f"{w['due']} documents due for purge in {ws}")
                warnings += _warning(
                    ws, "blocked_by_hold", int(w["held"]), f"{w['held']} due documents in {ws} kept by a legal hold"
                )
            queued = await retention.blob_queue_size(conn)
            warnings += _warning(
                "*", "blob_queue", queued, f"{queued} purged envelope lines not yet removed from the object store"
            )
        if kafka_ok:
            stage_rows = await asyncio.wait_for(stage_health(settings, pool, stages), 30)
    status, reasons = fold_status(infra, stage_rows, alerts, warnings)
    return {
        "status": status,
        "checked_at": datetime.now(UTC),
        "stages": stage_rows,
        "infrastructure": infra,
        "spend_alerts": alerts,
        "retention_warnings": warnings,
        "reasons": reasons,
    }
