"""The ACL conformance suite (issue 20 §5): a corpus with a secret in every place a secret can live
(``acl_corpus.py``) and ≥ 40 crafted outside viewers, over EVERY door generated from the tool catalogue
(HTTP ``/tools/<name>``, MCP over streamable HTTP with the real SDK client, Kafka request/reply) and every
non-tool GET route of the FastAPI route table (cards, procedures, proposals, memories …) — so a new tool
or route is probed the day it is added — plus delete, ACL narrowing, purge and replay.

Profiles: ``test_quick_profile`` (a subset of viewers and calls; in ``make test``) and
``test_long_profile`` (every viewer, every call, then a replay and the sweep again; marked ``slow``: in
``make test-reliability``). Each prints a table: per door, calls tried / leaked / 5xx.

The four leaks of issue 20 §2 (private structured values on proposals, private identities on cards and
profiles, a deleted message in its follower's index context, purged values in facts and aliases) each have a
test below; they failed on the round-2 code (then strict xfails) and pass since the derived-data ACL. The
sweep fails on any leak.
"""

from __future__ import annotations

import json
import os
import re
from collections import Counter
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
from fastapi.routing import APIRoute, iter_route_contexts

from services.api import catalogue
from services.api.app import create_app
from services.db.migrate import migrate
from services.serve import start_runtime, stop_runtime
from services.settings import Settings
from tests.integration.agents_helpers import serve_app
from tests.integration.conftest import _teardown, make_settings
from tests.integration.doors import Answer, RpcDoor, Who, crosses_a_socket, http_call, mcp_calls, rpc_door
from tests.integration.helpers import eventually, fetch, fetchval, later
from tests.reliability.acl_corpus import INSIDER, PU, QUICK, Corpus, build, hierarchy, tokens_file, viewers

SKIP_PREFIXES = ("/v1/admin", "/metrics", "/docs", "/redoc", "/openapi", "/asyncapi", "/healthz", "/readyz", "/mcp")
KNOWN: dict[str, Callable[[str, str], bool]] = {}
"""Leak classes tolerated by the sweep (reported by name): none. The four of issue 20 §2 were fixed."""


@dataclass
class World:
    settings: Settings
    url: str
    http: httpx.AsyncClient
    rpc: RpcDoor
    routes: list[tuple[str, frozenset[str]]]  # (path, methods) of every API route
    corpus: Corpus


@pytest.fixture(scope="module")
async def world(stack_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[World]:
    tmp = tmp_path_factory.mktemp("acl")
    s = make_settings(stack_env, org_hierarchy_path=hierarchy(tmp), mcp_tokens_path=tokens_file(tmp))
    await migrate(s.database_url, s.db_schema)
    rt = await start_runtime(s, ["ingest", "embed", "extract", "conflicts", "retrieve"])
    try:
        app = create_app(rt)
        # the effective route table (included routers flattened, prefixes applied)
        routes = [
            (str(ctx.path), frozenset(ctx.methods or ()))
            for ctx in iter_route_contexts(app.routes)
            if isinstance(ctx.route, APIRoute)
        ]
        async with (
            serve_app(app) as url,
            httpx.AsyncClient(base_url=url, timeout=60) as http,
            rpc_door(s) as rpc,
        ):
            corpus = await build(s, http)
            yield World(s, url, http, rpc, routes, corpus)
    finally:
        await stop_runtime(rt)
        await _teardown(stack_env, s)


# ---- what every door is asked ---------------------------------------------------------------------------
def tool_calls(c: Corpus, quick: bool) -> list[tuple[str, dict[str, Any]]]:
    """Model-facing arguments for every catalogue tool (a tool without probes fails the suite)."""
    secret_words = sorted(c.secrets.values())
    people = [*c.names.values(), "Priya Shah", "Omar Field"]
    every = "quasar " + " ".join(secret_words + [w for n in c.names.values() for w in n.split()])
    queries = [every, "quasar migration codename rollout"] + ([] if quick else secret_words + list(c.names.values()))
    about = [people[2], "Priya Shah"] if quick else people  # quick: a secret fact name and the public person
    ents = c.ids["entity"]
    subj = [{"type": "person", "id": i} for i in ents[:20]]
    window = {"from_time": later(-6000).isoformat(), "to_time": later(6000).isoformat()}
    calls: dict[str, list[dict[str, Any]]] = {
        "retrieve_context": [{"query": q[:2000], "limit": 50} for q in queries]
        + [{"query": "who is this?", "about": a, "mode": "joint", "limit": 50} for a in about]
        + [{"query": "who is this?", "subjects": subj, "mode": "graph_first"}],
        # each secret word on its own, in every profile: a one-word query finds its document for sure
        "search_knowledge_base": [{"query": q[:2000], "limit": 50} for q in dict.fromkeys(queries + secret_words)],
        "query_facts": [{"about": a} for a in about] + [{"subjects": subj}],
        "diff_facts": [{"about": a} | window for a in about] + [{"subjects": subj} | window],
        "query_paths": [{"about": a, "max_depth": 3} for a in about] + [{"seeds": subj[:20], "max_depth": 3}],
        "worldbuilder_lookup": [{"name": a} for a in about] + [{"subject": s} for s in (subj[:3] if quick else subj)],
        "worldbuilder_kb": [{"query": q[:2000], "limit": 50} for q in queries[: 1 if quick else 2]]
        + [{"query": "quasar", "about": a} for a in about],
        "search_procedural_memory": [{"query": q[:2000]} for q in queries[:2]],
        "remember": [{"text": "a probe note", "scope": "user"}],
        "forget": [{"memory_id": m} for m in c.ids["memory"]],
        "preload": [{"text": q[:2000]} for q in dict.fromkeys(queries[:2] + secret_words)],
        "list_memories": [{}, {"scope": "user"}, {"limit": 100}],
        "get_memory": [{"memory_id": m} for m in c.ids["memory"]],
        "update_memory": [{"memory_id": m, "text": "an outsider's probe overwrite"} for m in c.ids["memory"]],
        "whoami": [{}],
        "memory_profile": [{}, {"limit": 50}],
        "propose_procedure": [{"title": "a probe procedure", "steps": ["probe"], "source_ids": c.ids["proposal"]}],
    }
    missing = set(catalogue.BY_NAME) - set(calls)
    assert not missing, f"catalogue tools without ACL probes: {missing}"
    return [(tool, args) for tool in catalogue.BY_NAME for args in calls[tool]]


def get_routes(w: World, quick: bool) -> list[str]:
    """Every non-tool GET route of the route table, its path parameters filled from the corpus' ids."""
    c = w.corpus
    pool = {
        "platform_user": c.ids["platform_user"],
        "procedure": c.ids["procedure"],
        "memory": c.ids["memory"],
        "proposal": c.ids["proposal"],
    }
    paths: list[str] = []
    for path, methods in w.routes:
        if "GET" not in methods or path.startswith(SKIP_PREFIXES) or path.startswith("/tools/"):
            continue
        params = re.findall(r"{(\w+)}", path)
        if not params:
            paths.append(path)
            continue
        assert len(params) == 1, path
        kind = next((k for k in pool if k in params[0]), "entity")
        ids = pool.get(kind, c.ids["entity"])
        for i in ids[:4] if quick else ids:
            paths.append(path.replace("{" + params[0] + "}", i))
    assert any("taxonomy-proposals" in p for p in paths) and any("/v1/graph/persons/" in p for p in paths), paths
    assert any(p.startswith("/v1/procedure-proposals/") for p in paths), paths
    return paths


# ---- the sweep -----------------------------------------------------------------------------------------------
@dataclass
class Tally:
    tried: Counter[str] = field(default_factory=Counter)
    leaked: Counter[str] = field(default_factory=Counter)
    errors: Counter[str] = field(default_factory=Counter)
    leaks: list[tuple[str, str, str, str]] = field(default_factory=list)  # viewer, where, location, excerpt
    found: set[str] = field(default_factory=set)  # insider: the locations reached

    def table(self) -> str:
        rows = [f"{'door':6} {'tried':>7} {'leaked':>7} {'5xx':>5}"]
        rows += [f"{d:6} {self.tried[d]:7d} {self.leaked[d]:7d} {self.errors[d]:5d}" for d in sorted(self.tried)]
        return "\n".join(rows)

    def unknown(self) -> list[tuple[str, str, str, str]]:
        return [lk for lk in self.leaks if not any(rule(lk[2], lk[1]) for rule in KNOWN.values())]


def check(t: Tally, who: Who, where: str, sent: str, a: Answer, secrets: dict[str, str], insider: bool) -> None:
    door = where.split(":", 1)[0]
    t.tried[door] += 1
    if a.status >= 500:
        t.errors[door] += 1
    text = a.text.lower()
    sent = sent.lower()
    hits = {loc for tok, loc in secrets.items() if tok in text and tok not in sent}
    if insider:
        t.found |= hits
        return
    if hits:
        t.leaked[door] += 1
        t.leaks += [(who.label, where, loc, a.text[:200]) for loc in sorted(hits)]


async def sweep(w: World, people: list[Who], quick: bool, t: Tally | None = None) -> Tally:
    t = t or Tally()
    secrets = w.corpus.all_secrets()
    calls = tool_calls(w.corpus, quick)
    paths = get_routes(w, quick)
    for who in [INSIDER, *people]:
        insider = who is INSIDER
        # the insider is the read control: it must not forget the memory it is to find (nor write probes)
        calls = tool_calls(w.corpus, quick)
        if insider:
            calls = [(tool, args) for tool, args in calls if catalogue.BY_NAME[tool].read_only]
        for tool, args in calls if crosses_a_socket(who.headers) else []:
            sent = json.dumps(args)
            a = await http_call(w.http, "POST", f"/tools/{tool}", args, who)
            check(t, who, f"http:/tools/{tool}", sent, a, secrets, insider)
        for path in paths if crosses_a_socket(who.headers) else []:
            a = await http_call(w.http, "GET", path, None, who)
            check(t, who, f"http:{path}", path, a, secrets, insider)
        if all(ord(ch) < 128 for v in who.headers.values() for ch in v):  # the MCP client sends ASCII headers
            for (tool, args), a in zip(calls, await mcp_calls(w.url, who, calls), strict=True):
                check(t, who, f"mcp:{tool}", json.dumps(args), a, secrets, insider)
        if who.rpc is not None:
            for tool, args in calls:
                a = await w.rpc.call(tool, args, who.rpc)
                check(t, who, f"rpc:{tool}", json.dumps(args), a, secrets, insider)
    return t


def report(t: Tally, label: str) -> None:
    print(f"\nACL conformance ({label}): per door calls tried / leaked / 5xx\n{t.table()}")
    for name, rule in KNOWN.items():
        n = sum(1 for lk in t.leaks if rule(lk[2], lk[1]))
        print(f"known leak ({n} hits): {name}")


def assert_clean(t: Tally, people: list[Who]) -> None:
    # insider control: the secrets are there to be found through these very doors
    must = {"text", "title", "author_name", "fact_subject", "memory", "procedure", "narrowed", "thread_neighbour"}
    must |= {"proposal", "private_proposal"}
    assert must <= t.found, f"insider did not reach {must - t.found}"
    unknown = t.unknown()
    assert not unknown, unknown[:15]
    assert sum(t.errors.values()) == 0, t.errors


@pytest.mark.timeout(900)
async def test_quick_profile(world: World) -> None:
    people = [v for v in viewers() if v.label in QUICK]
    assert len(people) == len(QUICK)
    t = await sweep(world, people, quick=True)
    report(t, f"quick: {len(people)} viewers")
    assert_clean(t, people)


@pytest.mark.slow
@pytest.mark.timeout(3600)
async def test_long_profile_then_replay(world: World) -> None:
    from services.ops.replay import replay

    people = viewers()
    assert len(people) >= 40, len(people)
    limit = int(os.environ.get("ORGMEM_ACL_VIEWERS", "0"))  # a shorter long run (checking the suite itself)
    people = people[-limit:] if limit else people
    t = await sweep(world, people, quick=False)
    report(t, f"long: {len(people)} viewers")
    assert_clean(t, people)
    # replay the log through ingest and the graph stages: the projection rebuilt from it leaks nothing more
    for stage in ("ingest", "extract", "conflicts"):
        await replay(world.settings, stage, start=None)
    unembedded = "SELECT count(*) FROM chunks WHERE NOT is_parent AND NOT deleted AND embedding IS NULL"
    await eventually(lambda: fetchval(world.settings, unembedded), until=lambda n: n == 0, timeout=60)
    again = await sweep(world, [v for v in viewers() if v.label in QUICK], quick=True)
    report(again, "after replay")
    assert_clean(again, people)


# ---- the leaks of issue 20 §2 (failed on the round-2 code) ----------------------------------------------------
def _sibling() -> Who:
    return next(v for v in viewers() if v.label == "sibling-user")


async def test_proposals_hide_private_structured_values(world: World) -> None:
    sib, secret = _sibling(), world.corpus.secrets["structured_field"]
    for path in ("/v1/taxonomy-proposals", "/v1/taxonomy-proposals?status=open"):
        a = await http_call(world.http, "GET", path, None, sib)
        assert a.status == 200 and secret not in a.text.lower(), a.text[:300]


async def test_private_identities_stay_off_cards_and_profiles(world: World) -> None:
    sib, alias = _sibling(), world.corpus.secrets["identity_alias"]
    by_pu = await http_call(world.http, "GET", f"/v1/graph/persons/by-platform-user/{PU}", None, sib)
    assert by_pu.status == 404, by_pu.text[:300]  # the platform id is known only to a private record
    lookup = await http_call(world.http, "POST", "/tools/worldbuilder_lookup", {"name": "Priya Shah"}, sib)
    (mcp,) = await mcp_calls(world.url, sib, [("worldbuilder_lookup", {"name": "Priya Shah"})])
    for a in (lookup, mcp):
        assert alias not in a.text.lower() and PU not in a.text.lower(), a.text[:300]
    for pid in world.corpus.ids["entity"]:
        card = await http_call(world.http, "GET", f"/v1/graph/persons/{pid}", None, sib)
        assert alias not in card.text.lower() and PU not in card.text.lower(), card.text[:300]


async def test_a_deleted_message_leaves_the_followers_index_context(world: World) -> None:
    token = world.corpus.deleted
    rows = await fetch(world.settings, "SELECT index_context FROM chunks WHERE index_context ILIKE $1", f"%{token}%")
    assert rows == [], rows
    org = next(v for v in viewers() if v.label == "org-member")
    # the lexical arm (operator door): the token's words must find nothing (the dense arm always ranks something)
    a = await http_call(world.http, "POST", "/tools/search_knowledge_base", {"query": token, "arms": "lexical"}, org)
    assert a.body is not None and a.body["passages"] == [], a.text[:300]


async def test_purged_values_leave_facts_and_aliases(world: World) -> None:
    from tests.integration.admin_helpers import ADMIN

    s = world.settings
    policy = await world.http.put(
        "/v1/admin/retention/policies",
        json={"workspace": "default", "source_system": "hrpurge", "max_age_days": 30},
        headers=ADMIN,
    )
    assert policy.status_code == 200, policy.text
    run = await world.http.post("/v1/admin/retention/run", params={"apply": "true"}, headers=ADMIN)
    assert run.status_code == 200, run.text
    await eventually(
        lambda: fetch(s, "SELECT 1 FROM documents WHERE external_id = 'purge-hr'"), until=lambda r: r == []
    )
    p = world.corpus.purged
    facts = await fetch(s, "SELECT value FROM facts WHERE value::text ILIKE $1", f"%{p['field']}%")
    aliases = await fetch(s, "SELECT value FROM person_aliases WHERE value ILIKE $1", f"%{p['alias']}%")
    assert facts == [] and aliases == [], (facts, aliases)


def test_the_viewer_list_is_long_enough_and_distinct() -> None:
    people = viewers()
    assert len(people) >= 40 and len({v.label for v in people}) == len(people)
    assert set(QUICK) <= {v.label for v in people}
    assert sum(1 for v in people if v.rpc is not None) >= 30  # the Kafka door gets most of them
    assert sum(1 for v in people if "Authorization" in v.headers) >= 5  # MCP bearer tokens
