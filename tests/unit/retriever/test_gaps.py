from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from retriever.gaps import (
    Contradiction,
    GapReport,
    StaleEntity,
    analyze_gaps,
    find_contradictions,
    numbered_citation_list,
    stale_entities,
    unmatched_terms,
)
from retriever.hits import Hit

NOW = datetime(2025, 6, 15, tzinfo=UTC)


def ago(days: float) -> datetime:
    return NOW - timedelta(days=days)


def test_stale_entities_strictly_older_than_window_oldest_first() -> None:
    seen = {"Acme": ago(31), "Globex": ago(30), "Initech": ago(400), "Hooli": ago(0)}
    assert stale_entities(seen, NOW) == [
        StaleEntity("Initech", ago(400), 400.0),
        StaleEntity("Acme", ago(31), 31.0),
    ]
    assert [s.name for s in stale_entities(seen, NOW, stale_after_days=0)] == ["Initech", "Acme", "Globex"]
    assert stale_entities({}, NOW) == []


def test_unmatched_terms_exclude_stopwords_and_fold_plurals() -> None:
    texts = ["The Acme widget catalog lists prices.", "Shipping to EMEA"]
    assert unmatched_terms("What is the pricing for Acme widgets in EMEA?", texts) == ["pricing"]
    assert unmatched_terms("what is the", texts) == []
    assert unmatched_terms("Acme roadmap", []) == ["acme", "roadmap"]


@pytest.mark.parametrize(
    ("negated", "affirmative"),
    [
        ("Acme is not profitable.", "Acme is profitable."),
        ("Acme does not use Kafka", "Acme uses Kafka"),
        ("Acme doesn't use Kafka", "Acme uses Kafka"),
        ("Dana never approved the budget", "Dana approved the budget"),
        ("Bob won't attend the offsite", "Bob will attend the offsite"),
        ("The launch isn’t delayed", "The launch is delayed"),
        ("Dana no longer owns billing", "Dana owns billing"),
    ],
)
def test_contradiction_pairs(negated: str, affirmative: str) -> None:
    found = find_contradictions([negated, "Unrelated filler sentence here.", affirmative])
    assert found == [Contradiction(negated.rstrip("."), affirmative.rstrip("."), 0, 2)]


@pytest.mark.parametrize(
    "texts",
    [
        ["Acme uses Kafka.", "Acme uses Pulsar."],
        ["Acme is not profitable.", "Globex is profitable."],
        ["Acme is not profitable.", "Acme is not hiring."],
        ["Acme is profitable.", "Acme is profitable."],
        ["No.", "Yes."],
        [],
    ],
)
def test_no_false_contradictions(texts: list[str]) -> None:
    assert find_contradictions(texts) == []


def test_contradiction_within_one_text_and_order() -> None:
    text = "Kafka is fast. Postgres is not slow! Kafka is not fast?"
    assert find_contradictions([text]) == [Contradiction("Kafka is not fast", "Kafka is fast", 0, 0)]


def test_analyze_gaps_combines_all_three() -> None:
    report = analyze_gaps(
        "Acme pricing roadmap",
        [("Acme is not profitable. The roadmap is public.", ago(3)), ("Acme is profitable", ago(100))],
        {"Acme": ago(90), "Dana": ago(2)},
        NOW,
    )
    assert report == GapReport(
        stale_entities=(StaleEntity("Acme", ago(90), 90.0),),
        unmatched_terms=("pricing",),
        contradictions=(Contradiction("Acme is not profitable", "Acme is profitable", 0, 1),),
    )


def test_analyze_gaps_empty_and_naive_now() -> None:
    assert analyze_gaps("", [], {}, NOW) == GapReport((), (), ())
    with pytest.raises(ValueError):
        analyze_gaps("x", [], {}, datetime(2025, 1, 1))


def make_hit(cid: str, title: str | None, text: str) -> Hit:
    return Hit(cid, f"doc-{cid}", f"h{cid}", title, text, NOW, "team")


def test_numbered_citation_list() -> None:
    hits = [make_hit("1", "Pricing review", "Prices   go up\nin July."), make_hit("2", None, "Kafka only.")]
    assert numbered_citation_list(hits) == (
        "1. Pricing review: Prices go up in July. [doc:doc-1]\n2. Kafka only. [doc:doc-2]"
    )
    assert numbered_citation_list([]) == ""


def test_numbered_citation_list_snippet_cut_at_word() -> None:
    line = numbered_citation_list([make_hit("1", "  ", "word " * 100)])
    body = line.removeprefix("1. ").removesuffix(" [doc:doc-1]")
    assert body.endswith("word…")
    assert len(body) <= 201
    assert body.removesuffix("…").split() == ["word"] * len(body.removesuffix("…").split())
