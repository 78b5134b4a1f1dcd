"""Zero-LLM pattern extraction: the typed pattern table, negatives, dedup, registry gating, ReDoS bound."""

from __future__ import annotations

import time

import pytest

from extractor.links import SOURCE_DOCUMENT, EntityRef, ExtractedLink, bind_source, dedup_links
from extractor.patterns import BARE_CONFIDENCE, TYPED_CONFIDENCE, extract_links
from services.taxonomy import Registry, load_registry, registry_from_dict

REGISTRY = load_registry()

# (subject type, subject name, predicate, object type or "literal", object name or value)
Fact = tuple[str, str, str, str, str]


def _facts(text: str, registry: Registry = REGISTRY) -> set[Fact]:
    out: set[Fact] = set()
    for link in extract_links(text, registry=registry):
        if link.predicate == "mentioned":
            continue
        if link.object is None:
            out.add((link.subject.type, link.subject.name, link.predicate, "literal", link.value or ""))
        else:
            out.add((link.subject.type, link.subject.name, link.predicate, link.object.type, link.object.name))
    return out


POSITIVE: list[tuple[str, set[Fact]]] = [
    (
        "Alice Smith is the VP of Engineering at Acme Corp.",
        {
            ("person", "Alice Smith", "works_at", "organization", "Acme Corp"),
            ("person", "Alice Smith", "has_title", "literal", "VP of Engineering"),
        },
    ),
    (
        "Dana Lee is a senior software engineer at Globex.",
        {
            ("person", "Dana Lee", "works_at", "organization", "Globex"),
            ("person", "Dana Lee", "has_title", "literal", "senior software engineer"),
        },
    ),
    ("Alice is the VP of Engineering.", {("person", "Alice", "has_title", "literal", "VP of Engineering")}),
    ("Alice founded Acme.", {("person", "Alice", "founded", "organization", "Acme")}),
    ("Bob co-founded Initech in 2019.", {("person", "Bob", "founded", "organization", "Initech")}),
    (
        "Acme was founded by Alice, Bob and Carol.",
        {
            ("person", "Alice", "founded", "organization", "Acme"),
            ("person", "Bob", "founded", "organization", "Acme"),
            ("person", "Carol", "founded", "organization", "Acme"),
        },
    ),
    (
        "Sequoia Capital invested $5M in Acme.",
        {("organization", "Sequoia Capital", "invested_in", "organization", "Acme")},
    ),
    ("Jane Doe invested in Globex.", {("person", "Jane Doe", "invested_in", "organization", "Globex")}),
    ("Alice Smith advises Globex.", {("person", "Alice Smith", "advises", "organization", "Globex")}),
    ("Acme partnered with Globex.", {("organization", "Acme", "partner_of", "organization", "Globex")}),
    (
        "Acme is a strategic partner of Initech.",
        {("organization", "Acme", "partner_of", "organization", "Initech")},
    ),
    ("Initech competes with Acme.", {("organization", "Initech", "competitor_of", "organization", "Acme")}),
    ("Alice attended the Q3 Planning meeting.", {("person", "Alice", "attended", "meeting", "Q3 Planning")}),
    ("Alice works at Acme.", {("person", "Alice", "works_at", "organization", "Acme")}),
    ("Dana joined Acme last week.", {("person", "Dana", "works_at", "organization", "Acme")}),
    (
        "Bob reports to Alice.",
        {("person", "Bob", "reports_to", "person", "Alice"), ("person", "Alice", "manages", "person", "Bob")},
    ),
    (
        "Alice manages Bob.",
        {("person", "Alice", "manages", "person", "Bob"), ("person", "Bob", "reports_to", "person", "Alice")},
    ),
    ("Alice leads the Platform team.", {("person", "Alice", "manages", "team", "Platform")}),
    ("Eve is on the Platform team.", {("person", "Eve", "member_of", "team", "Platform")}),
    ("Eve joined the Data team.", {("person", "Eve", "member_of", "team", "Data")}),
    ("Dan works on Project Phoenix.", {("person", "Dan", "works_on", "project", "Phoenix")}),
    ("Dan owns the Atlas project.", {("person", "Dan", "owns", "project", "Atlas")}),
    (
        "Acme is headquartered in San Francisco.",
        {("organization", "Acme", "located_in", "literal", "San Francisco")},
    ),
    (
        "ACL stands for access control list.",
        {("glossary_term", "ACL", "has_definition", "literal", "access control list")},
    ),
    (
        "@eid_13fdff84 reports to @eid_9b023657.",
        {
            ("person", "eid_13fdff84", "reports_to", "person", "eid_9b023657"),
            ("person", "eid_9b023657", "manages", "person", "eid_13fdff84"),
        },
    ),
]


@pytest.mark.parametrize(("text", "expected"), POSITIVE, ids=[t for t, _ in POSITIVE])
def test_typed_patterns(text: str, expected: set[Fact]) -> None:
    assert _facts(text) == expected


NEGATIVE = [
    "The meeting went well.",
    "Alice reports to the CTO.",
    "She founded nothing.",
    "Alice attended the meeting.",
    "Alice joined planning-onForceX.",
    "Alice is happy at Acme.",
    "Alice works at Engineering.",
    "The Platform was founded by them.",
    "Yesterday was great.",
]


@pytest.mark.parametrize("text", NEGATIVE)
def test_negative_sentences_yield_no_typed_link(text: str) -> None:
    assert _facts(text) == set()


def test_stopword_phrases_never_become_entities() -> None:
    links = extract_links("The meeting went well. Thanks everyone! Yesterday The Team met.", registry=REGISTRY)
    assert links == []


def test_bare_phrases_become_low_confidence_mentions() -> None:
    links = extract_links("We migrated the billing service to Apache Kafka last week.", registry=REGISTRY)
    assert [(lk.predicate, lk.object, lk.confidence) for lk in links] == [
        ("mentioned", EntityRef("glossary_term", "Apache Kafka"), BARE_CONFIDENCE)
    ]
    assert links[0].subject == SOURCE_DOCUMENT
    text = "We migrated the billing service to Apache Kafka last week."
    assert text[links[0].span[0] : links[0].span[1]] == "Apache Kafka"


def test_sentence_initial_single_word_needs_a_mid_sentence_sighting() -> None:
    assert extract_links("Looking forward to it.", registry=REGISTRY) == []
    links = extract_links("Kafka is fast. We love Kafka.", registry=REGISTRY)
    assert [lk.object.name for lk in links if lk.object] == ["Kafka"]


def test_typed_link_ends_are_not_repeated_as_mentions() -> None:
    links = extract_links("Alice founded Acme. Acme grew fast.", registry=REGISTRY)
    assert [lk.predicate for lk in links] == ["founded"]
    assert links[0].confidence == TYPED_CONFIDENCE


def test_person_cues_type_bare_names() -> None:
    text = "Good point, Emma. I agree with Julia Davis on this. Thanks, Julia."
    objects = {lk.object for lk in extract_links(text, registry=REGISTRY) if lk.object}
    assert objects == {EntityRef("person", "Emma"), EntityRef("person", "Julia Davis")}


def test_typed_elsewhere_keeps_the_type_and_clashes_drop() -> None:
    facts = _facts("Bob Jones reports to Alice. Alice invested in Globex.")
    assert ("person", "Alice", "invested_in", "organization", "Globex") in facts
    assert _facts("Alice works for Bob. Bob reports to Carol.") == {
        ("person", "Bob", "reports_to", "person", "Carol"),
        ("person", "Carol", "manages", "person", "Bob"),
    }


def test_dedup_keeps_higher_confidence() -> None:
    a, b = EntityRef("person", "Alice"), EntityRef("organization", "Acme")
    low = ExtractedLink(a, "works_at", b, None, 0.3, (0, 5))
    high = ExtractedLink(a, "works_at", b, None, 0.8, (10, 15))
    tie = ExtractedLink(a, "works_at", EntityRef("organization", "ACME"), None, 0.8, (20, 25))
    assert dedup_links([low, high, tie]) == [high]
    other_title = ExtractedLink(a, "has_title", None, "CEO", 0.8, (0, 1))
    assert len(dedup_links([other_title, ExtractedLink(a, "has_title", None, "CTO", 0.8, (0, 1))])) == 2


def test_repeated_fact_is_extracted_once() -> None:
    links = extract_links("Alice founded Acme. Later, Alice founded Acme again.", registry=REGISTRY)
    assert [lk.predicate for lk in links] == ["founded"]


def test_registry_gates_every_link() -> None:
    narrow = registry_from_dict(
        {
            "version": 2,
            "entity_types": [{"name": "person"}, {"name": "organization"}],
            "predicates": [
                {
                    "name": "works_at",
                    "subject_types": ["person"],
                    "object_types": ["organization"],
                    "exclusive": True,
                    "cardinality": "one",
                    "freshness_half_life_days": 365,
                }
            ],
        }
    )
    links = extract_links("Alice founded Acme. Bob works at Globex. We use Apache Kafka.", registry=narrow)
    assert [(lk.subject.name, lk.predicate, lk.object.name if lk.object else None) for lk in links] == [
        ("Bob", "works_at", "Globex")
    ]


def test_bind_source_replaces_the_placeholder() -> None:
    doc = EntityRef("document", "Q3 notes", ("doc", "42"))
    links = bind_source(extract_links("We use Apache Kafka.", registry=REGISTRY), doc)
    assert links[0].subject == doc


def test_spans_point_into_long_text() -> None:
    filler = "lorem ipsum dolor sit amet. " * 2000
    text = filler + "Alice founded Acme. " + filler
    (link,) = [lk for lk in extract_links(text, registry=REGISTRY) if lk.predicate == "founded"]
    assert text[link.span[0] : link.span[1]] == "Alice founded Acme"


PATHOLOGICAL = {
    "one long capital run": "A" * 100_000,
    "capital words": "Aa " * 33_334,
    "verb repeat": "Alice founded " * 7_143,
    "title repeat": "Alice is the VP of " * 5_300,
    "report chain": "Alice reports to " * 5_900,
    "dots": "A." * 50_000,
    "spaces": "Alice" + " " * 99_990 + "x",
    "eid prefix": "@eid_" + "a" * 99_995,
    "at names": "@A " * 33_000,
    "roster": "Attendees\n" + "Alice Smith, " * 7_700,
    "and chain": "Acme and " * 11_000,
    "realistic": "Alice Smith is the VP of Engineering at Acme Corp. Bob reports to Alice. " * 1_320,
}


@pytest.mark.parametrize("text", PATHOLOGICAL.values(), ids=list(PATHOLOGICAL))
def test_pathological_100k_input_runs_under_one_second(text: str) -> None:
    assert len(text) >= 95_000
    start = time.process_time()
    extract_links(text, registry=REGISTRY)
    assert time.process_time() - start < 1.0
