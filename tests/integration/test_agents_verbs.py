"""Memory verbs on the real stack through the SDK (HTTP): ``whoami`` (groups from the directory),
``remember_batch`` (one session = one write for the throttle, also ADK's ``add_session_to_memory``),
``list_memories`` (mine / at a group I hold, paginated), ``get_memory`` and ``update_memory`` (a new
version superseding the old, history readable) — ACL-checked: an outsider gets 403/404, never content."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from google.adk.events.event import Event
from google.adk.sessions.session import Session
from google.genai import types

from orgmem_sdk.adk import OrgMemoryService
from orgmem_sdk.client import OrgMemoryClient
from orgmem_sdk.errors import ForbiddenError, InvalidRequestError, NotFoundError, ThrottledError
from schemas.envelope import ChangeEnvelope
from services.api.app import create_app
from services.settings import Settings
from tests.integration.agents_helpers import serve_app
from tests.integration.helpers import eventually, fetchval, produce
from tests.integration.retriever_fixtures import DIV, ORG, T1, T2, hierarchy_file

ALICE, MATE, OUTSIDER = (f"user:{uuid.uuid4()}" for _ in range(3))
TEAM = f"group:{T1}"
COOLDOWN_S = 2.0  # far longer than a batch's items are apart; short enough to wait out before the update


def membership(group: str, members: list[str]) -> ChangeEnvelope:
    return ChangeEnvelope.model_validate(
        {
            "envelope_id": str(uuid.uuid4()),
            "op": "membership",
            "source": {"system": "directory", "external_id": group},
            "event_time": (datetime.now(UTC) - timedelta(minutes=5)).isoformat(),
            "membership": {"group": group, "added": members},
        }
    )


@pytest.fixture
async def org(settings_factory: Any, pipeline: Any, tmp_path: Path) -> AsyncIterator[tuple[Settings, str]]:
    s: Settings = await settings_factory(
        org_hierarchy_path=hierarchy_file(tmp_path), memory_write_cooldown_s=COOLDOWN_S
    )
    rt = await pipeline("ingest", "embed", "retrieve", settings_override=s)
    await produce(s, membership(TEAM, [ALICE, MATE]))

    async def applied() -> int:
        return int(await fetchval(s, "SELECT count(*) FROM group_memberships WHERE valid_to IS NULL"))

    await eventually(applied, until=lambda n: n == 2, timeout=60)
    async with serve_app(create_app(rt)) as url:
        yield s, url


def _event(author: str, text: str) -> Event:
    return Event(author=author, content=types.Content(role="user", parts=[types.Part.from_text(text=text)]))


async def test_whoami_batch_list_get_update(org: tuple[Settings, str]) -> None:
    _, url = org
    async with OrgMemoryClient.http(url, "test-key") as om:
        # whoami: only the user id is sent; the groups come from the directory, scopes up the hierarchy
        me = await om.whoami(principal_id=ALICE)
        assert me.principal_id == ALICE and me.groups == [TEAM]
        assert set(me.expanded_groups) == {TEAM, f"group:{DIV}", f"group:{ORG}"}
        assert me.writable_scopes[0] == "user" and set(me.writable_scopes[1:]) == set(me.expanded_groups)
        assert (await om.whoami(principal_id=OUTSIDER)).writable_scopes == ["user"]

        # a batch is one write for the throttle (under a cooldown): three memories of one session pass
        batch = await om.remember_batch(
            [
                {"text": f"Zorblat fact number {i}.", "scope": TEAM, "source": {"session_id": "s1", "event_id": str(i)}}
                for i in range(3)
            ],
            principal_id=ALICE,
        )
        ids = [m.memory_id for m in batch.memories]
        assert len(set(ids)) == 3 and all(m.principals == [TEAM] for m in batch.memories)
        with pytest.raises(ThrottledError):  # the session's next write is inside the cooldown
            await om.remember({"text": "one more", "source": {"session_id": "s1"}}, principal_id=ALICE)
        with pytest.raises(ForbiddenError) as refused:  # every item checked before any is written
            await om.remember_batch([{"text": "ok"}, {"text": "not mine", "scope": f"group:{T2}"}], principal_id=ALICE)
        assert refused.value.field == "memories.1.scope"
        private = await om.remember(
            {"text": "Alice keeps this to herself.", "source": {"session_id": "s2"}}, principal_id=ALICE
        )

        # ADK's add_session_to_memory under the same cooldown: a two-event session is one write
        adk_memory = OrgMemoryService(OrgMemoryClient.http(url, "test-key"))
        session = Session(
            id="adk-1",
            app_name="verbs",
            user_id=ALICE,
            events=[_event("user", "Quelbrin starts Monday."), _event("model", "Noted: quelbrin Monday.")],
        )
        await adk_memory.add_session_to_memory(session)
        await adk_memory.aclose()

        async def mine() -> int:
            return len((await om.list_memories({"limit": 100}, principal_id=ALICE)).memories)

        await eventually(mine, until=lambda n: n == 6, timeout=60, interval=0.5)

        # pagination: newest first, disjoint pages, the end says so
        first = await om.list_memories({"limit": 4}, principal_id=ALICE)
        assert len(first.memories) == 4 and first.next_cursor
        second = await om.list_memories({"limit": 4, "cursor": first.next_cursor}, principal_id=ALICE)
        assert len(second.memories) == 2 and second.next_cursor is None
        listed = [m.memory_id for m in first.memories + second.memories]
        assert len(set(listed)) == 6 and set(ids) | {private.memory_id} <= set(listed)
        times = [m.event_time for m in first.memories + second.memories]
        assert times == sorted(times, reverse=True)

        # scope=user: the private one only; scope=group: what the team shares, for a teammate too
        only_private = await om.list_memories({"scope": "user"}, principal_id=ALICE)
        assert len(only_private.memories) == 3  # the private note and the ADK session's two events
        assert private.memory_id in {m.memory_id for m in only_private.memories}
        assert all(m.scope == "user" and m.author == ALICE for m in only_private.memories)
        assert {m.text for m in only_private.memories} >= {"Quelbrin starts Monday.", "Noted: quelbrin Monday."}
        team = await om.list_memories({"scope": TEAM}, principal_id=MATE)
        assert set(ids) <= {m.memory_id for m in team.memories}
        assert private.memory_id not in {m.memory_id for m in team.memories}
        assert (await om.list_memories(principal_id=MATE)).memories == []  # MATE authored nothing
        with pytest.raises(ForbiddenError) as not_held:
            await om.list_memories({"scope": TEAM}, principal_id=OUTSIDER)
        assert not_held.value.field == "scope"
        with pytest.raises(InvalidRequestError) as bad_scope:  # refused by the SDK's contract
            await om.list_memories({"scope": "team"}, principal_id=ALICE)
        assert bad_scope.value.field == "scope"

        # get_memory: a teammate reads it; an outsider and a stranger's private memory are 404
        got = await om.get_memory(ids[0], principal_id=MATE)
        assert got.text == "Zorblat fact number 0." and got.version == 1 and got.scope == TEAM
        assert [v.version for v in got.versions] == [1] and got.session_id == "s1" and got.kind == "note"
        with pytest.raises(NotFoundError):
            await om.get_memory(ids[0], principal_id=OUTSIDER)
        with pytest.raises(NotFoundError):
            await om.get_memory(private.memory_id, principal_id=MATE)

        # update_memory: the author only; a new version supersedes, the old text stays in the history
        with pytest.raises(ForbiddenError):
            await om.update_memory(ids[1], "MATE rewrites it", principal_id=MATE)
        with pytest.raises(NotFoundError):
            await om.update_memory(ids[1], "outsider rewrites it", principal_id=OUTSIDER)
        await asyncio.sleep(COOLDOWN_S)  # an update is a write of the memory's session: the throttle applies
        upd = await om.update_memory(ids[1], "Zorblat fact one, corrected.", principal_id=ALICE)
        assert (upd.supersedes_version, upd.version, upd.principals) == (1, 2, [TEAM])

        async def current() -> int:
            return (await om.get_memory(ids[1], principal_id=MATE)).version

        await eventually(current, until=lambda v: v == 2, timeout=60, interval=0.5)
        now = await om.get_memory(ids[1], principal_id=MATE)
        assert now.text == "Zorblat fact one, corrected."
        assert [(v.version, v.text) for v in now.versions] == [
            (1, "Zorblat fact number 1."),
            (2, "Zorblat fact one, corrected."),
        ]
        ctx = await om.retrieve_context({"query": "zorblat corrected"}, principal_id=MATE)
        hit = next(p for p in ctx.passages if p.external_id == ids[1])
        assert "corrected" in hit.text and "number 1" not in hit.text


async def test_verbs_refuse_bad_input_naming_the_field(org: tuple[Settings, str]) -> None:
    _, url = org
    async with httpx.AsyncClient(base_url=url, headers={"X-Api-Key": "test-key", "X-Principal-Id": ALICE}) as http:
        for query, field in (("scope=team", "scope"), ("cursor=zz%21", "cursor"), ("limit=many", "limit")):
            r = await http.get(f"/v1/memories?{query}")
            assert r.status_code == 422, (query, r.text)
            assert field in r.text
        r = await http.post(f"/v1/memories/{uuid.uuid4()}/versions", json={"text": ""})
        assert r.status_code == 422 and "text" in r.text
        r = await http.post(f"/v1/memories/{uuid.uuid4()}/versions", json={"text": "x"})
        assert r.status_code == 404
        r = await http.get("/v1/memories", headers={"X-Principal-Id": ""})
        assert r.status_code in (403, 422)
        assert (await http.get("/v1/whoami", headers={"X-Api-Key": "wrong"})).status_code == 401
