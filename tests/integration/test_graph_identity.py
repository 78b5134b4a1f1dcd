"""Identity merge, structured ground-truth claims and replay safety of the graph stages."""

from __future__ import annotations

import asyncio
from typing import Any

from services.settings import Settings
from tests.integration.graph_helpers import facts_of
from tests.integration.helpers import envelope, eventually, fetch, fetchval, later, principal, produce

STAGES = ("ingest", "extract", "conflicts")
PLATFORM_USER = "7d9b5a52-2f7e-4f55-b0f4-8f6a1d7f6c11"


async def test_email_and_platform_user_alias_become_one_person(settings: Settings, pipeline: Any) -> None:
    await pipeline(*STAGES)
    g = principal()
    bridge = [{"namespace": "platform_user", "value": PLATFORM_USER, "verified": True}]
    await produce(
        settings,
        envelope("C1/1", "Morning all.", principals=[g], author_email="ana@corp.example", author_name="Ana Ruiz"),
    )
    await eventually(lambda: fetchval(settings, "SELECT count(*) = 1 FROM people"))
    await produce(
        settings,
        envelope(
            "C1/2",
            "Shipping today.",
            principals=[g],
            author_email=None,
            author_name="Ana Ruiz",
            identities=bridge,
            event_time=later(1),
        ),
    )
    await eventually(lambda: fetchval(settings, "SELECT count(*) = 2 FROM people"))
    await produce(
        settings,
        envelope(
            "C1/3",
            "Ana Ruiz reports to Dana Lee.",
            principals=[g],
            author_email="ana@corp.example",
            author_name="Ana Ruiz",
            identities=bridge,
            event_time=later(2),
        ),
    )
    await eventually(lambda: fetchval(settings, "SELECT count(*) = 1 FROM people WHERE merged_into IS NOT NULL"))
    owners = await fetch(
        settings,
        "SELECT DISTINCT person_id FROM person_aliases WHERE namespace IN ('email', 'platform_user')",
    )
    assert len(owners) == 1
    survivor = owners[0]["person_id"]
    assert await fetchval(settings, "SELECT merged_into IS NULL FROM people WHERE id = $1", survivor)
    # the bare name in the text resolves to the one unmerged Ana Ruiz
    facts = await eventually(lambda: facts_of(settings, "Ana Ruiz", [g], "reports_to"))
    assert facts[0].subject.id == survivor
    assert await fetchval(settings, "SELECT count(*) FROM person_merges") == 1


async def test_name_similarity_only_proposes(settings: Settings, pipeline: Any) -> None:
    await pipeline(*STAGES)
    g = principal()
    await produce(
        settings,
        envelope("C1/1", "hi", principals=[g], author_email="kim1@corp.example", author_name="Kim Park"),
        envelope("C1/2", "hi", principals=[g], author_email="kim2@corp.example", author_name="Kim Park"),
    )
    await eventually(lambda: fetchval(settings, "SELECT count(*) = 2 FROM people"))
    await produce(settings, envelope("C1/3", "Kim Park reports to Dana Lee.", principals=[g], event_time=later(3)))
    await eventually(lambda: fetchval(settings, "SELECT count(*) >= 2 FROM person_merge_proposals"))
    assert await fetchval(settings, "SELECT count(*) FROM people WHERE merged_into IS NOT NULL") == 0


async def test_structured_fields_are_author_claims(settings: Settings, pipeline: Any) -> None:
    await pipeline(*STAGES)
    g = principal()
    await produce(
        settings,
        envelope(
            "dir/boss",
            "profile",
            principals=[g],
            author_email="dana@corp.example",
            author_name="Dana Lee",
            system="directory",
        ),
    )
    await produce(
        settings,
        envelope(
            "dir/priya",
            "profile",
            principals=[g],
            author_email="priya@corp.example",
            author_name="Priya Shah",
            system="directory",
            event_time=later(1),
            structured_fields={"title": "Staff Engineer", "manager": "dana@corp.example"},
        ),
    )
    facts = await eventually(lambda: facts_of(settings, "Priya Shah", [g], "reports_to"))
    assert facts[0].object is not None and facts[0].object.name == "Dana Lee" and facts[0].confidence == 1.0
    [title] = await facts_of(settings, "Priya Shah", [g], "has_title")
    assert title.value == "Staff Engineer"
    # a new title supersedes the old one; the old one stays for as-of reads
    await produce(
        settings,
        envelope(
            "dir/priya",
            "profile",
            principals=[g],
            author_email="priya@corp.example",
            author_name="Priya Shah",
            system="directory",
            event_time=later(10),
            structured_fields={"title": "Principal Engineer", "manager": "dana@corp.example"},
        ),
    )

    async def promoted() -> bool:
        now = await facts_of(settings, "Priya Shah", [g], "has_title")
        return [f.value for f in now] == ["Principal Engineer"]

    await eventually(promoted)
    # the first version's evidence left with the edit: its title is retracted, not merely superseded
    rows = await fetch(settings, "SELECT value, status FROM facts WHERE predicate = 'has_title' ORDER BY valid_from")
    assert [(r["value"], r["status"]) for r in rows] == [
        ("Staff Engineer", "retracted"),
        ("Principal Engineer", "active"),
    ]


async def test_replaying_extract_does_not_duplicate_facts(settings: Settings, pipeline: Any) -> None:
    await pipeline(*STAGES)
    g = principal()
    await produce(
        settings,
        envelope("C1/1", "Priya Shah reports to Dana Lee.", principals=[g]),
        envelope("C1/2", "Acme Corp competes with Globex Inc.", principals=[g]),
        envelope("C1/3", "Bob Stone founded Globex Inc.", principals=[g]),
    )
    await eventually(lambda: fetchval(settings, "SELECT count(*) >= 3 FROM facts WHERE predicate <> 'mentioned'"))
    await asyncio.sleep(1.0)
    counts = await fetch(
        settings,
        "SELECT (SELECT count(*) FROM facts) f, (SELECT count(*) FROM fact_evidence) e,"
        " (SELECT count(*) FROM entities) n",
    )
    replay = settings.model_copy(update={"group_prefix": settings.group_prefix + "replay-"})
    rt = await pipeline("extract", settings_override=replay)
    handler = rt.handlers["extract"]
    await eventually(lambda: asyncio.sleep(0, handler.stats.documents >= 3))
    await asyncio.sleep(1.5)
    again = await fetch(
        settings,
        "SELECT (SELECT count(*) FROM facts) f, (SELECT count(*) FROM fact_evidence) e,"
        " (SELECT count(*) FROM entities) n",
    )
    assert dict(again[0]) == dict(counts[0])
    assert await fetchval(settings, "SELECT count(*) FROM facts WHERE invalidated_at IS NOT NULL") == 0
