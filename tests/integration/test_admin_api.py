"""Admin API on the real stack: the admin gate, health, spend and budgets, audits ("who saw document D,
and when" in one call), permission history across an ACL change."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from extractor.repository import record_spend
from services.governance import budgets
from services.settings import Settings
from tests.integration.admin_helpers import ADMIN, NOT_ADMIN, api_client
from tests.integration.helpers import (
    connect,
    envelope,
    eventually,
    fetchval,
    later,
    principal,
    produce,
    produce_raw,
)

pytestmark = pytest.mark.timeout(120)

ROUTES = [
    ("GET", "/v1/admin/health", None),
    ("GET", "/v1/admin/spend", None),
    ("PUT", "/v1/admin/budgets/default", {"daily_tokens": 10}),
    ("GET", "/v1/admin/retention/policies", None),
    ("PUT", "/v1/admin/retention/policies", {"workspace": "default", "max_age_days": 1}),
    ("POST", "/v1/admin/retention/run", None),
    ("POST", "/v1/admin/legal-holds", {"workspace": "default", "reason": "x"}),
    ("GET", "/v1/admin/legal-holds", None),
    ("GET", "/v1/admin/audits/retrievals", None),
    ("GET", "/v1/admin/audits/ingress", None),
    ("GET", "/v1/admin/audits/retention", None),
    ("GET", f"/v1/admin/legal-holds/{uuid.uuid4()}/documents", None),
    ("POST", f"/v1/admin/legal-holds/{uuid.uuid4()}/release", None),
    ("DELETE", "/v1/admin/retention/policies?workspace=default", None),
    ("GET", f"/v1/admin/access?document={uuid.uuid4()}", None),
]


async def test_every_admin_route_needs_the_key_and_the_admin_role(settings: Settings, pipeline: Any) -> None:
    rt = await pipeline()
    async with api_client(rt) as client:
        for method, path, body in ROUTES:
            none = await client.request(method, path, json=body)
            assert none.status_code == 401, (path, none.text)
            wrong = await client.request(method, path, json=body, headers=ADMIN | {"X-Api-Key": "nope"})
            assert wrong.status_code == 401, (path, wrong.text)
            plain = await client.request(method, path, json=body, headers=NOT_ADMIN)
            assert plain.status_code == 403, (path, plain.text)
        # nothing was changed by the refused calls
        assert (await client.get("/v1/admin/retention/policies", headers=ADMIN)).json() == []
        assert (await client.get("/v1/admin/legal-holds", headers=ADMIN)).json() == []
        # bad input names its field
        bad = await client.put("/v1/admin/budgets/default", json={"daily_tokens": -1}, headers=ADMIN)
        assert bad.status_code == 422 and "daily_tokens" in bad.text
        naive = await client.get("/v1/admin/audits/retrievals", params={"since": "2024-01-01T00:00:00"}, headers=ADMIN)
        assert naive.status_code == 422 and naive.json()["detail"]["field"] == "since"
        both = await client.get("/v1/admin/access", headers=ADMIN)
        assert both.status_code == 422 and both.json()["detail"]["field"] == "document"
        hold = await client.post(
            "/v1/admin/legal-holds",
            json={
                "workspace": "default",
                "reason": "r",
                "from_time": "2024-02-01T00:00:00Z",
                "to_time": "2024-01-01T00:00:00Z",
            },
            headers=ADMIN,
        )
        assert hold.status_code == 422 and "to_time" in hold.text
        # /metrics: the API key or the metrics token, nothing else
        assert (await client.get("/metrics")).status_code == 401
        assert (await client.get("/metrics", headers={"Authorization": "Bearer wrong"})).status_code == 401
        assert (await client.get("/metrics", headers={"X-Api-Key": "test-key"})).status_code == 200


def _sample(text: str, name: str) -> float:
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


async def test_metrics_token_opens_metrics_only(settings_factory: Any, pipeline: Any) -> None:
    s = await settings_factory(metrics_token="scrape-me")
    rt = await pipeline("ingest", settings_override=s)
    token = {"Authorization": "Bearer scrape-me"}
    processed = 'orgmem_stage_records_processed_total{stage="ingest"}'
    batches = 'orgmem_stage_batch_seconds_count{stage="ingest"}'
    async with api_client(rt) as client:
        before = (await client.get("/metrics", headers=token)).text
        await produce(s, envelope("m-1", "metric me", principals=[principal()]))

        async def scrape() -> str:
            r = await client.get("/metrics", headers=token)
            assert r.status_code == 200, r.text
            return r.text

        # the counter moves when the handler returns (after its commit and its downstream publishes)
        text = await eventually(scrape, until=lambda t: _sample(t, processed) > _sample(before, processed))
        assert _sample(text, processed) - _sample(before, processed) == 1.0
        assert _sample(text, batches) > _sample(before, batches)
        assert 'orgmem_consumer_lag_records{stage="ingest"}' in text
        assert "process_resident_memory_bytes" in text
        assert (await client.get("/v1/admin/health", headers=token)).status_code == 401


async def test_health_reports_stages_infrastructure_and_spend_alerts(settings: Settings, pipeline: Any) -> None:
    rt = await pipeline("ingest", "embed")
    g = principal()
    await produce(settings, *(envelope(f"h-{i}", f"health text {i}", principals=[g]) for i in range(5)))
    await eventually(
        lambda: fetchval(settings, "SELECT count(*) FROM chunks WHERE embedding IS NOT NULL AND NOT is_parent"),
        until=lambda n: n == 5,
    )
    async with api_client(rt) as client:
        r = await client.put("/v1/admin/budgets/default", json={"daily_tokens": 1000}, headers=ADMIN)
        assert r.status_code == 200 and r.json() == {"workspace": "default", "model": "*", "daily_tokens": 1000}
        body = (await client.get("/v1/admin/health", headers=ADMIN)).json()
        assert body["status"] == "ok", body["reasons"]
        assert {c["name"]: c["ok"] for c in body["infrastructure"]} == {
            "postgres": True,
            "object_store": True,
            "kafka": True,
        }
        stages = {s["stage"]: s for s in body["stages"]}
        assert stages["ingest"]["lag"] == 0 and stages["embed"]["lag"] == 0
        assert stages["ingest"]["records_per_s"] == pytest.approx(5 / 60, abs=1e-3)
        assert stages["ingest"]["dead_letters_waiting"] == 0 and stages["ingest"]["oldest_unprocessed_age_s"] is None
        # extract is not running here: its input waits, and the report says how much and how old
        assert stages["extract"]["lag"] == 5 and stages["extract"]["error"] is None
        assert 0 <= stages["extract"]["oldest_unprocessed_age_s"] < 120
        assert stages["extract"]["records_per_s"] == 0
        assert body["spend_alerts"] == []

        conn = await connect(settings)
        try:
            # 850 optional-LLM tokens today (the extractor's own spend writer): 85 % of the budget
            today = datetime.now(UTC).date()
            await record_spend(conn, [(today, "default", "openai", "gpt-x", "extract", 3, 3, 850)])
        finally:
            await conn.close()
        alert = (await client.get("/v1/admin/health", headers=ADMIN)).json()
        assert alert["status"] == "ok"  # a warning, not yet degraded
        [a] = alert["spend_alerts"]
        assert a["level"] == "warning" and a["tokens_today"] == 850 and a["ratio"] == 0.85

        conn = await connect(settings)
        try:
            refused = await budgets.admit(conn, workspace="default", model="gpt-x", purpose="extract", estimate=500)
            assert not refused.allowed and refused.reason == "budget_would_exceed"
            await record_spend(conn, [(today, "default", "openai", "gpt-x", "extract", 1, 1, 200)])
            stopped = await budgets.admit(conn, workspace="default", model="gpt-x", purpose="extract", estimate=1)
            assert not stopped.allowed and stopped.reason == "budget_exhausted"
            other = await budgets.admit(conn, workspace="other", model="gpt-x", purpose="extract", estimate=10**9)
            assert other.allowed  # no budget there
        finally:
            await conn.close()
        exhausted = (await client.get("/v1/admin/health", headers=ADMIN)).json()
        assert exhausted["status"] == "degraded" and exhausted["spend_alerts"][0]["level"] == "exhausted"
        assert any("budget exhausted" in r for r in exhausted["reasons"])

        spend = (await client.get("/v1/admin/spend", params={"workspace": "default"}, headers=ADMIN)).json()
        extract_rows = [r for r in spend["rows"] if r["purpose"] == "extract"]
        assert extract_rows == [
            {
                "day": today.isoformat(),
                "workspace": "default",
                "provider": "openai",
                "model": "gpt-x",
                "purpose": "extract",
                "calls": 4,
                "items": 4,
                "tokens": 1050,
            }
        ]
        assert any(r["purpose"] == "embed" and r["items"] == 5 for r in spend["rows"])  # embeddings are counted too
        assert spend["budgets"] == [{"workspace": "default", "model": "*", "daily_tokens": 1000}]
        assert {(r["reason"], r["count"]) for r in spend["refusals"]} == {
            ("budget_would_exceed", 1),
            ("budget_exhausted", 1),
        }

        await produce_raw(settings, b"{not an envelope")
        dead = await eventually(
            lambda: _health_stage(client, "ingest"), until=lambda s: s["dead_letters_waiting"] == 1, timeout=30
        )
        assert dead["lag"] == 0
        report = (await client.get("/v1/admin/health", headers=ADMIN)).json()
        assert report["status"] == "degraded" and "stage ingest: 1 dead letters waiting" in report["reasons"]


async def _health_stage(client: Any, stage: str) -> dict[str, Any]:
    body = (await client.get("/v1/admin/health", headers=ADMIN)).json()
    return next(s for s in body["stages"] if s["stage"] == stage)


async def test_audits_answer_who_saw_a_document_and_who_sent_it(settings: Settings, pipeline: Any) -> None:
    rt = await pipeline("ingest", "embed", "retrieve")
    g = principal()
    alice, bob = f"user:{uuid.uuid4()}", f"user:{uuid.uuid4()}"
    async with api_client(rt) as client:
        for ext, text in (("aud-1", "the heliotrope contract renewal"), ("aud-2", "lunch menu for friday")):
            body = envelope(ext, text, principals=[g]).model_dump(mode="json")
            r = await client.post(
                "/ingress/envelope", json=body, headers={"X-Api-Key": "test-key", "X-Principal-Id": alice}
            )
            assert r.status_code == 202, r.text
        await eventually(
            lambda: fetchval(settings, "SELECT count(*) FROM chunks WHERE embedding IS NOT NULL AND NOT is_parent"),
            until=lambda n: n == 2,
        )
        ingress = (await client.get("/v1/admin/audits/ingress", params={"external_id": "aud-1"}, headers=ADMIN)).json()
        [row] = ingress["items"]
        assert row["caller"] == f"service:{alice}" and row["op"] == "upsert" and row["source_system"] == "slack"
        assert row["topic"] == settings.topic("envelopes")

        for viewer in (alice, bob, alice):
            resp = await client.post(
                "/tools/retrieve_context",
                json={"query": "heliotrope contract"},
                headers={"X-Api-Key": "test-key", "X-Principal-Id": viewer, "X-Principal-Groups": g},
            )
            assert resp.status_code == 200, resp.text
            hit = resp.json()["passages"][0]
            assert hit["external_id"] == "aud-1"
        doc = hit["document_id"]
        other = await client.post(
            "/tools/retrieve_context",
            json={"query": "lunch menu", "arms": "lexical"},
            headers={"X-Api-Key": "test-key", "X-Principal-Id": bob, "X-Principal-Groups": g},
        )
        assert [p["external_id"] for p in other.json()["passages"]] == ["aud-2"]

        seen = await client.get("/v1/admin/audits/retrievals", params={"document": doc}, headers=ADMIN)
        assert seen.status_code == 200, seen.text
        items = seen.json()["items"]
        assert [i["viewer"] for i in items] == [alice, bob, alice]  # newest first; bob's lunch query is not there
        assert all(doc in i["returned_documents"] and i["tool"] == "retrieve_context" for i in items)
        # pagination: two pages of one and two
        first = (
            await client.get("/v1/admin/audits/retrievals", params={"document": doc, "limit": 1}, headers=ADMIN)
        ).json()
        assert len(first["items"]) == 1 and first["next_cursor"]
        rest = (
            await client.get(
                "/v1/admin/audits/retrievals",
                params={"document": doc, "limit": 2, "cursor": first["next_cursor"]},
                headers=ADMIN,
            )
        ).json()
        assert [i["id"] for i in first["items"] + rest["items"]] == [i["id"] for i in items]
        # viewer and time filters
        bobs = (await client.get("/v1/admin/audits/retrievals", params={"viewer": bob}, headers=ADMIN)).json()
        assert len(bobs["items"]) == 2
        future = (datetime.now(UTC) + timedelta(hours=1)).isoformat()
        none = (await client.get("/v1/admin/audits/retrievals", params={"since": future}, headers=ADMIN)).json()
        assert none == {"items": [], "next_cursor": None}


async def test_permission_history_follows_an_acl_change(settings: Settings, pipeline: Any) -> None:
    rt = await pipeline("ingest")
    team_a, team_b = principal(), principal()
    viewer = f"user:{uuid.uuid4()}"
    t0, t1, t2 = later(0), later(60), later(120)
    await produce(settings, envelope("acl-1", "the marmalade roadmap", principals=[team_a], event_time=t0))
    await eventually(lambda: fetchval(settings, "SELECT count(*) FROM documents"))
    await produce(
        settings,
        envelope("acl-1", "the marmalade roadmap", principals=[team_b], event_time=t0, acl_event_time=t1),
    )
    await eventually(lambda: fetchval(settings, "SELECT principals FROM documents"), until=lambda p: p == [team_b])
    await produce(settings, envelope("acl-1", op="delete", principals=[team_b], event_time=t2))
    await eventually(lambda: fetchval(settings, "SELECT deleted_at FROM documents"))
    doc_id = str(await fetchval(settings, "SELECT id FROM documents"))
    async with api_client(rt) as client:

        async def doc_at(at: datetime) -> dict[str, Any]:
            r = await client.get(
                "/v1/admin/access", params={"document": doc_id, "as_of": at.isoformat()}, headers=ADMIN
            )
            assert r.status_code == 200, r.text
            return r.json()  # type: ignore[no-any-return]

        before = await doc_at(t0 - timedelta(minutes=1))
        assert before["exists"] is False and before["principals"] == []
        first = await doc_at(t0 + timedelta(minutes=30))
        assert first["exists"] and not first["deleted"] and first["principals"] == [team_a]
        second = await doc_at(t1 + timedelta(minutes=1))
        assert second["principals"] == [team_b]
        gone = await doc_at(t2 + timedelta(minutes=1))
        assert gone["deleted"] and gone["principals"] == []
        assert [(h["principals"], h["deleted"]) for h in gone["history"]] == [
            ([team_a], False),
            ([team_b], False),
            ([], True),
        ]
        assert gone["history"][0]["valid_to"] == gone["history"][1]["valid_from"]

        async def viewer_at(at: datetime, groups: str, query: str | None = "marmalade") -> list[str]:
            params = {"viewer": viewer, "groups": groups, "as_of": at.isoformat()}
            if query:
                params["query"] = query
            r = await client.get("/v1/admin/access", params=params, headers=ADMIN)
            assert r.status_code == 200, r.text
            return [d["external_id"] for d in r.json()["documents"]]

        mid = t0 + timedelta(minutes=30)
        assert await viewer_at(mid, team_a) == ["acl-1"]
        assert await viewer_at(mid, team_b) == []
        assert await viewer_at(t1 + timedelta(minutes=1), team_a) == []
        assert await viewer_at(t1 + timedelta(minutes=1), team_b) == ["acl-1"]
        assert await viewer_at(t1 + timedelta(minutes=1), team_b, "unrelated words") == []
        assert await viewer_at(t2 + timedelta(minutes=1), team_b) == []
        bad = await client.get("/v1/admin/access", params={"viewer": "bob"}, headers=ADMIN)
        assert bad.status_code == 422 and bad.json()["detail"]["field"] == "viewer"


def _membership(group: str, *, added: list[str] | None = None, removed: list[str] | None = None, at: datetime) -> Any:
    from schemas.envelope import ChangeEnvelope

    return ChangeEnvelope.model_validate(
        {
            "envelope_id": str(uuid.uuid4()),
            "op": "membership",
            "source": {"system": "directory", "external_id": group},
            "event_time": at.isoformat(),
            "membership": {"group": group, "added": added or [], "removed": removed or []},
        }
    )


async def test_permission_history_follows_a_membership_change(settings: Settings, pipeline: Any) -> None:
    """What a viewer could have retrieved at T uses their groups at T from the org directory."""
    rt = await pipeline("ingest")
    team = principal()
    dave = f"user:{uuid.uuid4()}"
    t0 = later(0)
    joined, left = t0 + timedelta(hours=1), t0 + timedelta(hours=3)
    await produce(settings, envelope("mem-1", "the quokka budget", principals=[team], event_time=t0))
    await produce(settings, _membership(team, added=[dave], at=joined))
    await produce(settings, _membership(team, removed=[dave], at=left))
    await eventually(lambda: fetchval(settings, "SELECT count(*) FROM documents"))
    await eventually(
        lambda: fetchval(settings, "SELECT count(*) FROM group_memberships WHERE valid_to IS NOT NULL"),
        until=lambda n: n == 1,
    )
    async with api_client(rt) as client:

        async def at(when: datetime) -> dict[str, Any]:
            r = await client.get(
                "/v1/admin/access",
                params={"viewer": dave, "as_of": when.isoformat(), "query": "quokka"},
                headers=ADMIN,
            )
            assert r.status_code == 200, r.text
            return r.json()  # type: ignore[no-any-return]

        before = await at(joined - timedelta(minutes=1))
        assert before["documents"] == [] and team not in before["principals"]
        assert before["membership_source"] == "directory"
        during = await at(joined + timedelta(minutes=1))
        assert [d["external_id"] for d in during["documents"]] == ["mem-1"] and team in during["principals"]
        assert during["documents"][0]["matched_principals"] == [team]
        after = await at(left + timedelta(minutes=1))
        assert after["documents"] == [] and team not in after["principals"]
