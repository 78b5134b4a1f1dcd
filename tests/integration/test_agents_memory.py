"""Memory writes over HTTP (POST/DELETE /v1/memories), the write throttle, and the org directory
(envelope op ``membership``) on the real stack."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from schemas.envelope import ChangeEnvelope
from services.api.app import create_app
from services.settings import Settings
from tests.integration.helpers import connect, eventually, fetch, produce
from tests.integration.retriever_fixtures import ALICE, DAVE, T1, T2, hierarchy_file, load_corpus

H = {"X-Api-Key": "test-key"}


def viewer(principal: str, groups: tuple[str, ...] | None = None) -> dict[str, str]:
    h = H | {"X-Principal-Id": principal}
    if groups is not None:
        h["X-Principal-Groups"] = ",".join(groups)
    return h


ALICE_H = viewer(f"user:{ALICE}", (f"group:{T1}",))


@pytest.fixture
async def api(
    settings_factory: Any, pipeline: Any, tmp_path: Path
) -> AsyncIterator[tuple[Settings, httpx.AsyncClient]]:
    s: Settings = await settings_factory(
        org_hierarchy_path=hierarchy_file(tmp_path), memory_write_cap=3, memory_write_cooldown_s=0
    )
    rt = await pipeline("ingest", "embed", settings_override=s)
    await load_corpus(s)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=create_app(rt)), base_url="http://t") as client:
        yield s, client


async def _finds(client: httpx.AsyncClient, headers: dict[str, str], query: str, external_id: str) -> bool:
    r = await client.post("/tools/retrieve_context", json={"query": query, "limit": 20}, headers=headers)
    assert r.status_code == 200, r.text
    return any(p["external_id"] == external_id for p in r.json()["passages"])


async def test_memory_write_validation_scope_and_idempotency(api: tuple[Settings, httpx.AsyncClient]) -> None:
    settings, client = api
    body = {"text": "Alice prefers the blorptastic dashboard in dark mode.", "kind": "preference"}
    src = {"agent": "a1", "session_id": "s-idem", "event_id": "e1"}
    first = await client.post("/v1/memories", json=body | {"source": src}, headers=ALICE_H)
    assert first.status_code == 202, first.text
    again = await client.post("/v1/memories", json=body | {"source": src}, headers=ALICE_H)
    assert again.status_code == 202 and again.json()["memory_id"] == first.json()["memory_id"]
    mid = first.json()["memory_id"]
    assert first.json()["principals"] == [f"user:{ALICE}"]

    async def ingested() -> bool:
        return await _finds(client, ALICE_H, "blorptastic dashboard", mid)

    await eventually(ingested, timeout=60, interval=0.5)
    rows = await fetch(settings, "SELECT count(*) AS n FROM documents WHERE source_system = 'agent'")
    assert rows[0]["n"] == 1  # the retried write is one memory
    # private to alice: a teammate does not see a user-scope memory
    mate = viewer(f"user:{uuid.uuid4()}", (f"group:{T1}",))
    assert not await _finds(client, mate, "blorptastic dashboard", mid)

    # 422 naming the field, 403 naming the scope
    r = await client.post("/v1/memories", json={"text": "   "}, headers=ALICE_H)
    assert r.status_code == 422 and "text" in r.text
    r = await client.post("/v1/memories", json={"text": "x" * 20_001}, headers=ALICE_H)
    assert r.status_code == 422 and "text" in r.text
    r = await client.post("/v1/memories", json={"text": "x", "kind": "gossip"}, headers=ALICE_H)
    assert r.status_code == 422 and "kind" in r.text
    r = await client.post("/v1/memories", json={"text": "team 2 note", "scope": f"group:{T2}"}, headers=ALICE_H)
    assert r.status_code == 403 and r.json()["detail"]["field"] == "scope"
    assert f"group:{T2}" in r.json()["detail"]["errors"][0]["msg"]
    r = await client.post("/v1/memories", json={"text": "no user"}, headers=H)
    assert r.status_code == 403 and r.json()["detail"]["field"] == "X-Principal-Id"
    r = await client.post("/v1/memories", json={"text": "x"}, headers={"X-Api-Key": "nope"})
    assert r.status_code == 401

    # forget: not by someone else, yes by the author; then it is gone for everyone
    r = await client.delete(f"/v1/memories/{mid}", headers=mate)
    assert r.status_code == 403
    r = await client.delete(f"/v1/memories/{uuid.uuid4()}", headers=ALICE_H)
    assert r.status_code == 404
    r = await client.delete(f"/v1/memories/{mid}", headers=ALICE_H)
    assert r.status_code == 202 and r.json()["forgotten"] is True

    async def gone() -> bool:
        return not await _finds(client, ALICE_H, "blorptastic dashboard", mid)

    await eventually(gone, timeout=60, interval=0.5)


async def test_group_scope_memory_reaches_members_beneath(api: tuple[Settings, httpx.AsyncClient]) -> None:
    _, client = api
    from tests.integration.retriever_fixtures import DIV

    # alice holds team 1 and, through the hierarchy, its division: she may write at division scope
    r = await client.post(
        "/v1/memories",
        json={"text": "Division policy: every glorbnak release needs two reviewers.", "scope": f"group:{DIV}"},
        headers=ALICE_H,
    )
    assert r.status_code == 202, r.text
    mid = r.json()["memory_id"]
    team2 = viewer(f"user:{uuid.uuid4()}", (f"group:{T2}",))  # another team of the same division

    async def seen() -> bool:
        return await _finds(client, team2, "glorbnak release reviewers", mid)

    await eventually(seen, timeout=60, interval=0.5)
    outsider = viewer(f"user:{uuid.uuid4()}", (f"group:{uuid.uuid4()}",))
    assert not await _finds(client, outsider, "glorbnak release reviewers", mid)


async def test_throttle_cap_429_and_metrics(api: tuple[Settings, httpx.AsyncClient]) -> None:
    _, client = api
    for i in range(3):
        body = {"text": f"note {i}", "source": {"agent": "a", "session_id": "burst", "event_id": f"e{i}"}}
        r = await client.post("/v1/memories", json=body, headers=ALICE_H)
        assert r.status_code == 202, r.text
    over = {"text": "one too many", "source": {"agent": "a", "session_id": "burst", "event_id": "e9"}}
    r = await client.post("/v1/memories", json=over, headers=ALICE_H)
    assert r.status_code == 429 and int(r.headers["retry-after"]) >= 1
    # another session of the same principal has its own budget
    other = {"text": "fresh session", "source": {"agent": "a", "session_id": "other"}}
    assert (await client.post("/v1/memories", json=other, headers=ALICE_H)).status_code == 202
    metrics = (await client.get("/metrics", headers={"X-Api-Key": "test-key"})).text  # /metrics needs the key
    line = next(x for x in metrics.splitlines() if x.startswith('orgmem_memory_writes_total{outcome="throttled_cap"}'))
    assert float(line.split()[-1]) >= 1


def _membership(group: str, *, added: list[str] = (), removed: list[str] = (), at: datetime) -> ChangeEnvelope:  # type: ignore[assignment]
    return ChangeEnvelope.model_validate(
        {
            "envelope_id": str(uuid.uuid4()),
            "op": "membership",
            "source": {"system": "directory", "external_id": group},
            "event_time": at.isoformat(),
            "membership": {"group": group, "added": list(added), "removed": list(removed)},
        }
    )


async def test_membership_add_remove_changes_visibility(api: tuple[Settings, httpx.AsyncClient]) -> None:
    settings, client = api
    dave = viewer(f"user:{DAVE}")  # only X-Principal-Id: groups come from the directory
    team = f"group:{T1}"
    assert not await _finds(client, dave, "quintrel", "team-1")
    t0 = datetime.now(UTC) - timedelta(hours=2)
    await produce(settings, _membership(team, added=[f"user:{DAVE}"], at=t0))

    async def sees() -> bool:
        return await _finds(client, dave, "quintrel", "team-1")

    await eventually(sees, timeout=60, interval=0.5)
    # the gateway's explicit groups still win over the directory
    assert not await _finds(client, viewer(f"user:{DAVE}", ()), "quintrel", "team-1")
    r = await client.post("/v1/memories", json={"text": "dave's team note", "scope": team}, headers=dave)
    assert r.status_code == 202, r.text  # dave holds the team through the directory

    # an older, out-of-order remove is ignored (last writer wins by event time)
    await produce(settings, _membership(team, removed=[f"user:{DAVE}"], at=t0 - timedelta(hours=1)))
    t1 = t0 + timedelta(hours=1)
    await produce(settings, _membership(team, removed=[f"user:{DAVE}"], at=t1))

    async def not_anymore() -> bool:
        return not await _finds(client, dave, "quintrel", "team-1")

    await eventually(not_anymore, timeout=60, interval=0.5)
    conn = await connect(settings)
    try:
        during = await conn.fetch(
            "SELECT member FROM directory_members_at('default', $1, $2)", team, t0 + timedelta(minutes=30)
        )
        after = await conn.fetch("SELECT member FROM directory_members_at('default', $1, $2)", team, t1)
        stays = await conn.fetch("SELECT valid_from, valid_to FROM group_memberships WHERE group_id = $1", team)
    finally:
        await conn.close()
    assert [r["member"] for r in during] == [f"user:{DAVE}"]
    assert after == []
    assert [(r["valid_from"], r["valid_to"]) for r in stays] == [(t0, t1)]
    invalid = await client.post(
        "/ingress/envelope",
        json={
            "envelope_id": str(uuid.uuid4()),
            "op": "membership",
            "source": {"system": "directory", "external_id": "x"},
            "event_time": t1.isoformat(),
            "membership": {"group": f"user:{DAVE}", "added": [f"user:{ALICE}"]},
        },
        headers=H,
    )
    assert invalid.status_code == 422 and "membership.group" in invalid.json()["detail"]["field"]


async def test_static_members_from_the_hierarchy_file(settings_factory: Any, pipeline: Any, tmp_path: Path) -> None:
    path = hierarchy_file(tmp_path)
    config = json.loads(path.read_text())
    config["groups"][T1]["members"] = [f"user:{DAVE}"]
    path.write_text(json.dumps(config))
    s: Settings = await settings_factory(org_hierarchy_path=path)
    rt = await pipeline("ingest", "embed", settings_override=s)
    await load_corpus(s)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=create_app(rt)), base_url="http://t") as client:
        assert await _finds(client, viewer(f"user:{DAVE}"), "quintrel", "team-1")  # team 1 via members
        assert await _finds(client, viewer(f"user:{DAVE}"), "plumbrik", "division")  # and up the hierarchy
        assert not await _finds(client, viewer(f"user:{DAVE}"), "vexmorn", "team-2")
        assert not await _finds(client, viewer(f"user:{uuid.uuid4()}"), "quintrel", "team-1")
