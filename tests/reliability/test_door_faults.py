"""Issue 20 §4 on the real stack: a reused envelope_id refused at the door before the first is ingested,
dependency outages answered 503 naming the dependency (fast), and the object store's health never a cached
ping. Outages are a TCP proxy cut in front of the shared service, or a dead port (the stack keeps running)."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx
import pytest

from services.api.app import create_app
from services.ops.dlq import read_dead_letters, read_stored_letters
from services.settings import Settings
from tests.integration.helpers import envelope, eventually, fetchval, principal
from tests.reliability.faults import TcpProxy

KEY = {"X-Api-Key": "test-key"}


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


# --- 2. Postgres down: every database route answers 503 "database", fast -----------------------------------

VIEWER = KEY | {"X-Principal-Id": f"user:{uuid.uuid4()}", "content-type": "application/json"}  # directory lookup
DB_ROUTES: list[tuple[str, str, Any]] = [
    ("POST", "/tools/retrieve_context", {"query": "who owns billing?"}),
    ("POST", "/tools/search_knowledge_base", {"query": "billing"}),
    ("POST", "/tools/query_facts", {"about": "Dana"}),
    ("POST", "/tools/query_paths", {"about": "Dana"}),
    ("GET", f"/v1/graph/persons/{uuid.uuid4()}", None),
    ("GET", f"/v1/graph/entities/{uuid.uuid4()}", None),
    ("GET", "/v1/taxonomy-proposals", None),
    ("GET", f"/v1/procedural-memories/{uuid.uuid4()}", None),
    ("GET", "/v1/admin/audits/ingress", None),
    ("GET", "/v1/admin/audits/retrievals", None),
    ("GET", "/v1/admin/spend", None),
    ("GET", "/v1/admin/legal-holds", None),
    ("GET", "/v1/admin/retention/policies", None),
    ("POST", "/ingress/envelope", "envelope"),
]


def _proxied_db(stack_env: dict[str, str], proxy: TcpProxy) -> str:
    url = urlsplit(stack_env["DATABASE_URL"])
    netloc = f"{url.username}@{proxy.address}" if url.username else proxy.address
    return urlunsplit((url.scheme, netloc, url.path, url.query, url.fragment))


@pytest.mark.timeout(180)
async def test_postgres_down_every_database_route_answers_503_database(
    stack_env: dict[str, str], settings_factory: Any, pipeline: Any
) -> None:
    url = urlsplit(stack_env["DATABASE_URL"])
    proxy = await TcpProxy(url.hostname or "127.0.0.1", url.port or 5432).start()
    try:
        s = await settings_factory(database_url=_proxied_db(stack_env, proxy))
        rt = await pipeline(settings_override=s)
        g = principal()
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=create_app(rt)), base_url="http://t") as c:

            async def call(method: str, path: str, body: Any) -> httpx.Response:
                if body == "envelope":
                    body = json.loads(envelope(f"PG/{uuid.uuid4().hex[:6]}", "x", principals=[g]).model_dump_json())
                headers = VIEWER | ({"X-Principal-Roles": "admin"} if "/admin/" in path else {})
                return await c.request(method, path, json=body, headers=headers)

            for method, path, body in DB_ROUTES:  # up: none of them is a 5xx
                r = await call(method, path, body)
                assert r.status_code < 500, (path, r.status_code, r.text[:200])
            await proxy.cut()
            slowest = 0.0
            for method, path, body in DB_ROUTES:
                for _ in range(2):  # the pooled (now reset) connection, then a fresh connect
                    start = time.monotonic()
                    r = await call(method, path, body)
                    slowest = max(slowest, time.monotonic() - start)
                    assert r.status_code == 503, (path, r.status_code, r.text[:300])
                    assert r.json()["detail"]["field"] == "database", (path, r.json())
            assert slowest < 5, slowest
            print(f"\nPostgres down: {len(DB_ROUTES)} routes x2 answered 503 database, slowest {slowest:.2f}s")
            await proxy.restore()
            r = await call("GET", "/v1/taxonomy-proposals", None)
            assert r.status_code == 200, r.text
    finally:
        await proxy.close()


# --- 2. broker down: ingress answers 503 fast ----------------------------------------------------------------


class SilentBroker:
    """A publisher whose broker accepted the connection and never answers (the send never completes)."""

    async def send(self, topic: str, value: bytes, *, key: bytes | None, headers: dict[str, str]) -> Any:
        await asyncio.Event().wait()


class RefusingBroker:
    async def send(self, topic: str, value: bytes, *, key: bytes | None, headers: dict[str, str]) -> Any:
        from aiokafka.errors import KafkaConnectionError

        raise KafkaConnectionError("Unable to bootstrap from [('127.0.0.1', 1)]")


@pytest.mark.parametrize("broker", [SilentBroker, RefusingBroker])
async def test_broker_down_ingress_answers_503_fast(settings_factory: Any, pipeline: Any, broker: type[Any]) -> None:
    s = await settings_factory(ingress_produce_timeout_s=2.0)
    rt = await pipeline(settings_override=s)
    real = rt.publisher
    rt.publisher = broker()
    g = principal()
    body = json.loads(envelope("B/1", "broker down", principals=[g]).model_dump_json())
    try:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=create_app(rt)), base_url="http://t") as c:
            start = time.monotonic()
            r = await c.post("/ingress/envelope", json=body, headers=KEY)
            took = time.monotonic() - start
            assert r.status_code == 503 and r.json()["detail"]["field"] == "broker", r.text
            assert took < 3.5, took
            r = await c.post("/ingress/envelopes", json=[body], headers=KEY)
            assert r.status_code == 503 and r.json()["detail"]["field"] == "broker", r.text
            rt.publisher = real  # back: the same content is accepted (the binding of a maybe-sent record is kept)
            r = await c.post("/ingress/envelope", json=body, headers=KEY)
            assert r.status_code == 202, r.text
    finally:
        rt.publisher = real
