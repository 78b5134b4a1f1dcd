"""The pure planning core of consolidation: exact, near-duplicate and contradiction merges, survivor choice, and
the cases that must not merge."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from services.consolidation.rules import Memory, plan, statement_key

pytestmark = pytest.mark.unit

T0 = datetime(2025, 1, 1, tzinfo=UTC)


def mem(i: str, text: str, days: int = 0, vec: list[float] | None = None) -> Memory:
    return Memory(i, text, T0 + timedelta(days=days), None if vec is None else np.asarray(vec, dtype=np.float32))


def test_exact_duplicates_merge_into_one_survivor_whatever_the_case_and_punctuation() -> None:
    merges = plan([mem("a", "Deploy freeze on Fridays."), mem("b", "deploy freeze on fridays", 1)], sim=0.92)
    assert len(merges) == 1 and merges[0].reason == "exact"
    assert {merges[0].survivor, *merges[0].absorbed} == {"a", "b"}


def test_near_duplicates_keep_the_longer_text_and_respect_the_threshold() -> None:
    short = mem("s", "Alice likes dark mode", 0, [1.0, 0.0, 0.1])
    long = mem("l", "Alice likes dark mode in every editor she uses", 1, [1.0, 0.05, 0.1])
    far = mem("f", "Quarterly budget is due in March", 2, [0.0, 1.0, 0.0])
    merges = plan([short, long, far], sim=0.92)
    similar = [m for m in merges if m.reason == "similar"]
    assert len(similar) == 1 and similar[0].survivor == "l" and similar[0].absorbed == ("s",)
    assert similar[0].similarity is not None and similar[0].similarity >= 0.92
    assert not [m for m in plan([short, long, far], sim=0.9999) if m.reason == "similar"]


def test_contradictions_newest_statement_wins() -> None:
    merges = plan([mem("old", "Alice prefers dark mode", 0), mem("new", "Alice prefers light mode now", 30)], sim=0.92)
    assert [(m.reason, m.survivor, m.absorbed) for m in merges] == [("contradiction", "new", ("old",))]
    moved = plan([mem("o", "Bob works at Initech", 0), mem("n", "Bob works at Globex", 9)], sim=0.92)
    assert [(m.survivor, m.absorbed) for m in moved] == [("n", ("o",))]


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("Alice prefers dark mode", "Alice prefers tea"),  # same verb, different things: both stand
        ("Alice prefers dark mode", "Bob prefers light mode"),  # different subjects
        ("Alice prefers dark mode", "Alice does not prefer light mode"),  # negated: never reconciled
        ("Alice might work at Globex", "Alice works at Initech"),  # hedged
    ],
)
def test_compatible_or_unclear_statements_never_merge(a: str, b: str) -> None:
    assert plan([mem("a", a, 0), mem("b", b, 5)], sim=0.92) == []


def test_statement_key_shapes() -> None:
    assert statement_key("Dana reports to Sam") == ("dana", "reports to")
    assert statement_key("preference: Alice prefers the light theme") == ("alice", "prefers", "theme")
    assert statement_key("Ship it on Friday") is None
    assert statement_key("The payments deploy day is Friday") == ("the payments deploy day", "is")
    assert statement_key("Alice's favourite editor is Vim") == ("alice s favourite editor", "is")
    assert statement_key("Alice is on call") == ("alice", "is", "call")  # a person "is" many things at once


def test_an_absorbed_memory_is_not_absorbed_twice() -> None:
    a = mem("a", "Alice likes dark mode", 0, [1.0, 0.0])
    b = mem("b", "Alice likes dark mode", 1, [1.0, 0.0])
    c = mem("c", "Alice likes the dark mode", 2, [1.0, 0.01])
    merges = plan([a, b, c], sim=0.9)
    absorbed = [x for m in merges for x in m.absorbed]
    assert len(absorbed) == len(set(absorbed)) == 2
