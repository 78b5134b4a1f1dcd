"""The second round's pure parts: author match and the merge of thread neighbours."""

from __future__ import annotations

from datetime import UTC, datetime
from types import MappingProxyType

from retriever.hits import Hit, RankedHit
from retriever.multihop import (
    Neighbour,
    boost_named_authors,
    boost_time_expressions,
    has_time_expression,
    is_when_question,
    merge_neighbours,
    name_parts,
    named_in,
)

NOW = datetime(2024, 5, 1, tzinfo=UTC)


def hit(cid: str, content_hash: str | None = None) -> Hit:
    return Hit(cid, f"doc-{cid}", content_hash or f"h-{cid}", None, f"text {cid}", NOW, "user", 0)


def ranked(*pairs: tuple[str, float]) -> list[RankedHit]:
    return [
        RankedHit(hit(c), s, s, MappingProxyType({"lexical": i + 1}), MappingProxyType({}))
        for i, (c, s) in enumerate(pairs)
    ]


def order(hits: list[RankedHit]) -> list[tuple[str, float]]:
    return [(rh.hit.chunk_id, round(rh.score, 6)) for rh in hits]


def test_name_parts_are_capitalised_words_of_the_display_name_without_email() -> None:
    assert name_parts("Marcus Bell <marcus.bell@northwind.example>") == {"Marcus", "Bell"}
    assert name_parts("Dana O'Neil") == {"Dana", "O'Neil"}
    assert name_parts("unknown") == frozenset()
    assert name_parts("The A Team") == {"Team"}  # stopword and single letter dropped
    assert name_parts(None) == frozenset()


def test_named_in_needs_the_capitalised_name_in_the_question() -> None:
    assert named_in("When did Caroline go to the support group?", "Caroline")
    assert named_in("When does Omar's parental leave start?", "Omar Haddad")
    assert named_in("What did Haddad ship?", "Omar Haddad")
    assert not named_in("Who manages the Search team?", "Omar Haddad")
    assert not named_in("will it rain on the dana ridge?", "Dana Will")  # lower-case words are not names
    assert not named_in("When did Caroline go?", None)


def test_boost_named_authors_reorders_and_counts() -> None:
    hits = ranked(("a", 1.0), ("b", 0.8), ("c", 0.5))
    out, n = boost_named_authors(hits, {"b": "Caroline Smith", "c": "Melanie"}, "What did Caroline paint?", 1.5)
    assert order(out) == [("b", 1.2), ("a", 1.0), ("c", 0.5)]
    assert n == 1
    assert dict(out[0].boosts) == {"author": 1.5}
    same, n0 = boost_named_authors(hits, {"b": "Caroline"}, "What did Caroline paint?", 1.0)
    assert order(same) == order(hits) and n0 == 0
    # a who-question asks for another person: the named one is not the answer's author
    for q in ("Who reports to Caroline?", "Whom did Caroline meet?", "who covered while Caroline was away"):
        who, n_who = boost_named_authors(hits, {"b": "Caroline"}, q, 1.5)
        assert order(who) == order(hits) and n_who == 0


def test_merge_neighbours_scores_below_the_seed_and_keeps_the_better_score() -> None:
    hits = ranked(("a", 1.0), ("b", 0.9), ("c", 0.2))
    extra = {"n1": hit("n1"), "c": hit("c")}
    nbs = [Neighbour("a", "n1", 1), Neighbour("b", "c", 1)]
    out = merge_neighbours(hits, nbs, {**{rh.hit.chunk_id: rh.hit for rh in hits}, **extra}, factor=0.5)
    # n1 joins at 0.5 × a; c (already ranked at 0.2) rises to 0.5 × b = 0.45
    assert order(out) == [("a", 1.0), ("b", 0.9), ("n1", 0.5), ("c", 0.45)]
    n1 = next(rh for rh in out if rh.hit.chunk_id == "n1")
    assert dict(n1.arm_ranks) == {"neighbour": 1} and dict(n1.boosts) == {"neighbour": 0.5}
    assert all(rh.score <= 1.0 for rh in out)


def test_merge_neighbours_skips_unfetched_unknown_seed_and_content_duplicates() -> None:
    hits = ranked(("a", 1.0))
    dup = hit("d", content_hash="h-a")  # same content as the seed
    nbs = [Neighbour("a", "gone", 1), Neighbour("zz", "x", 1), Neighbour("a", "d", 1)]
    out = merge_neighbours(hits, nbs, {"a": hits[0].hit, "d": dup, "x": hit("x")}, factor=0.5)
    assert order(out) == [("a", 1.0)]


def test_when_questions_and_time_expressions() -> None:
    for q in (
        "When did Caroline go to the support group?",
        "how long has Omar been on leave?",
        "What year did it ship?",
    ):
        assert is_when_question(q)
    for q in ("What did Caroline paint?", "Who manages Search?", "Is it done since Monday?"):
        assert not is_when_question(q)
    assert has_time_expression("I went yesterday") and has_time_expression("we ship on the 3rd of May")
    assert has_time_expression("back in 2022") and not has_time_expression("That sounds lovely, tell me more")


def test_boost_time_expressions_only_in_a_when_question() -> None:
    hits = [
        RankedHit(Hit(c, f"d-{c}", f"h-{c}", None, t, NOW, "user", 0), s, s, MappingProxyType({}), MappingProxyType({}))
        for c, t, s in (("a", "so proud of her", 1.0), ("b", "I went last week", 0.8), ("c", "fine", 0.5))
    ]
    out, n = boost_time_expressions(hits, "When did she go?", 1.3)
    assert order(out) == [("b", 1.04), ("a", 1.0), ("c", 0.5)] and n == 1
    assert dict(out[0].boosts) == {"when": 1.3}
    same, n0 = boost_time_expressions(hits, "Where did she go?", 1.3)
    assert order(same) == order(hits) and n0 == 0
