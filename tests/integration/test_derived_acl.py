"""Derived data inherits the ACL of everything it came from (issue 20 §2), on the real stack.

Every row derived from documents — an identity alias, a structured host value, a taxonomy proposal, a
follower's index context, a fact — is shown only to a viewer who sees ALL of its live source documents
(``services.sources``), and the rule is re-evaluated on delete, ACL change and purge."""

from __future__ import annotations

import uuid
from typing import Any

import httpx

from services.api.app import create_app
from services.settings import Settings
from services.sources import all_visible_sql, array_sources
from tests.integration.admin_helpers import ADMIN
from tests.integration.helpers import connect, envelope, eventually, fetch, fetchval, later, principal, produce
from tests.integration.test_index_context import in_thread

STAGES = ("ingest", "extract", "conflicts")


async def test_the_one_rule_all_live_sources_visible(settings: Settings, pipeline: Any) -> None:
    """``services.sources.all_visible_sql`` on real rows: at least one live source, every live one visible;
    deleted and purged (missing) sources neither vouch nor hide."""
    await pipeline("ingest")  # migrates the isolated schema
    g, h = principal(), principal()
    docs = {name: uuid.uuid4() for name in ("pub", "priv", "both", "gone_priv")}
    conn = await connect(settings)
    try:
        for name, principals, deleted in (
            ("pub", [g], False),
            ("priv", [h], False),
            ("both", [g, h], False),
            ("gone_priv", [h], True),
        ):
            await conn.execute(
                "INSERT INTO documents (id, workspace, source_system, external_id, kind, event_time, principals,"
                " deleted_at) VALUES ($1, 'default', 't', $2, 'message', now(), $3, CASE WHEN $4 THEN now() END)",
                docs[name],
                name,
                principals,
                deleted,
            )

        async def sees(viewer: list[str], *names: str) -> bool:
            ids = [docs[n] if n in docs else uuid.uuid4() for n in names]  # unknown name: a purged document
            rule = all_visible_sql(array_sources("$1::uuid[]"), "$2")
            return bool(await conn.fetchval(f"SELECT {rule}", ids, viewer))

        assert await sees([g], "pub") and await sees([g], "pub", "both")
        assert not await sees([g], "pub", "priv")  # one invisible source hides the row
        assert await sees([g, h], "pub", "priv")
        assert await sees([g], "pub", "gone_priv")  # a deleted source no longer hides it
        assert not await sees([h], "gone_priv")  # nor vouches for it
        assert await sees([g], "pub", "purged") and not await sees([g], "purged")
        assert not await sees([g]) and not await sees([], "pub")
    finally:
        await conn.close()


def hdr(*groups: str) -> dict[str, str]:
    return {"X-Api-Key": "test-key", "X-Principal-Groups": ",".join(groups)}


async def _drained(settings: Settings, n: int) -> None:
    await eventually(
        lambda: fetchval(settings, "SELECT count(*) FROM processed_events WHERE stage = 'conflicts'"),
        until=lambda v: v >= n,
    )


async def test_identity_learnt_only_from_a_private_document_stays_private(settings: Settings, pipeline: Any) -> None:
    rt = await pipeline(*STAGES, "collab", "retrieve")
    pub, sec = principal(), principal()
    pu, phone = uuid.uuid4(), "+1-555-0100"
    priya: dict[str, Any] = {"author_email": "priya@corp.example", "author_name": "Priya Shah"}
    await produce(
        settings,
        envelope("P/1", "Priya Shah is on the Search team.", principals=[pub], **priya),
        envelope(
            "S/1",
            "Priya Shah works on Project Nightjar.",
            principals=[sec],
            event_time=later(1),
            identities=[
                {"namespace": "platform_user", "value": str(pu), "verified": True},
                {"namespace": "phone", "value": phone, "verified": False},
            ],
            **priya,
        ),
    )
    await _drained(settings, 2)
    person = await fetchval(settings, "SELECT person_id FROM person_aliases WHERE namespace = 'platform_user'")
    assert person == await fetchval(settings, "SELECT person_id FROM person_aliases WHERE namespace = 'email'")
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=create_app(rt)), base_url="http://t") as c:

        async def seen_by(*groups: str) -> tuple[int, int, str, str]:
            """(bridge status, card status, card text, lookup profile text) for this viewer."""
            bridge = await c.get(f"/v1/graph/persons/by-platform-user/{pu}", headers=hdr(*groups))
            card = await c.get(f"/v1/graph/persons/{person}", headers=hdr(*groups))
            look = await c.post(
                "/tools/worldbuilder_lookup", json={"name": "Priya Shah", "type": "person"}, headers=hdr(*groups)
            )
            assert look.status_code == 200, look.text
            return bridge.status_code, card.status_code, card.text, str(look.json()["profile"])

        # the outsider sees Priya (P/1) but neither the platform id nor the phone learnt only from S/1:
        # the bridge answers as for an unknown id, the card and the profile do not carry them
        status, card_status, card, profile = await seen_by(pub)
        unknown = await c.get(f"/v1/graph/persons/by-platform-user/{uuid.uuid4()}", headers=hdr(pub))
        assert (status, unknown.status_code, card_status) == (404, 404, 200)
        assert unknown.json() == (await c.get(f"/v1/graph/persons/by-platform-user/{pu}", headers=hdr(pub))).json()
        for text in (card, profile):
            assert str(pu) not in text and phone not in text
        # a viewer of both sees them everywhere
        status, card_status, card, profile = await seen_by(pub, sec)
        assert (status, card_status) == (200, 200)
        for text in (card, profile):
            assert str(pu) in text and phone in text
        # the profile cache (keyed by the evidence set) never serves one viewer's aliases to another
        assert str(pu) not in (await seen_by(pub))[3]
        # an email is resolved (author filter) only by a viewer who sees every document that carried it
        kb = {"query": "Priya", "author": "priya@corp.example"}
        found = await c.post("/tools/worldbuilder_kb", json=kb, headers=hdr(pub, sec))
        hidden = await c.post("/tools/worldbuilder_kb", json=kb, headers=hdr(pub))
        assert {d["external_id"] for d in found.json()["results"]} == {"P/1", "S/1"}, found.text
        assert hidden.status_code == 200 and hidden.json()["results"] == []
        # ACL change: S/1 becomes public -> the outsider now sees what it carries
        await produce(settings, envelope("S/1", op="acl", principals=[pub, sec], acl_event_time=later(100)))
        await eventually(
            lambda: fetchval(settings, "SELECT principals FROM documents WHERE external_id = 'S/1'"),
            until=lambda v: pub in v,
        )
        status, _, card, _ = await seen_by(pub)
        assert status == 200 and str(pu) in card and phone in card
        # delete: the only source of the platform id is gone -> nobody resolves it any more
        await produce(settings, envelope("S/1", op="delete", principals=[pub, sec], event_time=later(200)))
        gone = "SELECT deleted_at IS NOT NULL FROM documents WHERE external_id = 'S/1'"
        await eventually(lambda: fetchval(settings, gone))
        status, _, card, _ = await seen_by(pub, sec)
        assert status == 404 and str(pu) not in card and "priya@corp.example" in card


async def test_host_value_and_promotions_are_not_an_oracle(settings: Settings, pipeline: Any) -> None:
    rt = await pipeline(*STAGES)
    pub, sec = principal(), principal()
    pu = uuid.uuid4()
    await produce(
        settings,
        envelope(
            "HR/1",
            "directory record",
            principals=[sec],
            author_email="priya@corp.example",
            author_name="Priya Shah",
            structured_fields={"title": "Director of Skunkworks"},
            identities=[{"namespace": "platform_user", "value": str(pu), "verified": True}],
            system="hr",
        ),
        envelope(
            "HR/2",
            "directory record",
            principals=[sec],
            author_email="zed@corp.example",
            author_name="Zed Hidden",
            structured_fields={"title": "Chief of Staff"},
            system="hr",
        ),
    )
    await eventually(lambda: fetchval(settings, "SELECT count(*) = 2 FROM facts WHERE source = 'structured'"))
    claim = envelope("C/1", "Priya Shah is the VP of Engineering.", principals=[pub], event_time=later(5))
    await produce(settings, claim)
    await eventually(lambda: fetchval(settings, "SELECT count(*) FROM taxonomy_proposals"))
    c1 = await fetchval(settings, "SELECT id::text FROM documents WHERE external_id = 'C/1'")
    priya = await fetchval(settings, "SELECT person_id FROM person_aliases WHERE value = 'priya@corp.example'")
    zed = await fetchval(settings, "SELECT person_id FROM person_aliases WHERE value = 'zed@corp.example'")
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=create_app(rt)), base_url="http://t") as c:
        # the proposal's evidence (C/1) is public; the host's value and user id come from private HR/1
        [outside] = (await c.get("/v1/taxonomy-proposals", headers=hdr(pub))).json()["proposals"]
        assert outside["proposed_value"] == "VP of Engineering"
        assert outside["current_host_value"] is None and outside["host_entity_id"] is None
        assert "Skunkworks" not in str(outside) and str(pu) not in str(outside)
        [inside] = (await c.get("/v1/taxonomy-proposals", headers=hdr(pub, sec))).json()["proposals"]
        assert inside["current_host_value"] == "Director of Skunkworks" and inside["host_entity_id"] == str(pu)

        def promote(subject: uuid.UUID, value: str) -> dict[str, Any]:
            return {"subject": {"id": str(subject)}, "slot": "title", "value": value, "evidence": [c1]}

        # guessing the private host value answers exactly like any other value (no "already the host's value")
        guess = await c.post("/v1/promotions", json=promote(priya, "Director of Skunkworks"), headers=hdr(pub))
        other = await c.post("/v1/promotions", json=promote(priya, "Staff Engineer"), headers=hdr(pub))
        assert (guess.status_code, other.status_code) == (201, 201), guess.text
        assert guess.json()["current_host_value"] is None and other.json()["current_host_value"] is None
        # a viewer who sees HR/1 gets the honest answer
        same = await c.post("/v1/promotions", json=promote(priya, "director of skunkworks"), headers=hdr(pub, sec))
        assert same.status_code == 422 and same.json()["detail"]["field"] == "value"
        # a person the caller cannot see answers like a nonexistent one
        hidden = await c.post("/v1/promotions", json=promote(zed, "Chief of Staff"), headers=hdr(pub))
        nobody = await c.post("/v1/promotions", json=promote(uuid.uuid4(), "Chief of Staff"), headers=hdr(pub))
        assert hidden.status_code == nobody.status_code == 404
        assert hidden.json() == nobody.json()


async def test_deleted_or_narrowed_message_leaves_its_followers_index(settings: Settings, pipeline: Any) -> None:
    await pipeline("ingest", "embed")
    g, h = principal(), principal()

    def msg(ext: str, text: str, minute: int, who: str) -> Any:
        env = envelope(
            ext, text, principals=[g], event_time=later(minute), author_name=who, author_email=f"{who}@x.example"
        )
        return in_thread(env, "t-1")

    await produce(
        settings,
        msg("A", "The launch codeword is marmalade.", 0, "ann"),
        msg("B", "Noted, thanks.", 1, "bob"),
        msg("C", "The vault combination is quetzal.", 2, "cat"),
        msg("D", "Got it.", 3, "dan"),
    )

    async def index_of(ext: str) -> tuple[str, str, str, bool]:
        rows = await fetch(
            settings,
            "SELECT coalesce(c.index_context, '') AS ctx, c.content_hash, l.tsv::text AS lex,"
            " c.embedding IS NOT NULL AS v FROM chunks c JOIN documents d ON d.id = c.document_id"
            " JOIN chunk_lexemes l ON l.id = c.id WHERE d.external_id = $1 AND NOT c.is_parent",
            ext,
        )
        assert len(rows) == 1
        return rows[0]["ctx"], rows[0]["content_hash"], rows[0]["lex"], rows[0]["v"]

    async def settled() -> bool:
        sql = "SELECT count(*) = 4 FROM chunks WHERE NOT is_parent AND embedding IS NOT NULL"
        return bool(await fetchval(settings, sql))

    await eventually(settled)
    b_before, d_before = await index_of("B"), await index_of("D")
    assert "marmalade" in b_before[0] and "marmalad" in b_before[2]
    assert "quetzal" in d_before[0] and "quetzal" in d_before[2]
    # A is deleted: B's index context, its lexemes and its vector are re-derived without A's words
    await produce(settings, envelope("A", op="delete", principals=[g], event_time=later(10)))
    await eventually(lambda: index_of("B"), until=lambda r: "marmalade" not in r[0] and r[3])
    _, hashed, lex, _ = await index_of("B")
    assert "marmalad" not in lex and hashed != b_before[1]
    # an edit that moves E after its old follower F: F's index no longer carries E's old words
    await produce(settings, msg("E", "The safe word is pumpernickel.", 30, "eve"), msg("F", "Understood.", 31, "fay"))
    has_f = "SELECT count(*) FROM chunks c JOIN documents d ON d.id = c.document_id WHERE d.external_id = 'F'"
    await eventually(lambda: fetchval(settings, has_f))
    await eventually(lambda: index_of("F"), until=lambda r: "pumpernickel" in r[0] and r[3])
    await produce(settings, msg("E", "Never mind.", 40, "eve"))
    await eventually(lambda: index_of("F"), until=lambda r: "pumpernickel" not in r[0] and r[3])
    assert "pumpernickel" not in (await index_of("F"))[2]
    # C is narrowed to another group: D (still g's) loses C's text from its index
    await produce(settings, envelope("C", op="acl", principals=[h], acl_event_time=later(20)))
    await eventually(lambda: index_of("D"), until=lambda r: "quetzal" not in r[0] and r[3])
    _, hashed, lex, _ = await index_of("D")
    assert "quetzal" not in lex and hashed != d_before[1]


async def test_purge_removes_derived_values_and_identities(settings: Settings, pipeline: Any) -> None:
    rt = await pipeline(*STAGES)
    g = principal()
    pu = uuid.uuid4()
    await produce(
        settings,
        envelope(
            "HR/9",
            "directory record",
            principals=[g],
            author_email="omar@corp.example",
            author_name="Omar Nadir",
            structured_fields={"title": "Head of Quokka Research"},
            identities=[{"namespace": "platform_user", "value": str(pu), "verified": True}],
            system="hr",
        ),
        envelope("N/1", "Omar Nadir is the VP of Engineering.", principals=[g], event_time=later(5)),
    )
    await eventually(lambda: fetchval(settings, "SELECT count(*) FROM taxonomy_proposals"))
    assert await fetchval(settings, "SELECT count(*) FROM facts WHERE value = 'Head of Quokka Research'") == 1
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=create_app(rt)), base_url="http://t") as c:
        policy = {"workspace": "default", "source_system": "hr", "max_age_days": 30}
        assert (await c.put("/v1/admin/retention/policies", json=policy, headers=ADMIN)).status_code == 200
        run = await c.post("/v1/admin/retention/run", params={"apply": "true"}, headers=ADMIN)
        assert run.status_code == 200, run.text
        assert sum(b["documents"] for b in run.json()["batches"]) == 1
        # the purged value is gone from the graph, the purged identity from the aliases and the proposals
        assert await fetchval(settings, "SELECT count(*) FROM facts WHERE value = 'Head of Quokka Research'") == 0
        assert await fetchval(settings, "SELECT count(*) FROM person_aliases WHERE value = $1", str(pu)) == 0
        stored = await fetch(settings, "SELECT host_value, host_entity_id FROM taxonomy_proposals")
        assert stored and all(r["host_value"] is None and r["host_entity_id"] is None for r in stored)
        # what N/1 still supports stays (the extracted title)
        assert await fetchval(settings, "SELECT count(*) FROM facts WHERE value = 'VP of Engineering'") >= 1
        gone = await c.get(f"/v1/graph/persons/by-platform-user/{pu}", headers=hdr(g))
        assert gone.status_code == 404


async def test_extracted_identity_key_is_sourced_by_the_documents_that_named_it(
    settings: Settings, pipeline: Any
) -> None:
    """A key the extractor finds in text (``@eid_…``) is derived from those documents (conflicts stage)."""
    rt = await pipeline(*STAGES, "retrieve")
    pub, sec = principal(), principal()
    await produce(settings, envelope("P/1", "Thanks @eid_1a2b3c4d for the review.", principals=[pub]))
    await _drained(settings, 1)
    # S/1 comes later: the extractor resolves the known key itself, and S/1 is still one of its sources
    await produce(
        settings, envelope("S/1", "@eid_1a2b3c4d is leaving next month.", principals=[sec], event_time=later(1))
    )
    await _drained(settings, 2)
    person = await eventually(
        lambda: fetchval(settings, "SELECT person_id FROM person_aliases WHERE namespace = 'herb_eid'")
    )
    sources = await eventually(
        lambda: fetch(
            settings,
            "SELECT d.external_id FROM person_alias_sources s JOIN documents d ON d.id = s.document_id"
            " WHERE s.namespace = 'herb_eid' ORDER BY 1",
        ),
        until=lambda rows: len(rows) == 2,
    )
    assert [r["external_id"] for r in sources] == ["P/1", "S/1"]
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=create_app(rt)), base_url="http://t") as c:
        outside = await c.get(f"/v1/graph/persons/{person}", headers=hdr(pub))
        inside = await c.get(f"/v1/graph/persons/{person}", headers=hdr(pub, sec))
        assert outside.status_code == inside.status_code == 200, outside.text
        assert "herb_eid:eid_1a2b3c4d" not in outside.json()["aliases"]
        assert "herb_eid:eid_1a2b3c4d" in inside.json()["aliases"]
