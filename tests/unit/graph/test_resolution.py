"""Pure conflict-resolution rules: normalization, re-evidence, exclusive close, corrections, merges."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

from services.conflicts.resolution import (
    KeyOwner,
    SlotFact,
    find_reusable,
    name_similarity,
    plan_merges,
    resolve_exclusive,
)
from services.ids import entity_uuid, fact_uuid
from services.names import normalize_name

T0 = datetime(2024, 1, 1, tzinfo=UTC)


def t(days: int) -> datetime:
    return T0 + timedelta(days=days)


def fact(
    target: str, start: int, end: int | None = None, closed_by: uuid.UUID | None = None, recorded: int = 0
) -> SlotFact:
    return SlotFact(uuid.uuid4(), target, t(start), t(end) if end is not None else None, closed_by, t(recorded))


def test_normalize_dedups_case_punctuation_and_org_suffix() -> None:
    assert normalize_name("  Acme,  Inc. ", "organization") == normalize_name("ACME", "organization") == "acme"
    assert normalize_name("Acme Inc", "glossary_term") == "acme inc"
    assert normalize_name("O'Brien-Smith") == "o brien-smith"
    assert entity_uuid("w", "organization", "acme") == entity_uuid("w", "organization", "acme")
    assert entity_uuid("w", "organization", "acme") != entity_uuid("w", "product", "acme")


def test_fact_identity_is_deterministic_and_generational() -> None:
    s = uuid.uuid4()
    assert fact_uuid("w", s, "p", "v:x", T0) == fact_uuid("w", s, "p", "v:x", T0)
    assert fact_uuid("w", s, "p", "v:x", T0, 1) != fact_uuid("w", s, "p", "v:x", T0)


def test_re_evidence_reuses_covering_fact_and_never_moves_bounds() -> None:
    a = fact("e:dana", 0, 10)
    b = fact("e:sam", 10)
    assert find_reusable([a, b], "e:dana", t(5), exclusive=True) == a
    assert find_reusable([a, b], "e:sam", t(20), exclusive=True) == b
    # same state asserted earlier than known, nothing in between -> reuse (bounds unchanged)
    assert find_reusable([b], "e:sam", t(5), exclusive=True) == b
    # dana again after sam -> a new fact
    assert find_reusable([a, b], "e:dana", t(30), exclusive=True) is None
    # non-exclusive: any active fact of the target
    assert find_reusable([a], "e:dana", t(99), exclusive=False) == a


def test_exclusive_newer_value_closes_previous_winner() -> None:
    a, b = fact("e:dana", 0), fact("e:sam", 10, recorded=1)
    updates = {u.fact_id: u for u in resolve_exclusive([a, b])}
    assert updates[a.id].valid_to == t(10) and updates[a.id].closed_by == b.id
    assert updates[a.id].status == "superseded" and not updates[a.id].invalidate
    assert b.id not in updates  # stays open: the one current winner


def test_out_of_order_insert_is_chained_between() -> None:
    a, c = fact("e:a", 0, 20), fact("e:c", 20)
    a = SlotFact(a.id, a.target, a.valid_from, t(20), c.id, a.recorded_at)
    b = fact("e:b", 10, recorded=5)
    updates = {u.fact_id: u for u in resolve_exclusive([a, b, c])}
    assert updates[a.id].valid_to == t(10) and updates[a.id].closed_by == b.id
    assert updates[b.id].valid_to == t(20) and updates[b.id].closed_by == c.id


def test_same_valid_time_different_value_is_a_correction() -> None:
    old, new = fact("v:cto", 0, recorded=0), fact("v:ceo", 0, recorded=1)
    [u] = resolve_exclusive([old, new])
    assert u.fact_id == old.id and u.invalidate and u.status == "corrected"


def test_retracted_closer_reopens_previous() -> None:
    closer = uuid.uuid4()
    a = fact("e:dana", 0, 10, closed_by=closer)  # its closer is gone (not in the active set)
    [u] = resolve_exclusive([a])
    assert u.fact_id == a.id and u.valid_to is None and u.closed_by is None and u.status == "active"


def test_source_stated_end_is_kept() -> None:
    a = fact("e:dana", 0, 5)  # closed_by None: the source said it ended
    assert resolve_exclusive([a]) == []


def test_strong_keys_merge_names_never_do() -> None:
    p1, p2, p3 = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
    keys = [KeyOwner("email", "a@x", False, p1), KeyOwner("platform_user", "u1", False, p2)]
    [m] = plan_merges([(p1, keys)])
    assert (m.source, m.target) == (p2, p1) and m.reason == "platform_user:u1"
    # an unverified non-strong key does not merge
    weak = [KeyOwner("email", "a@x", False, p1), KeyOwner("slack", "U1", False, p3)]
    assert plan_merges([(p1, weak)]) == []
    assert plan_merges([(p1, [KeyOwner("email", "a@x", False, p1), KeyOwner("slack", "U1", True, p3)])])
    # chains collapse onto one survivor
    merges = plan_merges(
        [(p1, keys), (p2, [KeyOwner("platform_user", "u1", True, p2), KeyOwner("email", "c@x", False, p3)])]
    )
    assert {(m.source, m.target) for m in merges} == {(p2, p1), (p3, p1)}


def test_name_similarity_scores() -> None:
    assert name_similarity("Kim Park", "kim  park") == 1.0
    assert name_similarity("Park Kim", "Kim Park") == 0.9
    assert name_similarity("K. Park", "Kim Park") == 0.7
    assert name_similarity("Kim Park", "Lee Chan") == 0.0
