"""Pure collaboration rules: pairs per document and exponential decay."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest

from services.collaboration.weights import MAX_PEOPLE, aggregate, document_pairs, pair
from services.decay import HALF_LIFE_DAYS, decay_factor, decayed

T = datetime(2024, 1, 1, tzinfo=UTC)


def test_decay_halves_every_half_life() -> None:
    assert decay_factor(timedelta(0)) == 1.0
    assert decay_factor(timedelta(days=HALF_LIFE_DAYS)) == pytest.approx(0.5)
    assert decayed(4.0, T, T + timedelta(days=2 * HALF_LIFE_DAYS)) == pytest.approx(1.0)
    assert decay_factor(timedelta(days=-5)) == 1.0  # clock skew never inflates


def test_aggregate_is_weight_at_last_seen() -> None:
    count, last, weight = aggregate([(1.0, T), (1.0, T + timedelta(days=HALF_LIFE_DAYS))])
    assert count == 2 and last == T + timedelta(days=HALF_LIFE_DAYS) and weight == pytest.approx(1.5)
    with pytest.raises(ValueError):
        aggregate([])


def test_document_pairs_are_unordered_and_bounded() -> None:
    a, b, c, d = (uuid.uuid4() for _ in range(4))
    pairs = document_pairs(a, [b, c, a], thread_authors=[d, b, a])
    keyed = {(x, y): (reason, w) for x, y, reason, w in pairs}
    assert keyed[pair(a, b)] == ("co_participant", 1.0) and keyed[pair(b, c)] == ("co_participant", 1.0)
    assert keyed[pair(a, d)] == ("thread", 0.5)
    assert len(pairs) == 4  # a-b, a-c, b-c, a-d (b already co-participant, self skipped)
    crowd = [uuid.uuid4() for _ in range(MAX_PEOPLE + 1)]
    assert document_pairs(None, crowd, []) == []
