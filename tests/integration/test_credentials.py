"""Scoped API keys on the real stack (``services/credentials.py``, migration 0012).

HTTP (a real uvicorn server): each scope rule at each door, 401/403 in the common error shape, rotation
and revocation without a restart, the workspace taken from the key. Kafka RPC (the real broker): unsigned,
unknown, unscoped, revoked keys refused with an error reply; tampered, stale, replayed requests refused.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from orgmem_sdk.client import OrgMemoryClient
from orgmem_sdk.errors import ToolCallError
from retriever.rpc import sign_rpc
from retriever.rpc_auth import verify_rpc
from services import credentials
from services.api.app import create_app
from services.credentials import CredentialError, KeyStore
from services.db.pool import create_pool
from services.settings import Settings
from tests.integration.agents_helpers import mcp_session, serve_app
from tests.integration.helpers import envelope, eventually
from tests.integration.retriever_fixtures import ALICE as ALICE_ID
from tests.integration.retriever_fixtures import T1, hierarchy_file, load_corpus

ALICE_P = f"user:{ALICE_ID}"
ALICE_GROUPS = [f"group:{T1}"]


def membership(group: str, added: list[str]) -> dict[str, Any]:
    return {
        "envelope_id": str(uuid.uuid4()),
        "op": "membership",
        "source": {"system": "hr", "external_id": f"m-{uuid.uuid4().hex[:6]}"},
        "event_time": "2024-01-01T00:00:00Z",
        "membership": {"group": group, "added": added},
    }


def upsert(external_id: str, text: str, group: str, **extra: Any) -> dict[str, Any]:
    return envelope(external_id, text, principals=[group]).model_dump(mode="json", exclude={"workspace"}) | extra


async def make_keys(s: Settings) -> dict[str, str]:
    pool = await create_pool(s, min_size=1, max_size=1)
    try:
        async with pool.acquire() as conn:
            out = {}
            for name, scopes, ws in (
                ("ingest", ["ingest"], None),
                ("directory", ["ingest", "directory"], None),
                ("agent", ["agent"], None),
                ("admin", ["admin"], None),
                ("agent-ws1", ["agent"], "ws1"),
                ("ingest-ws1", ["ingest"], "ws1"),
            ):
                _, out[name] = await credentials.create_key(conn, name, scopes, ws)
            return out
    finally:
        await pool.close()


@pytest.fixture
async def keyed(
    settings_factory: Any, pipeline: Any, tmp_path: Path
) -> AsyncIterator[tuple[Settings, str, dict[str, str]]]:
    """An API with scoped keys only (no SERVICE_API_KEY), the write path running."""
    s: Settings = await settings_factory(org_hierarchy_path=hierarchy_file(tmp_path), service_api_key=None)
    rt = await pipeline("ingest", "embed", settings_override=s)
    keys = await make_keys(s)
    async with serve_app(create_app(rt)) as url:
        yield s, url, keys


def _err(r: httpx.Response) -> tuple[int, str, str]:
    d = r.json()["detail"]
    return r.status_code, d["field"], d["errors"][0]["type"]


async def audit_callers(s: Settings) -> list[str]:
    pool = await create_pool(s, min_size=1, max_size=1)
    try:
        return [r["caller"] for r in await pool.fetch("SELECT caller FROM ingress_audit ORDER BY id")]
    finally:
        await pool.close()


async def test_each_door_needs_its_scope(keyed: tuple[Settings, str, dict[str, str]]) -> None:
    s, url, keys = keyed
    tid = str(uuid.uuid4())
    async with httpx.AsyncClient(base_url=url, timeout=30) as http:

        def h(key: str, **more: str) -> dict[str, str]:
            return {"X-Api-Key": keys.get(key, key), "X-Principal-Id": ALICE_P} | more

        # no key, an unknown key, a well-formed unknown key: 401 naming X-Api-Key
        assert _err(await http.post("/tools/retrieve_context", json={"query": "x"}))[:2] == (401, "X-Api-Key")
        fake = "omk_0123456789ab." + "A" * 43
        for bad in ("nope", fake):
            r = await http.post("/tools/retrieve_context", json={"query": "x"}, headers={"X-Api-Key": bad})
            assert _err(r) == (401, "X-Api-Key", "unauthenticated")
        # ingress: ingest scope; a membership envelope needs directory too (403 naming op, nothing produced)
        doc = upsert(f"d-{tid}", "hello", f"group:{T1}")
        assert (await http.post("/ingress/envelope", json=doc, headers=h("ingest"))).status_code == 202
        callers = await audit_callers(s)
        assert callers == [f"key:{credentials.key_id_of(keys['ingest'])}:{ALICE_P}"]  # the audit names the key
        r = await http.post("/ingress/envelope", json=doc, headers=h("agent"))
        assert _err(r) == (403, "X-Api-Key", "missing_scope") and "ingest" in r.json()["detail"]["errors"][0]["msg"]
        r = await http.post("/ingress/envelope", json=membership(f"group:{T1}", [ALICE_P]), headers=h("ingest"))
        assert _err(r) == (403, "op", "missing_scope")
        batch = [upsert(f"e-{tid}", "x", f"group:{T1}"), membership(f"group:{T1}", [ALICE_P])]
        r = await http.post("/ingress/envelopes", json=batch, headers=h("ingest"))
        assert _err(r) == (403, "1.op", "missing_scope") and r.json()["detail"]["index"] == 1
        r = await http.post("/ingress/envelope", json=membership(f"group:{T1}", [ALICE_P]), headers=h("directory"))
        assert r.status_code == 202
        # tools, memory writes, graph reads: agent
        assert (await http.post("/tools/retrieve_context", json={"query": "x"}, headers=h("agent"))).status_code == 200
        for key in ("ingest", "admin"):
            r = await http.post("/tools/retrieve_context", json={"query": "x"}, headers=h(key))
            assert _err(r) == (403, "X-Api-Key", "missing_scope")
        mem = {"text": "a note", "scope": "user"}
        assert (await http.post("/v1/memories", json=mem, headers=h("ingest"))).status_code == 403
        assert (await http.post("/v1/memories", json=mem, headers=h("agent"))).status_code == 202
        # operator routes: admin scope (and the role); an agent key cannot claim the admin role
        r = await http.get("/v1/admin/health", headers=h("agent", **{"X-Principal-Roles": "admin"}))
        assert _err(r)[:2] == (403, "X-Api-Key")
        r = await http.post(
            "/tools/retrieve_context", json={"query": "x"}, headers=h("agent", **{"X-Principal-Roles": "admin"})
        )
        assert _err(r) == (403, "X-Principal-Roles", "missing_scope")
        assert (
            await http.get("/v1/admin/health", headers=h("admin", **{"X-Principal-Roles": "admin"}))
        ).status_code == 200
        assert (await http.get("/v1/admin/health", headers=h("admin"))).status_code == 403  # the role still needed
        # /metrics: an admin key (or METRICS_TOKEN)
        assert (await http.get("/metrics", headers={"X-Api-Key": keys["agent"]})).status_code == 401
        assert (await http.get("/metrics", headers={"X-Api-Key": keys["admin"]})).status_code == 200
        # MCP over HTTP: agent
        r = await http.post("/mcp", json={}, headers=h("ingest"))
        assert _err(r) == (403, "X-Api-Key", "missing_scope")


async def test_revocation_and_rotation_without_restart(keyed: tuple[Settings, str, dict[str, str]]) -> None:
    s, url, keys = keyed
    pool = await create_pool(s, min_size=1, max_size=1)
    try:
        async with httpx.AsyncClient(base_url=url, timeout=30) as http:

            async def status(key: str) -> int:
                r = await http.post(
                    "/tools/retrieve_context",
                    json={"query": "x"},
                    headers={"X-Api-Key": key, "X-Principal-Id": ALICE_P},
                )
                return r.status_code

            old = keys["agent"]
            assert await status(old) == 200
            async with pool.acquire() as conn:  # rotate: a new key works at once, the old one is revoked
                _, new = await credentials.create_key(conn, "agent-2", ["agent"])
                assert await status(new) == 200
                revoked = await credentials.revoke_key(conn, credentials.key_id_of(old))
            assert revoked is not None and revoked.revoked_at is not None
            t0 = time.monotonic()
            await eventually(lambda: status(old), until=lambda c: c == 401, timeout=10, interval=0.2)
            assert time.monotonic() - t0 <= credentials.KEY_CACHE_S + 1.5
            assert await status(new) == 200
            async with pool.acquire() as conn:
                listed = {k.id: k for k in await credentials.list_keys(conn)}
            assert listed[credentials.key_id_of(old)].revoked_at is not None
            assert listed[credentials.key_id_of(new)].revoked_at is None
            row = await pool.fetchrow("SELECT * FROM api_keys WHERE id = $1", credentials.key_id_of(new))
            assert row["secret_sha256"] == credentials.secret_sha256(new)
            assert new not in str(dict(row)) and new.encode() not in bytes(row["rpc_verifier"])  # hashed at rest
    finally:
        await pool.close()


async def test_workspace_comes_from_the_key(keyed: tuple[Settings, str, dict[str, str]]) -> None:
    _, url, keys = keyed
    word = f"zorbl{uuid.uuid4().hex[:6]}"
    group = f"group:{T1}"
    async with httpx.AsyncClient(base_url=url, timeout=30) as http:
        h_ws = {"X-Api-Key": keys["agent-ws1"], "X-Principal-Id": ALICE_P, "X-Principal-Groups": group}
        h_any = h_ws | {"X-Api-Key": keys["agent"]}
        # a ws1 connector key: an envelope naming no workspace lands in ws1; one naming another is refused
        ing = {"X-Api-Key": keys["ingest-ws1"]}
        r = await http.post(
            "/ingress/envelope", json=upsert(f"w-{word}", f"{word} release", group, workspace="default"), headers=ing
        )
        assert _err(r) == (403, "workspace", "wrong_workspace")
        r = await http.post("/ingress/envelope", json=upsert(f"w-{word}", f"{word} release", group), headers=ing)
        assert r.status_code == 202

        async def found(headers: dict[str, str], body: dict[str, Any]) -> list[str]:
            r = await http.post("/tools/search_knowledge_base", json={"query": word} | body, headers=headers)
            assert r.status_code == 200, r.text
            return [p["external_id"] for p in r.json()["passages"]]

        await eventually(lambda: found(h_any, {"workspace": "ws1"}), timeout=60, interval=0.5)
        assert await found(h_any, {}) == []  # an any-workspace key defaults to "default": not there
        assert await found(h_ws, {}) == [f"w-{word}"]  # the ws1 key's request is in ws1 without saying so
        assert await found(h_ws, {"workspace": "ws1"}) == [f"w-{word}"]
        r = await http.post("/tools/search_knowledge_base", json={"query": word, "workspace": "default"}, headers=h_ws)
        assert _err(r) == (403, "workspace", "wrong_workspace")
        r = await http.delete(f"/v1/memories/{uuid.uuid4()}?workspace=default", headers=h_ws)
        assert _err(r) == (403, "workspace", "wrong_workspace")
    # MCP: the same key's tool calls run in ws1; an argument naming another workspace is a tool error
    async with mcp_session(url, h_ws) as mcp:
        ok = await mcp.call_tool("search_knowledge_base", {"query": word})
        assert not ok.is_error and [p["external_id"] for p in ok.structured_content["passages"]] == [f"w-{word}"]
        # workspace is not a model-facing argument at all (the catalogue hides it): naming one is refused
        bad = await mcp.call_tool("search_knowledge_base", {"query": word, "workspace": "ws2"})
        text = " ".join(getattr(c, "text", "") for c in bad.content)
        assert bad.is_error and "workspace" in text and "status 422" in text


async def test_dev_mode_key_has_every_scope(settings_factory: Any, pipeline: Any, caplog: Any) -> None:
    s: Settings = await settings_factory()  # SERVICE_API_KEY=test-key
    rt = await pipeline("ingest", settings_override=s)
    caplog.set_level("WARNING", logger="orgmem.api")
    app = create_app(rt)
    assert any("single-key development mode" in r.message and r.levelname == "WARNING" for r in caplog.records)
    async with serve_app(app) as url, httpx.AsyncClient(base_url=url, timeout=30) as http:
        h = {"X-Api-Key": "test-key", "X-Principal-Id": ALICE_P}
        assert (
            await http.post("/ingress/envelope", json=membership(f"group:{T1}", [ALICE_P]), headers=h)
        ).status_code == 202
        assert (await http.get("/v1/admin/health", headers=h | {"X-Principal-Roles": "admin"})).status_code == 200


# ---- Kafka request/reply ---------------------------------------------------------------------------------
async def test_rpc_requests_must_be_signed_by_an_agent_key(
    settings_factory: Any, pipeline: Any, tmp_path: Path
) -> None:
    s: Settings = await settings_factory(org_hierarchy_path=hierarchy_file(tmp_path), service_api_key=None)
    await pipeline("ingest", "embed", "retrieve", settings_override=s)
    await load_corpus(s)
    keys = await make_keys(s)
    kw: dict[str, Any] = {"namespace": s.topic_namespace, "timeout": 20, "retries": 0}
    ask = {"query": "quintrel"}

    async def call(key: str | None, body: dict[str, Any] = ask) -> Any:
        async with OrgMemoryClient.kafka(s.kafka_bootstrap_servers, api_key=key, **kw) as om:
            return await om.retrieve_context(body, principal_id=ALICE_P, groups=ALICE_GROUPS)

    for key, status, field in (
        (None, 401, "x-orgmem-key-id"),  # no credential at all: the hole the issue names
        ("omk_0123456789ab." + "A" * 43, 401, "x-orgmem-key-id"),  # unknown key
        ("not-the-dev-key", 401, "x-orgmem-key-id"),  # dev key id, but no SERVICE_API_KEY here
        (keys["ingest"], 403, "x-orgmem-key-id"),  # a connector key cannot read
    ):
        with pytest.raises(ToolCallError) as err:
            await call(key)
        assert (err.value.status, err.value.field) == (status, field), key
    got = await eventually(lambda: call(keys["agent"]), until=lambda r: bool(r.passages), timeout=60, interval=0.5)
    assert got.passages[0].external_id == "team-1"
    # a workspace-bound key serves its workspace only
    with pytest.raises(ToolCallError) as err:
        await call(keys["agent-ws1"], {"query": "quintrel", "workspace": "default"})
    assert (err.value.status, err.value.field) == (403, "request.workspace")
    # revoked: refused within the cache time, no restart
    pool = await create_pool(s, min_size=1, max_size=1)
    try:
        async with pool.acquire() as conn:
            await credentials.revoke_key(conn, credentials.key_id_of(keys["agent"]))
    finally:
        await pool.close()
    await asyncio.sleep(credentials.KEY_CACHE_S + 0.5)
    with pytest.raises(ToolCallError) as err:
        await call(keys["agent"])
    assert err.value.status == 401


async def test_rpc_signature_rules(settings_factory: Any) -> None:
    """``verify_rpc`` against the real table: tampering, clock skew, replay vs redelivery, revocation."""
    s: Settings = await settings_factory(service_api_key=None)
    keys = await make_keys(s)
    pool = await create_pool(s, min_size=1, max_size=2)
    store = KeyStore(lambda: pool, None, ttl_s=0)
    try:
        body = b'{"tool":"retrieve_context","request":{"query":"x"}}'

        def headers(key: str, rid: str, *, now_ms: int | None = None, sign_body: bytes = body) -> dict[str, str | None]:
            h: dict[str, str | None] = {"reply_to": "om.rpc.reply.c1.v1", "correlation_id": rid, "deadline": "99"}
            signed = sign_rpc(
                key, request_id=rid, reply_to="om.rpc.reply.c1.v1", deadline="99", body=sign_body, now_ms=now_ms
            )
            return h | {k: v.decode() for k, v in signed}

        async def refused(
            h: dict[str, str | None], position: str = "t:0:1", data: bytes = body
        ) -> tuple[int, str, str]:
            with pytest.raises(CredentialError) as exc:
                await verify_rpc(store, pool, h, data, position=position)
            return exc.value.status, exc.value.field, exc.value.kind

        agent = keys["agent"]
        ok = headers(agent, "r1")
        cred = await verify_rpc(store, pool, ok, body, position="t:0:1")
        assert cred.key_id == credentials.key_id_of(agent) and cred.has("agent")
        assert (await verify_rpc(store, pool, ok, body, position="t:0:1")).key_id == cred.key_id  # redelivery
        assert await refused(ok, position="t:0:2") == (401, "correlation_id", "replayed")  # same bytes, new record
        assert await refused(headers(agent, "r2"), data=body + b" ") == (401, "x-orgmem-signature", "bad_signature")
        tampered = headers(agent, "r3") | {"reply_to": "om.rpc.reply.attacker.v1"}
        assert await refused(tampered) == (401, "x-orgmem-signature", "bad_signature")
        stale = headers(agent, "r4", now_ms=int(time.time() * 1000) - 6 * 60 * 1000)
        assert await refused(stale) == (401, "x-orgmem-timestamp", "stale")
        unsigned = {k: v for k, v in ok.items() if k != "x-orgmem-signature"}
        assert await refused(unsigned) == (401, "x-orgmem-signature", "unauthenticated")
        assert await refused(headers(keys["admin"], "r5")) == (403, "x-orgmem-key-id", "missing_scope")
        async with pool.acquire() as conn:
            await credentials.revoke_key(conn, cred.key_id)
        assert await refused(headers(agent, "r6")) == (401, "x-orgmem-key-id", "unauthenticated")
    finally:
        await pool.close()


# ---- revocation through a running stdio MCP server -------------------------------------------------------
async def test_stdio_member_removed_loses_access_without_restart(
    settings_factory: Any, pipeline: Any, tmp_path: Path
) -> None:
    """A real ``orgmem mcp`` subprocess (the SDK's stdio client) for a member added to team 1 through the
    pipeline; once the removal envelope is ingested, the very next calls can neither read the team's
    document nor write a team-scoped memory — no restart."""
    import sys

    from mcp import ClientSession, StdioServerParameters, stdio_client

    from schemas.envelope import ChangeEnvelope
    from services.directory import groups_of
    from tests.integration.helpers import produce
    from tests.integration.retriever_fixtures import DAVE

    s: Settings = await settings_factory(org_hierarchy_path=hierarchy_file(tmp_path))
    await pipeline("ingest", "embed", settings_override=s)
    await load_corpus(s)
    dave, team = f"user:{DAVE}", f"group:{T1}"

    def change(when: str, **members: list[str]) -> ChangeEnvelope:
        env = membership(team, [])
        env["event_time"], env["membership"] = when, {"group": team, "added": [], "removed": []} | members
        env["source"]["external_id"] = "team-1-roster"
        return ChangeEnvelope.model_validate(env)

    async def dave_groups() -> list[str]:
        pool = await create_pool(s, min_size=1, max_size=1)
        try:
            async with pool.acquire() as conn:
                return await groups_of(conn, dave)
        finally:
            await pool.close()

    await produce(s, change("2024-01-01T00:00:00Z", added=[dave]))
    await eventually(dave_groups, until=lambda g: team in g, timeout=60, interval=0.3)
    repo = Path(__file__).resolve().parents[2]
    env = s.to_env() | {"PYTHONPATH": str(repo)}
    env.pop("SERVICE_API_KEY", None)
    orgmem = str(Path(sys.executable).parent / "orgmem")
    params = StdioServerParameters(command=orgmem, args=["mcp", "--principal", dave], env=env, cwd=repo)
    async with stdio_client(params) as (read, write), ClientSession(read, write) as mcp:
        await mcp.initialize()

        async def sees_team_doc() -> bool:
            r = await mcp.call_tool("retrieve_context", {"query": "quintrel", "limit": 20})
            return "team-1" in {p["external_id"] for p in r.structured_content["passages"]}

        async def team_write(n: int) -> Any:
            note = {"text": f"team note {n}", "scope": team, "source": {"session_id": "s", "event_id": f"e{n}"}}
            return await mcp.call_tool("remember", note)

        assert await eventually(sees_team_doc, timeout=60, interval=0.5)
        assert not (await team_write(1)).is_error
        await produce(s, change("2024-06-01T00:00:00Z", removed=[dave]))
        await eventually(dave_groups, until=lambda g: team not in g, timeout=60, interval=0.2)
        t0 = time.monotonic()
        assert not await sees_team_doc()  # the very next call: the directory is re-read per call
        denied = await team_write(2)
        text = " ".join(getattr(c, "text", "") for c in denied.content)
        assert denied.is_error and "403" in text and "scope" in text
        assert time.monotonic() - t0 < 10


async def test_orgmem_keys_cli(settings_factory: Any) -> None:
    """``orgmem keys create|list|revoke`` as an operator runs them; the printed key authenticates."""
    import os
    import subprocess
    import sys

    s: Settings = await settings_factory(service_api_key=None)
    repo = Path(__file__).resolve().parents[2]
    env = os.environ | s.to_env() | {"PYTHONPATH": str(repo)}
    orgmem = str(Path(sys.executable).parent / "orgmem")

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([orgmem, "keys", *args], env=env, cwd=repo, capture_output=True, text=True, timeout=60)

    made = await asyncio.to_thread(run, "create", "--scope", "agent", "--scope", "ingest", "--name", "gateway")
    assert made.returncode == 0, made.stderr
    key = made.stdout.split("key (shown once, store it now): ")[1].strip()
    kid = credentials.key_id_of(key)
    pool = await create_pool(s, min_size=1, max_size=1)
    try:
        cred = await KeyStore(lambda: pool, None).authenticate(key)
        assert cred is not None and cred.scopes == {"agent", "ingest"} and cred.name == "gateway"
        listed = await asyncio.to_thread(run, "list")
        assert kid in listed.stdout and "active" in listed.stdout and key not in listed.stdout
        assert (await asyncio.to_thread(run, "revoke", kid)).returncode == 0
        assert await KeyStore(lambda: pool, None).authenticate(key) is None
        assert "revoked" in (await asyncio.to_thread(run, "list")).stdout
        bad = await asyncio.to_thread(run, "create", "--name", "x")
        assert bad.returncode == 2 and "--scope" in bad.stderr
    finally:
        await pool.close()
