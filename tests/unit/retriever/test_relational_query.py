from __future__ import annotations

import time

import pytest

from retriever.graph.relational_query import (
    PREDICATES,
    SYMMETRIC_PREDICATES,
    RelationalQuery,
    parse_relational_query,
)

CASES = [
    ("who founded Acme", "founded", "Acme", "incoming"),
    ("Who co-founded Acme Robotics?", "founded", "Acme Robotics", "incoming"),
    ("founders of Acme", "founded", "Acme", "incoming"),
    ("who are the founders of Acme?", "founded", "Acme", "incoming"),
    ("Acme's founders", "founded", "Acme", "incoming"),
    ("what companies did Dana found?", "founded", "Dana", "outgoing"),
    ("who invested in Globex", "invested_in", "Globex", "incoming"),
    ("investors in Globex?", "invested_in", "Globex", "incoming"),
    ("what did Sequoia invest in", "invested_in", "Sequoia", "outgoing"),
    ("who advises Initech", "advises", "Initech", "incoming"),
    ("advisors to Initech", "advises", "Initech", "incoming"),
    ("who does Dana advise?", "advises", "Dana", "outgoing"),
    ("partners of Acme", "partner_of", "Acme", "outgoing"),
    ("who competes with Acme?", "competitor_of", "Acme", "outgoing"),
    ("Acme's competitors", "competitor_of", "Acme", "outgoing"),
    ("who attended MIT", "attended", "MIT", "incoming"),
    ("where did Dana go to school?", "attended", "Dana", "outgoing"),
    ("who works at Globex", "works_at", "Globex", "incoming"),
    ("who works for Globex?", "works_at", "Globex", "incoming"),
    ("employees of Globex", "works_at", "Globex", "incoming"),
    ("where does Dana work?", "works_at", "Dana", "outgoing"),
    ("who reports to Dana", "reports_to", "Dana", "incoming"),
    ("Dana's direct reports", "reports_to", "Dana", "incoming"),
    ("who does Dana report to?", "reports_to", "Dana", "outgoing"),
    ("who manages Dana", "manages", "Dana", "incoming"),
    ("who is Dana's manager?", "manages", "Dana", "incoming"),
    ("who is Dana’s boss", "manages", "Dana", "incoming"),
    ("who leads the Platform team", "manages", "Platform team", "incoming"),
    ("who does Dana manage", "manages", "Dana", "outgoing"),
    ("what does Dana work on?", "works_on", "Dana", "outgoing"),
    ("what is Dana working on", "works_on", "Dana", "outgoing"),
    ("who works on Project Atlas?", "works_on", "Project Atlas", "incoming"),
    ("who is on the Platform team?", "member_of", "Platform", "incoming"),
    ("members of the Platform team", "member_of", "Platform", "incoming"),
    ("members of Data Science", "member_of", "Data Science", "incoming"),
    ("what team is Dana on", "member_of", "Dana", "outgoing"),
    ("  who   founded   Acme  ?? ", "founded", "Acme", "incoming"),
    ('who founded "Acme"?', "founded", "Acme", "incoming"),
]


@pytest.mark.parametrize(("query", "predicate", "seed", "direction"), CASES)
def test_parses(query: str, predicate: str, seed: str, direction: str) -> None:
    assert parse_relational_query(query) == RelationalQuery(predicate, seed, direction)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("query", "role", "seed"),
    [
        ("who is the CEO of Acme?", "ceo", "Acme"),
        ("Who was the CFO at Globex", "cfo", "Globex"),
        ("who is Acme's CTO", "cto", "Acme"),
    ],
)
def test_roles(query: str, role: str, seed: str) -> None:
    assert parse_relational_query(query) == RelationalQuery("works_at", seed, "incoming", role)


@pytest.mark.parametrize(
    "query",
    [
        "",
        "?",
        "what is our pricing policy",
        "who is Dana",
        "who founded it?",
        "who works at them",
        "tell me about Acme founders",
        "founders of",
        "who founded ???",
        "summarize the Q3 board meeting",
    ],
)
def test_not_relational(query: str) -> None:
    assert parse_relational_query(query) is None


def test_seed_bounded_to_80_chars() -> None:
    assert parse_relational_query("who founded " + "A" * 80) == RelationalQuery("founded", "A" * 80, "incoming")
    assert parse_relational_query("who founded " + "A" * 81) is None


def test_every_predicate_is_known() -> None:
    for _, predicate, _, _ in CASES:
        assert predicate in PREDICATES
    assert {c[1] for c in CASES} == set(PREDICATES)
    assert set(PREDICATES) >= SYMMETRIC_PREDICATES


@pytest.mark.parametrize(
    "text",
    [
        "who founded " + "a" * 50_000,
        "who " * 12_500,
        "a's " * 12_500,
        "who founded " + "x " * 25_000 + "?",
        "?" * 50_000,
        " " * 50_000 + "who founded Acme",
        "who is " + "'s " * 60,  # under the length cap
        "members of the " + "team " * 35,
        "who is the " + "ceo of " * 25,
    ],
)
def test_pathological_inputs_finish_fast(text: str) -> None:
    start = time.perf_counter()
    parse_relational_query(text)
    assert time.perf_counter() - start < 0.5
