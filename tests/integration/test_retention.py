"""Retention and legal hold on the real stack: a purge removes rows, vectors, evidence and the archived
blob; a held document survives the same run (tombstoned, invisible, recoverable); release lets it go."""

from __future__ import annotations

from typing import Any

import pytest

from services.errors import ObjectStoreError
from services.ops.replay import replay
from services.settings import Settings
from tests.integration.admin_helpers import ADMIN, ADMIN_ID, api_client
from tests.integration.helpers import envelope, eventually, fetch, fetchval, later, principal, produce

pytestmark = pytest.mark.timeout(120)


async def _ingested(settings: Settings, n: int) -> None:
    await eventually(
        lambda: fetchval(settings, "SELECT count(*) FROM chunks WHERE NOT is_parent AND embedding IS NOT NULL"),
        until=lambda c: c >= n,
        timeout=60,
    )


async def _search(client: Any, group: str, query: str) -> list[str]:
    resp = await client.post(
        "/tools/retrieve_context",
        json={"query": query, "max_tokens": 2000},
        headers={"X-Api-Key": "test-key", "X-Principal-Groups": group},
    )
    assert resp.status_code == 200, resp.text
    return [p["external_id"] for p in resp.json()["passages"]]


async def test_held_document_survives_a_purge_that_removes_its_unheld_neighbour(
    settings: Settings, pipeline: Any
) -> None:
    rt = await pipeline("ingest", "embed", "extract", "conflicts", "retrieve")
    g = principal()
    held = envelope("held-1", "Quarterly zebrafinch forecast for the board.", principals=[g])
    gone = envelope("gone-1", "Dana Reyes founded Acme Robotics. The zebrafinch launch slipped.", principals=[g])
    await produce(settings, held, gone)  # one ingest batch: both envelopes share one archived object
    await _ingested(settings, 2)
    lonely = envelope("lonely-1", "A zebrafinch note archived on its own.", principals=[g], event_time=later(5))
    await produce(settings, lonely)
    await _ingested(settings, 3)
    await eventually(
        lambda: fetchval(
            settings,
            "SELECT count(*) FROM fact_evidence e JOIN documents d ON d.id = e.document_id WHERE d.external_id = $1",
            "gone-1",
        ),
        timeout=60,
    )
    rows = {r["external_id"]: r for r in await fetch(settings, "SELECT id, external_id, blob_key FROM documents")}
    shared_object = rows["gone-1"]["blob_key"].partition("#")[0]
    assert rows["held-1"]["blob_key"].partition("#")[0] == shared_object
    lonely_object = rows["lonely-1"]["blob_key"].partition("#")[0]
    assert lonely_object != shared_object

    async with api_client(rt) as client:
        assert set(await _search(client, g, "zebrafinch")) == {"held-1", "gone-1", "lonely-1"}
        hold = await client.post(
            "/v1/admin/legal-holds",
            json={"workspace": "default", "document_ids": [str(rows["held-1"]["id"])], "reason": "litigation 42"},
            headers=ADMIN,
        )
        assert hold.status_code == 201, hold.text
        hold_id = hold.json()["id"]
        assert hold.json()["created_by"] == ADMIN_ID
        # the held document is deleted at the source: tombstoned, invisible, still held
        await produce(settings, envelope("held-1", op="delete", principals=[g], event_time=later(10)))
        await eventually(lambda: _search(client, g, "zebrafinch"), until=lambda ids: "held-1" not in ids)

        policy = await client.put(
            "/v1/admin/retention/policies",
            json={"workspace": "default", "source_system": "slack", "max_age_days": 30},
            headers=ADMIN,
        )
        assert policy.status_code == 200, policy.text
        dry = await client.post("/v1/admin/retention/run", headers=ADMIN)
        assert dry.status_code == 200, dry.text
        assert dry.json()["applied"] is False and dry.json()["due"] == 2 and dry.json()["held"] == 1
        assert sum(b["documents"] for b in dry.json()["batches"]) == 2
        assert set(await _search(client, g, "zebrafinch")) == {"gone-1", "lonely-1"}  # a dry run removes nothing
        health = (await client.get("/v1/admin/health", headers=ADMIN)).json()
        kinds = {w["kind"]: w["count"] for w in health["retention_warnings"]}
        assert kinds == {"purge_due": 2, "blocked_by_hold": 1}

        run = await client.post("/v1/admin/retention/run", params={"apply": "true"}, headers=ADMIN)
        assert run.status_code == 200, run.text
        report = run.json()
        assert report["applied"] is True and report["held"] == 1 and report["blobs_pending"] == 0
        purged = {d for b in report["batches"] for d in b["document_ids"]}
        assert purged == {str(rows["gone-1"]["id"]), str(rows["lonely-1"]["id"])}
        totals = {k: sum(b[k] for b in report["batches"]) for k in ("documents", "chunks", "versions", "blobs")}
        assert totals["documents"] == 2 and totals["versions"] == 2 and totals["blobs"] == 2
        assert totals["chunks"] >= 4  # parents and children, vectors with them
        assert sum(b["evidence_links"] for b in report["batches"]) >= 1
        assert sum(b["facts_retracted"] for b in report["batches"]) >= 1  # "Dana founded Acme" lost its evidence

        assert await _search(client, g, "zebrafinch") == []
        audit = await client.get(
            "/v1/admin/audits/retention", params={"document": str(rows["gone-1"]["id"])}, headers=ADMIN
        )
        assert audit.status_code == 200, audit.text
        [entry] = audit.json()["items"]
        assert entry["actor"] == ADMIN_ID and entry["run_id"] == report["run_id"] and entry["reason"] == "max_age"
        assert entry["policy"]["source_system"] == "slack" and entry["policy"]["max_age_days"] == 30
        assert entry["documents"] >= 1 and str(rows["gone-1"]["id"]) in entry["document_ids"]
        assert (
            await client.get("/v1/admin/access", params={"document": str(rows["gone-1"]["id"])}, headers=ADMIN)
        ).status_code == 404

        # the object store: the neighbour's line is gone from the shared object, the held line is intact;
        # the object that held only the purged document is deleted
        shared = (await rt.store.get(shared_object)).decode()
        assert str(held.envelope_id) in shared and str(gone.envelope_id) not in shared
        with pytest.raises(ObjectStoreError):
            await rt.store.get(lonely_object)

        # the hold's owner recovers the held (tombstoned) document with its archived envelope
        docs = await client.get(
            f"/v1/admin/legal-holds/{hold_id}/documents", params={"include_envelope": "true"}, headers=ADMIN
        )
        assert docs.status_code == 200, docs.text
        [doc] = docs.json()
        assert doc["external_id"] == "held-1" and doc["deleted_at"] is not None
        assert doc["envelope"] is not None and str(held.envelope_id) in doc["envelope"]

        # a second run finds nothing new; after the release the held document goes too
        again = (await client.post("/v1/admin/retention/run", params={"apply": "true"}, headers=ADMIN)).json()
        assert again["batches"] == [] and again["held"] == 1
        released = await client.post(f"/v1/admin/legal-holds/{hold_id}/release", headers=ADMIN)
        assert released.status_code == 200 and released.json()["released_at"] is not None
        listed = (await client.get("/v1/admin/legal-holds", headers=ADMIN)).json()
        assert hold_id not in [h["id"] for h in listed]
        listed_all = (
            await client.get("/v1/admin/legal-holds", params={"include_released": "true"}, headers=ADMIN)
        ).json()
        assert hold_id in [h["id"] for h in listed_all]
        last = (await client.post("/v1/admin/retention/run", params={"apply": "true"}, headers=ADMIN)).json()
        assert [d for b in last["batches"] for d in b["document_ids"]] == [str(rows["held-1"]["id"])]
        assert last["batches"][0]["reason"] == "max_age"
        with pytest.raises(ObjectStoreError):
            await rt.store.get(shared_object)  # its last line purged: the object is deleted


async def test_tombstoned_documents_purge_after_their_grace_period(settings: Settings, pipeline: Any) -> None:
    rt = await pipeline("ingest")
    g = principal()
    await produce(
        settings, envelope("t-1", "kept text", principals=[g]), envelope("t-2", "deleted text", principals=[g])
    )
    await eventually(lambda: fetchval(settings, "SELECT count(*) FROM documents"), until=lambda n: n == 2)
    await produce(settings, envelope("t-2", op="delete", principals=[g], event_time=later(1)))
    await eventually(
        lambda: fetchval(settings, "SELECT count(*) FROM documents WHERE deleted_at IS NOT NULL"),
        until=lambda n: n == 1,
    )
    async with api_client(rt) as client:
        bad = await client.put("/v1/admin/retention/policies", json={"workspace": "default"}, headers=ADMIN)
        assert bad.status_code == 422  # a policy must say what it keeps
        ok = await client.put(
            "/v1/admin/retention/policies",
            json={"workspace": "default", "purge_tombstoned_after_days": 0},
            headers=ADMIN,
        )
        assert ok.status_code == 200, ok.text
        assert (await client.get("/v1/admin/retention/policies", headers=ADMIN)).json() == [
            {
                "workspace": "default",
                "source_system": "*",
                "kind": "*",
                "max_age_days": None,
                "purge_tombstoned_after_days": 0,
            }
        ]
        report = (await client.post("/v1/admin/retention/run", params={"apply": "true"}, headers=ADMIN)).json()
        [batch] = report["batches"]
        assert batch["reason"] == "tombstoned" and batch["documents"] == 1
        ids = await fetch(settings, "SELECT external_id FROM documents")
        assert [r["external_id"] for r in ids] == ["t-1"]
        # replaying the (infinite) envelope log does not bring the purged document back ...
        result = await replay(settings, "ingest", start=None)
        assert result.records == 3 and result.dead_lettered == 0
        ids = await fetch(settings, "SELECT external_id FROM documents")
        assert [r["external_id"] for r in ids] == ["t-1"]
        # ... but the source re-creating the item later is new data, and is ingested
        await produce(settings, envelope("t-2", "created again", principals=[g], event_time=later(30)))
        await eventually(lambda: fetchval(settings, "SELECT count(*) FROM documents"), until=lambda n: n == 2)


async def test_cli_is_a_dry_run_unless_apply(
    settings: Settings, pipeline: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    import json

    from services.cli import _parser

    rt = await pipeline("ingest")
    await produce(settings, envelope("cli-1", "old text", principals=[principal()]))
    await eventually(lambda: fetchval(settings, "SELECT count(*) FROM documents"))
    async with api_client(rt) as client:
        r = await client.put(
            "/v1/admin/retention/policies", json={"workspace": "default", "max_age_days": 1}, headers=ADMIN
        )
        assert r.status_code == 200
    args = _parser().parse_args(["retention", "run"])
    assert await args.handler(settings, args) == 0
    out = capsys.readouterr().out
    report = json.loads(out[: out.rindex("}") + 1])
    assert report["applied"] is False and report["due"] == 1 and "rerun with --apply" in out
    assert await fetchval(settings, "SELECT count(*) FROM documents") == 1
    args = _parser().parse_args(["retention", "run", "--apply"])
    assert await args.handler(settings, args) == 0
    applied = json.loads(capsys.readouterr().out)
    assert applied["applied"] is True and applied["batches"][0]["documents"] == 1
    assert applied["batches"][0]["policy"]["max_age_days"] == 1
    assert await fetchval(settings, "SELECT count(*) FROM documents") == 0
