"""Pure temporal helpers and snapshot diffs of graph reads."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import pytest

from retriever.graph.reads import diff_snapshots
from retriever.graph.temporal import Params, grain_window, temporal_sql
from schemas.graph import EntityBrief, Fact, QueryFactsRequest

AT = datetime(2024, 5, 17, 13, 0, tzinfo=UTC)


def test_grain_windows() -> None:
    assert grain_window(AT, None) is None and grain_window(AT, "unknown") is None
    assert grain_window(AT, "day") == (datetime(2024, 5, 17, tzinfo=UTC), datetime(2024, 5, 18, tzinfo=UTC))
    assert grain_window(AT, "month") == (datetime(2024, 5, 1, tzinfo=UTC), datetime(2024, 6, 1, tzinfo=UTC))
    assert grain_window(AT, "quarter") == (datetime(2024, 4, 1, tzinfo=UTC), datetime(2024, 7, 1, tzinfo=UTC))
    assert grain_window(datetime(2024, 12, 3, tzinfo=UTC), "month")[1] == datetime(2025, 1, 1, tzinfo=UTC)  # type: ignore[index]
    assert grain_window(AT, "year") == (datetime(2024, 1, 1, tzinfo=UTC), datetime(2025, 1, 1, tzinfo=UTC))
    with pytest.raises(ValueError):
        grain_window(AT, "week")


def test_invalid_grain_is_rejected_by_the_request_model() -> None:
    with pytest.raises(ValueError):
        QueryFactsRequest.model_validate({"about": "x", "as_of_grain": "week"})
    assert QueryFactsRequest.model_validate({"about": "x", "as_of_grain": "quarter"}).as_of_grain == "quarter"


def test_temporal_sql_axes() -> None:
    p = Params()
    assert "now()" in temporal_sql(p) and "invalidated_at IS NULL" in temporal_sql(p) and p.values == []
    p = Params()
    sql = temporal_sql(p, believed_as_of=AT)
    assert p.values == [AT, AT] and "recorded_at <= $2" in sql  # belief-only also sets world at the instant
    p = Params()
    temporal_sql(p, as_of=AT, as_of_grain="month")
    assert len(p.values) == 2


def _fact(subject: uuid.UUID, predicate: str, value: str) -> Fact:
    return Fact(
        id=uuid.uuid4(),
        subject=EntityBrief(type="person", id=subject, name="P"),
        predicate=predicate,
        value=value,
        valid_from=AT,
        recorded_at=AT,
        confidence=1.0,
    )


def test_diff_snapshots() -> None:
    s = uuid.uuid4()
    before = [_fact(s, "has_title", "Engineer"), _fact(s, "located_in", "Paris")]
    after = [_fact(s, "has_title", "Manager"), _fact(s, "member_of_x", "Core")]
    diff = diff_snapshots(before, after, axis="world", from_time=AT, to_time=AT)
    assert [(c.before[0].value, c.after[0].value) for c in diff.changed] == [("Engineer", "Manager")]
    assert [f.value for f in diff.added] == ["Core"] and [f.value for f in diff.removed] == ["Paris"]
