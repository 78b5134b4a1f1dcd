"""Index context built at ingest (issue 14 §2) on real Kafka + Postgres: speaker, date and the thread's
preceding message go into the index input, never into the stored text; never across an ACL boundary;
an out-of-order arrival re-indexes its follower; arrival order does not change the final index."""

from __future__ import annotations

from typing import Any

from schemas.envelope import ChangeEnvelope, Person
from services.chunk_embedding import content_hash, embedding_hash, load_pending
from services.settings import Settings
from tests.integration.helpers import envelope, eventually, fetch, later, principal, produce
from tests.integration.test_write_path import lexical


def in_thread(env: ChangeEnvelope, thread: str) -> ChangeEnvelope:
    assert env.document is not None
    return env.model_copy(update={"document": env.document.model_copy(update={"thread_external_id": thread})})


def conversation(g: str, h: str) -> dict[str, ChangeEnvelope]:
    def msg(ext: str, text: str, minute: int, who: str, principals: list[str]) -> ChangeEnvelope:
        env = envelope(
            ext, text, principals=principals, event_time=later(minute), author_name=who, author_email=f"{who}@x.example"
        )
        return in_thread(env, "conv-1/session-1")

    return {
        "A": msg("A", "I went to a support group for pottery yesterday.", 0, "Caroline", [g]),
        "S": msg("S", "The vault passphrase is zanzibar.", 1, "Mallory", [h]),  # same thread, other ACL
        "B": msg("B", "Which one was it?", 2, "Melanie", [g]),
        "C": msg("C", "That sounds brave.", 3, "Caroline", [g]),
    }


async def contexts(settings: Settings) -> dict[str, tuple[str, str | None, str, bool]]:
    rows = await fetch(
        settings,
        "SELECT d.external_id, c.text, c.index_context, c.content_hash, c.title, c.embedding IS NOT NULL AS v"
        " FROM chunks c JOIN documents d ON d.id = c.document_id WHERE NOT c.is_parent ORDER BY 1",
    )
    return {r["external_id"]: (r["text"], r["index_context"], r["content_hash"], r["v"]) for r in rows}


def settled(n: int) -> Any:
    return lambda rows: len(rows) == n and all(v[3] for v in rows.values())


async def test_context_is_indexed_not_stored_and_never_crosses_acl(settings: Settings, pipeline: Any) -> None:
    await pipeline("ingest", "embed")
    g, h = principal(), principal()
    conv = conversation(g, h)
    await produce(settings, conv["A"], conv["S"], conv["C"])  # B arrives later, out of order
    await eventually(lambda: contexts(settings), until=settled(3))
    before = await contexts(settings)
    assert "support group" in (before["C"][1] or "")  # C's predecessor (same ACL) is A for now
    await produce(settings, conv["B"])

    def follower_reindexed(rows: dict[str, tuple[str, str | None, str, bool]]) -> bool:
        return settled(4)(rows) and "Which one was it?" in (rows["C"][1] or "")

    rows = await eventually(lambda: contexts(settings), until=follower_reindexed)
    # the stored passage text is the message itself
    assert {k: v[0] for k, v in rows.items()} == {k: e.document.text for k, e in conv.items() if e.document}
    # the index input: previous same-ACL turn, then [date] speaker
    assert rows["B"][1] == "Caroline: I went to a support group for pottery yesterday.\n[8 May 2024] Melanie:"
    assert rows["C"][1] == "Melanie: Which one was it?\n[8 May 2024] Caroline:"
    assert rows["A"][1] == "[8 May 2024] Caroline:"
    # the content hash (embedding cache key) is over exactly what was embedded, and C was re-embedded
    assert rows["C"][2] == embedding_hash(None, rows["C"][1], "That sounds brave.")
    assert rows["C"][2] != before["C"][2]
    # context makes a terse turn findable: "which one" + the previous turn's words
    assert await lexical(settings, "pottery support group", [g]) == ["A", "B"]
    assert await lexical(settings, "Melanie", [g]) == ["B", "C"]  # speaker names are indexed
    # the other-ACL message in the same thread gives nobody context: only its own viewers find it
    assert await lexical(settings, "zanzibar", [g]) == []
    assert await lexical(settings, "zanzibar", [h]) == ["S"]
    assert "zanzibar" not in " ".join(v[1] or "" for k, v in rows.items() if k != "S")


async def test_arrival_order_and_redelivery_do_not_change_the_index(settings_factory: Any, pipeline: Any) -> None:
    g, h = principal(), principal()
    conv = conversation(g, h)
    in_order, shuffled = await settings_factory(), await settings_factory()
    await pipeline("ingest", "embed", settings_override=in_order)
    await pipeline("ingest", "embed", settings_override=shuffled)
    await produce(in_order, *conv.values())
    for key in ("C", "B", "S", "A"):  # newest first, one by one: every arrival is out of order
        await produce(shuffled, conv[key])
    await produce(shuffled, conv["B"], conv["C"])  # redelivered duplicates
    want = await eventually(lambda: contexts(in_order), until=settled(4))

    def same(rows: dict[str, tuple[str, str | None, str, bool]]) -> bool:
        return settled(4)(rows) and {k: v[:3] for k, v in rows.items()} == {k: v[:3] for k, v in want.items()}

    got = await eventually(lambda: contexts(shuffled), until=same)
    assert got == want


async def test_document_children_carry_their_section_path(settings: Settings, pipeline: Any) -> None:
    await pipeline("ingest")
    g = principal()
    intro = " ".join(f"Intro sentence number {i} about the service." for i in range(30))
    kafka = " ".join(f"Kafka step {i} is done carefully." for i in range(30))
    body = f"# Runbook\n\n{intro}\n\n## Kafka\n\nRestart the broker with care. {kafka}\n"
    await produce(settings, envelope("DOC-7", body, principals=[g], kind="document", title="Ops"))
    rows = await eventually(
        lambda: fetch(
            settings,
            "SELECT c.text, c.index_context FROM chunks c WHERE NOT c.is_parent ORDER BY c.ordinal",
        )
    )
    paths = {r["text"]: r["index_context"] for r in rows}
    assert len(paths) > 2, paths
    assert {p for t, p in paths.items() if "Kafka step 2" in t} == {"Runbook > Kafka"}, paths
    assert {p for t, p in paths.items() if "Intro sentence number 29" in t} == {"Runbook"}, paths


async def test_a_display_name_only_author_still_labels_the_context(settings: Settings, pipeline: Any) -> None:
    """A connector that sends only ``author.display_name`` (no email, no platform id) resolves no person, but
    the name still labels the message and its follower's context, and no person is invented from it."""
    await pipeline("ingest")
    g = principal()

    def msg(ext: str, text: str, minute: int, who: str) -> ChangeEnvelope:
        env = in_thread(envelope(ext, text, principals=[g], event_time=later(minute), author_email=None), "t-1")
        return env.model_copy(update={"author": Person(display_name=who)})

    await produce(settings, msg("A", "I adopted a puppy named Oscar.", 0, "Caroline"), msg("B", "So cute!", 1, "Mel"))
    rows = await eventually(lambda: contexts(settings), until=lambda r: len(r) == 2)
    assert rows["A"][1] is not None and rows["A"][1].endswith("Caroline:")
    assert rows["B"][1] is not None and rows["B"][1].startswith("Caroline: I adopted a puppy")
    assert rows["B"][1].endswith("Mel:")
    people = await fetch(settings, "SELECT count(*) AS n FROM people")
    names = await fetch(settings, "SELECT external_id, author_name, author_person_id FROM documents ORDER BY 1")
    assert people[0]["n"] == 0 and [(r["author_name"], r["author_person_id"]) for r in names] == [
        ("Caroline", None),
        ("Mel", None),
    ]


async def test_the_embedder_loads_exactly_the_input_ingest_hashed(settings: Settings, pipeline: Any) -> None:
    """One owner of the embedding input (``services.chunk_embedding``): for every pending child chunk — a thread
    turn with context, a titled document with a section path — what the embedder would embed hashes to the
    ``content_hash`` ingest stored (the vector cache's key)."""
    rt = await pipeline("ingest")
    g, h = principal(), principal()
    conv = conversation(g, h)
    doc = envelope(
        "D", "# Setup\n\n## Kafka\n\nStart the broker first.", principals=[g], title="Runbook", kind="document"
    )
    await produce(settings, *conv.values(), doc)
    assert doc.document is not None
    rows = await eventually(lambda: contexts(settings), until=lambda r: len(r) == 5)
    ids = [r["id"] for r in await fetch(settings, "SELECT id FROM chunks WHERE NOT is_parent")]
    async with rt.pool.acquire() as conn:
        pending = await load_pending(conn, ids, rt.embedding.model)
    assert len(pending) == len(ids) >= 5
    assert all(content_hash(p.input) == p.content_hash for p in pending)
    inputs = {p.input for p in pending}
    assert f"{rows['C'][1]} That sounds brave." in inputs  # the thread context, then the text
    assert f"Runbook\n\nSetup {doc.document.text}" in inputs  # the title, the section path, the text
