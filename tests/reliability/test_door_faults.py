"""Issue 20 §4 on the real stack: a reused envelope_id refused at the door before the first is ingested,
dependency outages answered 503 naming the dependency (fast), and the object store's health never a cached
ping. Outages are a TCP proxy cut in front of the shared service, or a dead port (the stack keeps running)."""

from __future__ import annotations

import asyncio
import json
import socket
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from services.api.app import create_app
from services.ops.dlq import read_dead_letters, read_stored_letters
from services.settings import Settings
from tests.integration.helpers import envelope, eventually, fetchval, principal
from tests.reliability.faults import TcpProxy

KEY = {"X-Api-Key": "test-key"}


def dead_port() -> int:
    """A port nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
async def http(pipeline: Any) -> AsyncIterator[tuple[Any, httpx.AsyncClient]]:
    rt = await pipeline()
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=create_app(rt)), base_url="http://t") as c:
        yield rt, c


# --- 5. a reused envelope_id before the first is ingested ----------------------------------------------


async def test_a_reused_envelope_id_is_refused_before_the_first_is_ingested(
    settings: Settings, pipeline: Any, http: tuple[Any, httpx.AsyncClient]
) -> None:
    _, c = http  # no ingest stage yet: nothing is ingested while the door answers
    g = principal()
    body = json.loads(envelope("R/early", "original", principals=[g]).model_dump_json())
    first = await c.post("/ingress/envelope", json=body, headers=KEY)
    assert first.status_code == 202, first.text
    again = await c.post("/ingress/envelope", json=body, headers=KEY)
    assert again.status_code == 202, again.text  # the same content again: idempotent
    changed = body | {"document": body["document"] | {"text": "changed"}}
    clash = await c.post("/ingress/envelope", json=changed, headers=KEY)
    assert clash.status_code == 409, clash.text
    assert clash.json()["detail"]["field"] == "envelope_id"
    other = json.loads(envelope("R/other", "other", principals=[g]).model_dump_json())
    batch = await c.post("/ingress/envelopes", json=[other, changed], headers=KEY)
    assert batch.status_code == 409 and batch.json()["detail"]["index"] == 1, batch.text
    # two different contents under one new id in one batch: the second is refused too
    fresh = json.loads(envelope("R/twice", "one", principals=[g]).model_dump_json())
    twice = [fresh, fresh | {"document": fresh["document"] | {"text": "two"}}]
    r = await c.post("/ingress/envelopes", json=twice, headers=KEY)
    assert r.status_code == 409 and r.json()["detail"]["index"] == 1, r.text
    # the ingest stage then applies what was accepted (the first content), nothing dead-lettered
    await pipeline("ingest")
    await eventually(lambda: fetchval(settings, "SELECT count(*) FROM documents"), until=lambda n: n == 1)
    await asyncio.sleep(1.0)
    text = await fetchval(settings, "SELECT text FROM chunks LIMIT 1")
    assert "original" in text
    assert await fetchval(settings, "SELECT count(*) FROM documents") == 1
    assert not await read_dead_letters(settings, "ingest") and not await read_stored_letters(settings, "ingest")


async def test_concurrent_reuse_of_one_envelope_id_admits_one_content(http: tuple[Any, httpx.AsyncClient]) -> None:
    _, c = http
    g = principal()
    base = json.loads(envelope("R/race", "v", principals=[g]).model_dump_json())
    bodies = [base | {"document": base["document"] | {"text": f"version {i}"}} for i in range(8)]
    answers = await asyncio.gather(*(c.post("/ingress/envelope", json=b, headers=KEY) for b in bodies))
    codes = sorted(r.status_code for r in answers)
    assert codes == [202] + [409] * 7, codes


# --- 6. the object store's health is probed, never a cached ping ------------------------------------------


def _host_port(endpoint: str) -> tuple[str, int]:
    host, _, port = endpoint.rpartition(":")
    return host, int(port)


ADMIN = KEY | {"X-Principal-Id": f"user:{uuid.uuid4()}", "X-Principal-Roles": "admin"}


async def _store_ok(c: httpx.AsyncClient) -> tuple[bool, bool, float]:
    start = time.monotonic()
    ready = (await c.get("/readyz")).json()["checks"]["object_store"]["ok"]
    admin = await c.get("/v1/admin/health", headers=ADMIN)
    assert admin.status_code == 200, admin.text
    infra = {i["name"]: i["ok"] for i in admin.json()["infrastructure"]}
    return ready, infra["object_store"], time.monotonic() - start


@pytest.mark.timeout(120)
async def test_an_object_store_outage_shows_down_within_seconds(
    stack_env: dict[str, str], settings_factory: Any, pipeline: Any
) -> None:
    proxy = await TcpProxy(*_host_port(stack_env["S3_ENDPOINT"])).start()
    try:
        s = await settings_factory(s3_endpoint=proxy.address)
        rt = await pipeline(settings_override=s)
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=create_app(rt)), base_url="http://t") as c:
            assert (await _store_ok(c))[:2] == (True, True)
            await rt.store.put("probe/x", b"{}")  # the store has been used: no lazy first check left
            await proxy.cut()
            cut_at = time.monotonic()
            ready, admin, took = await _store_ok(c)
            assert (ready, admin) == (False, False), "a cached ping reported the store up during an outage"
            assert time.monotonic() - cut_at < 8 and took < 8, took
            print(f"\nobject store down seen in {time.monotonic() - cut_at:.2f}s (both probes)")
            r = await c.get("/readyz")
            assert r.status_code == 503 and "object_store" in r.json()["down"]
            await proxy.restore()
            ready, admin, _ = await _store_ok(c)
            assert (ready, admin) == (True, True)
    finally:
        await proxy.close()
