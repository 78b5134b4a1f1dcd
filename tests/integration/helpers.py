"""Shared helpers for integration tests: envelopes, producing, waiting, querying the projection."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

import asyncpg

from schemas.envelope import ChangeEnvelope
from services.db.pool import quote_ident
from services.producer import EnvelopeProducer
from services.settings import Settings

T = TypeVar("T")


def principal(kind: str = "group") -> str:
    return f"{kind}:{uuid.uuid4()}"


def envelope(
    external_id: str,
    text: str = "hello world",
    *,
    principals: list[str] | None = None,
    op: str = "upsert",
    event_time: datetime | None = None,
    acl_event_time: datetime | None = None,
    title: str | None = None,
    kind: str = "message",
    author_email: str | None = "author@example.com",
    author_name: str | None = None,
    participants: list[dict[str, Any]] | None = None,
    system: str = "slack",
    workspace: str = "default",
    structured_fields: dict[str, Any] | None = None,
    identities: list[dict[str, Any]] | None = None,
    envelope_id: uuid.UUID | None = None,
) -> ChangeEnvelope:
    body: dict[str, Any] = {
        "envelope_id": str(envelope_id or uuid.uuid4()),
        "workspace": workspace,
        "op": op,
        "source": {"system": system, "external_id": external_id},
        "event_time": (event_time or datetime(2024, 5, 8, 13, 56, tzinfo=UTC)).isoformat(),
        "acl": {"principals": principals or []},
        "participants": participants or [],
        "structured_fields": structured_fields or {},
    }
    if acl_event_time:
        body["acl"]["acl_event_time"] = acl_event_time.isoformat()
    if op == "upsert":
        body["document"] = {"kind": kind, "title": title, "text": text}
    if author_email or identities:
        body["author"] = {"email": author_email, "display_name": author_name, "identities": identities or []}
    return ChangeEnvelope.model_validate(body)


def later(minutes: int) -> datetime:
    return datetime(2024, 5, 8, 13, 56, tzinfo=UTC) + timedelta(minutes=minutes)


_TOPICS_READY: set[str] = set()


async def ensure_test_topics(settings: Settings) -> None:
    if settings.topic_namespace not in _TOPICS_READY:
        from services.kafka.topics import ensure_topics

        await ensure_topics(settings)
        _TOPICS_READY.add(settings.topic_namespace)


async def produce(settings: Settings, *envs: ChangeEnvelope) -> None:
    await ensure_test_topics(settings)
    async with EnvelopeProducer(settings.kafka_bootstrap_servers, topic=settings.topic("envelopes")) as p:
        await p.send_many(envs)


async def produce_raw(settings: Settings, value: bytes, key: bytes | None = b"bad") -> None:
    await ensure_test_topics(settings)
    async with EnvelopeProducer(settings.kafka_bootstrap_servers, topic=settings.topic("envelopes")) as p:
        await p.send_raw(value, key)


async def eventually(
    check: Callable[[], Awaitable[T]],
    *,
    until: Callable[[T], bool] = bool,
    timeout: float = 30.0,
    interval: float = 0.2,
) -> T:
    """Await ``check()`` until ``until(value)`` holds; fail with the last value after ``timeout``."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        value = await check()
        last = value
        if until(value):
            return value
        await asyncio.sleep(interval)
    raise AssertionError(f"condition not met within {timeout}s; last value: {last!r}")


async def connect(settings: Settings) -> asyncpg.Connection:
    conn = await asyncpg.connect(
        settings.database_url, server_settings={"search_path": f"{quote_ident(settings.db_schema)}, public"}
    )
    return conn


async def fetch(settings: Settings, sql: str, *args: Any) -> list[asyncpg.Record]:
    conn = await connect(settings)
    try:
        return list(await conn.fetch(sql, *args))
    finally:
        await conn.close()


async def fetchval(settings: Settings, sql: str, *args: Any) -> Any:
    conn = await connect(settings)
    try:
        return await conn.fetchval(sql, *args)
    finally:
        await conn.close()


def settings_env(settings: Settings) -> dict[str, str]:
    """The process environment with ``settings`` in place of any inherited stack variables."""
    import os

    env = {k: v for k, v in os.environ.items() if not k.startswith(("S3_", "DB_", "TOPIC_", "GROUP_"))}
    # this checkout's code and its SDK (the server's contracts are the SDK's), as pytest's own pythonpath
    root = Path(__file__).resolve().parents[2]
    path = [str(root), str(root / "retriever" / "sdk"), *filter(None, [env.get("PYTHONPATH")])]
    return env | {"PYTHONPATH": os.pathsep.join(path)} | settings.to_env()
