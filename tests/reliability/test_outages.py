"""Infrastructure outages are not poison (issue 12 §4): the object store or Postgres going away pauses the
stage (``/readyz`` says so), it resumes by itself, and every envelope is applied exactly once — no dead
letter, no operator action. The outage is a TCP proxy cut in front of the dependency (the shared stack keeps
running). The short variants run in ``make test``; the 20 s / 3,000-envelope ones are ``slow``."""

from __future__ import annotations

import asyncio
import time
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest

from services.ops.dlq import read_dead_letters, read_stored_letters
from services.settings import Settings
from tests.integration.helpers import envelope, eventually, fetchval, later, principal, produce
from tests.reliability.faults import TcpProxy


def _host_port(endpoint: str) -> tuple[str, int]:
    host, _, port = endpoint.rpartition(":")
    return host, int(port)


async def _proxied(stack_env: dict[str, str], settings_factory: Any, dependency: str) -> tuple[Settings, TcpProxy]:
    if dependency == "object_store":
        proxy = await TcpProxy(*_host_port(stack_env["S3_ENDPOINT"])).start()
        return await settings_factory(s3_endpoint=proxy.address, ingest_batch_size=200), proxy
    url = urlsplit(stack_env["DATABASE_URL"])
    proxy = await TcpProxy(url.hostname or "127.0.0.1", url.port or 5432).start()
    netloc = f"{url.username}@{proxy.address}" if url.username else proxy.address
    proxied = urlunsplit((url.scheme, netloc, url.path, url.query, url.fragment))
    return await settings_factory(database_url=proxied, ingest_batch_size=200), proxy


async def _outage_under_load(
    stack_env: dict[str, str], settings_factory: Any, pipeline: Any, dependency: str, *, n: int, outage_s: float
) -> dict[str, Any]:
    settings, proxy = await _proxied(stack_env, settings_factory, dependency)
    direct = settings.model_copy(update={"database_url": stack_env["DATABASE_URL"]})  # the test's own reads
    try:
        rt = await pipeline("ingest", settings_override=settings)
        watch = rt.watches["ingest"]
        g = principal()
        envs = [
            envelope(f"O/{i}", f"outage test document {i}", principals=[g], event_time=later(i % 600)) for i in range(n)
        ]

        async def load() -> None:  # ~10 s of traffic, the outage in the middle of it
            chunk = max(1, n // 50)
            for i in range(0, n, chunk):
                await produce(settings, *envs[i : i + chunk])
                await asyncio.sleep(0.2)

        producer = asyncio.create_task(load())
        await asyncio.sleep(2.0)
        await proxy.cut()
        cut_at = time.monotonic()
        seen_paused = False
        while time.monotonic() - cut_at < outage_s:
            seen_paused = seen_paused or watch.paused
            await asyncio.sleep(0.2)
        await proxy.restore()
        await producer
        await eventually(
            lambda: fetchval(direct, "SELECT count(*) FROM documents"), until=lambda c: c >= n, timeout=240
        )
        await asyncio.sleep(1.0)  # anything still in flight would show as a duplicate now
        figures = {
            "documents": await fetchval(direct, "SELECT count(*) FROM documents"),
            "versions": await fetchval(direct, "SELECT count(*) FROM document_versions"),
            "claimed": await fetchval(direct, "SELECT count(*) FROM processed_events WHERE stage = 'ingest'"),
            "dead_letters": len(await read_dead_letters(direct, "ingest"))
            + len(await read_stored_letters(direct, "ingest")),
            "seen_paused": seen_paused,
            "pauses": watch.pauses,
            "paused_s": round(watch.paused_seconds, 1),
            "paused_now": watch.paused,
        }
        print(f"\n{dependency} outage {outage_s}s under {n} envelopes: {figures}")
        return figures
    finally:
        await proxy.close()


def _assert_nothing_lost_or_duplicated(f: dict[str, Any], n: int) -> None:
    assert f["documents"] == n  # 0 lost
    assert f["versions"] == n and f["claimed"] == n  # 0 duplicated
    assert f["dead_letters"] == 0  # an outage is not poison
    assert f["seen_paused"] and f["pauses"] >= 1 and not f["paused_now"]  # paused, said so, resumed by itself


@pytest.mark.parametrize("dependency", ["object_store", "postgres"])
@pytest.mark.timeout(240)
async def test_short_outage_pauses_and_resumes_without_loss(
    stack_env: dict[str, str], settings_factory: Any, pipeline: Any, dependency: str
) -> None:
    f = await _outage_under_load(stack_env, settings_factory, pipeline, dependency, n=400, outage_s=5)
    _assert_nothing_lost_or_duplicated(f, 400)


@pytest.mark.slow
@pytest.mark.parametrize("dependency", ["object_store", "postgres"])
@pytest.mark.timeout(600)
async def test_20s_outage_under_3000_envelopes_0_lost_0_duplicated_no_operator_action(
    stack_env: dict[str, str], settings_factory: Any, pipeline: Any, dependency: str
) -> None:
    f = await _outage_under_load(stack_env, settings_factory, pipeline, dependency, n=3000, outage_s=20)
    _assert_nothing_lost_or_duplicated(f, 3000)
