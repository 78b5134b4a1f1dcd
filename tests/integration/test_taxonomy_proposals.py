"""Taxonomy write-back on the real stack: extracted knowledge that differs from the host's structured
ground truth becomes a field-value proposal; the signed webhook is verified by a real local HTTP receiver
(and a wrong secret fails verification); applied / rejected are idempotent; promotions."""

from __future__ import annotations

import hashlib
import hmac
import json
import threading
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest

from services.api.app import create_app
from services.settings import Settings
from services.taxonomy.proposals import Webhook
from tests.integration.helpers import envelope, eventually, fetch, fetchval, later, principal, produce

PORT = 8070  # this branch's port
SECRET = "hook-secret"


def admin(*groups: str) -> dict[str, str]:
    """The host's decision: the admin role plus principals that see the proposal's evidence."""
    return {"X-Api-Key": "test-key", "X-Principal-Roles": "admin", "X-Principal-Groups": ",".join(groups)}


class Receiver:
    """A real HTTP endpoint that verifies X-Org-Memory-Signature with ITS copy of the secret."""

    def __init__(self) -> None:
        self.received: list[dict[str, Any]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # http.server API
                body = self.rfile.read(int(self.headers.get("content-length", "0")))
                expected = "sha256=" + hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
                ok = hmac.compare_digest(self.headers.get("X-Org-Memory-Signature", ""), expected)
                outer.received.append({"ok": ok, "body": json.loads(body)})
                self.send_response(200 if ok else 401)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", PORT), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{PORT}/hook"


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    r.thread.start()
    yield r
    r.server.shutdown()
    r.server.server_close()


def hdr(*groups: str) -> dict[str, str]:
    return {"X-Api-Key": "test-key", "X-Principal-Groups": ",".join(groups)}


async def test_extracted_title_becomes_a_signed_proposal(
    settings_factory: Any, pipeline: Any, receiver: Receiver
) -> None:
    s: Settings = await settings_factory(
        taxonomy_proposal_webhook_url=receiver.url, taxonomy_proposal_webhook_secret=SECRET
    )
    rt = await pipeline("ingest", "extract", "conflicts", settings_override=s)
    g, other = principal(), principal()
    pu = uuid.uuid4()
    priya: dict[str, Any] = {"author_email": "priya@corp.example", "author_name": "Priya Shah"}
    await produce(
        s,
        envelope(
            "HR/1",
            "directory record",
            principals=[g],
            structured_fields={"title": "Senior Engineer"},
            identities=[{"namespace": "platform_user", "value": str(pu), "verified": True}],
            **priya,
        ),
    )
    await eventually(lambda: fetchval(s, "SELECT count(*) FROM facts WHERE source = 'structured'"))
    assert await fetchval(s, "SELECT count(*) FROM taxonomy_proposals") == 0  # knowledge = ground truth
    await produce(s, envelope("C/1", "Priya Shah is the VP of Engineering.", principals=[g], event_time=later(10)))
    await eventually(lambda: fetchval(s, "SELECT count(*) FROM taxonomy_proposals"))
    await eventually(lambda: fetchval(s, "SELECT count(*) FROM taxonomy_proposals WHERE delivered_at IS NOT NULL"))
    [hook] = receiver.received
    assert hook["ok"] is True
    p = hook["body"]["proposal"]
    assert (p["slot"], p["current_host_value"], p["proposed_value"]) == (
        "title",
        "Senior Engineer",
        "VP of Engineering",
    )
    assert p["host_entity_id"] == str(pu) and p["origin"] == "extracted" and p["evidence"]
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=create_app(rt)), base_url="http://t") as c:
        r = await c.get("/v1/taxonomy-proposals", params={"slot": "title", "status": "open"}, headers=hdr(g))
        assert r.status_code == 200, r.text
        [prop] = r.json()["proposals"]
        assert prop["id"] == p["proposal_id"] and prop["subject_name"] == "Priya Shah"
        # derived from facts: a viewer who cannot see the evidence sees nothing; 404 on its id
        assert (await c.get("/v1/taxonomy-proposals", headers=hdr(other))).json()["proposals"] == []
        assert (await c.get("/v1/taxonomy-proposals", params={"status": "bogus"}, headers=hdr(g))).status_code == 422
        pid = prop["id"]
        # deciding is the host's (admin) call
        assert (await c.post(f"/v1/taxonomy-proposals/{pid}/applied", headers=hdr(g))).status_code == 403
        assert (await c.post(f"/v1/taxonomy-proposals/{uuid.uuid4()}/applied", headers=admin(g))).status_code == 404
        # the admin role alone is not a principal: it neither lists nor decides what it cannot see
        assert (await c.get("/v1/taxonomy-proposals", headers=admin())).json()["proposals"] == []
        assert (await c.post(f"/v1/taxonomy-proposals/{pid}/applied", headers=admin(other))).status_code == 404
        first = await c.post(f"/v1/taxonomy-proposals/{pid}/applied", headers=admin(g))
        assert first.status_code == 200 and first.json()["status"] == "applied"
        again = await c.post(f"/v1/taxonomy-proposals/{pid}/applied", headers=admin(g))
        assert again.status_code == 200 and again.json()["decided_at"] == first.json()["decided_at"]
        assert (await c.post(f"/v1/taxonomy-proposals/{pid}/rejected", headers=admin(g))).status_code == 409
        # the applied value is ground truth now: the same knowledge re-extracted proposes nothing new
        await produce(s, envelope("C/2", "Priya Shah is the VP of Engineering.", principals=[g], event_time=later(20)))
        await eventually(lambda: fetchval(s, "SELECT count(*) >= 3 FROM processed_events WHERE stage = 'conflicts'"))
        rows = await fetch(s, "SELECT status FROM taxonomy_proposals")
        assert [r["status"] for r in rows] == ["applied"]


async def test_promotions_rejection_and_wrong_secret(settings: Settings, pipeline: Any, receiver: Receiver) -> None:
    rt = await pipeline("ingest", "extract", "conflicts")
    g = principal()
    pu = uuid.uuid4()
    await produce(
        settings,
        envelope(
            "HR/1",
            "Dana Lee runs infrastructure.",
            principals=[g],
            author_email="dana@corp.example",
            author_name="Dana Lee",
            structured_fields={"title": "Director"},
            identities=[{"namespace": "platform_user", "value": str(pu), "verified": True}],
        ),
    )
    await eventually(lambda: fetchval(settings, "SELECT count(*) FROM facts WHERE predicate = 'has_title'"))
    dana = await fetchval(settings, "SELECT person_id FROM person_aliases WHERE namespace = 'email'")
    doc = await fetchval(settings, "SELECT id FROM documents")
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=create_app(rt)), base_url="http://t") as c:
        body = {"subject": {"id": str(dana)}, "slot": "title", "value": "VP Infrastructure", "evidence": [str(doc)]}
        r = await c.post("/v1/promotions", json=body, headers=hdr(g))
        assert r.status_code == 201, r.text
        prop = r.json()
        assert prop["host_entity_id"] == str(pu) and prop["current_host_value"] == "Director"
        assert prop["origin"] == "promoted" and prop["status"] == "open"
        # bad input names the field; invisible evidence is a 404
        bad = await c.post("/v1/promotions", json=body | {"slot": "login"}, headers=hdr(g))
        assert bad.status_code == 422 and bad.json()["detail"]["field"] == "slot"
        same = await c.post("/v1/promotions", json=body | {"value": "director"}, headers=hdr(g))
        assert same.status_code == 422 and same.json()["detail"]["field"] == "value"
        assert (await c.post("/v1/promotions", json=body, headers=hdr(principal()))).status_code == 404
        # a wrong secret fails the receiver's verification: bounded attempts, every one logged, not delivered
        wrong = Webhook(receiver.url, secret="not-the-secret", attempts=2, backoff_s=0.01)
        assert await wrong.deliver_pending(rt.pool) == 0
        log = await fetch(settings, "SELECT attempt, ok, status_code FROM taxonomy_proposal_deliveries ORDER BY id")
        assert [(r["attempt"], r["ok"], r["status_code"]) for r in log] == [(1, False, 401), (2, False, 401)]
        assert [x["ok"] for x in receiver.received] == [False, False]
        assert await wrong.deliver_pending(rt.pool) == 0  # the attempt budget is spent: no third try
        assert len(receiver.received) == 2
        right = Webhook(receiver.url, secret=SECRET, attempts=3, backoff_s=0.01)
        assert await right.deliver_pending(rt.pool) == 1 and receiver.received[-1]["ok"] is True
        # rejected: idempotent, and the same value is not proposed again
        pid = prop["id"]
        assert (await c.post(f"/v1/taxonomy-proposals/{pid}/rejected", headers=admin(g))).json()["status"] == "rejected"
        assert (await c.post(f"/v1/taxonomy-proposals/{pid}/rejected", headers=admin(g))).status_code == 200
        again = await c.post("/v1/promotions", json=body, headers=hdr(g))
        assert again.status_code == 409 and again.json()["detail"]["field"] == "value"


async def test_conflict_rule_om_wins_until_the_host_rejects(settings: Settings, pipeline: Any) -> None:
    rt = await pipeline("ingest", "extract", "conflicts", "retrieve")
    g = principal()
    await produce(
        settings,
        envelope(
            "HR/1",
            "directory record",
            principals=[g],
            author_email="priya@corp.example",
            author_name="Priya Shah",
            structured_fields={"title": "Senior Engineer"},
        ),
    )
    await eventually(lambda: fetchval(settings, "SELECT count(*) FROM facts WHERE source = 'structured'"))
    await produce(
        settings, envelope("C/1", "Priya Shah is the VP of Engineering.", principals=[g], event_time=later(10))
    )
    await eventually(lambda: fetchval(settings, "SELECT count(*) FROM taxonomy_proposals"))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=create_app(rt)), base_url="http://t") as c:

        async def title() -> Any:
            body = {"name": "Priya Shah", "type": "person"}
            r = await c.post("/tools/worldbuilder_lookup", json=body, headers=hdr(g))
            assert r.status_code == 200, r.text
            return r.json()["profile"]["title"]

        assert (await title())["value"] == "VP of Engineering"  # inferred knowledge wins inside Org Memory
        [prop] = (await c.get("/v1/taxonomy-proposals", headers=hdr(g))).json()["proposals"]
        r = await c.post(f"/v1/taxonomy-proposals/{prop['id']}/rejected", headers=admin(g))
        assert r.status_code == 200 and r.json()["status"] == "rejected"
        host = await title()  # the host rejected it: its ground truth wins (and the cached profile is not reused)
        hr1 = await fetchval(settings, "SELECT id::text FROM documents WHERE external_id = 'HR/1'")
        assert host["value"] == "Senior Engineer" and host["evidence"] == [hr1]
