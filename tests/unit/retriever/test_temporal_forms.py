"""Dates in a question must not throw evidence away (issue 14 §3): window forms, ambiguity, which-document
dates as a soft boost, state-of-the-world questions as ``as_of``, and autocut never below the limit."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from retriever.boosts import autocut_index
from retriever.compose import is_state_question, plan_dict, resolve_time
from retriever.hits import DEFAULT, Hit
from retriever.ranking import fuse_and_rank
from retriever.temporal_plan import plan_temporal
from schemas.tools import PassageFilters

NOW = datetime(2025, 6, 15, 12, tzinfo=UTC)


def d(y: int, m: int, day: int = 1) -> datetime:
    return datetime(y, m, day, tzinfo=UTC)


def axes(query: str, filters: PassageFilters | None = None):  # type: ignore[no-untyped-def]
    return resolve_time(query, filters or PassageFilters(), as_of=None, believed_as_of=None, grain=None, now=NOW)


def test_between_spans_both_dates_across_phrases_inclusive_of_the_second_day() -> None:
    q = "Between the design review on 2024-03-04 and the launch note on 2024-03-18, did the latency target change?"
    plan = plan_temporal(q, NOW)
    assert (plan.form, plan.kind, plan.range_start, plan.range_end) == (
        "between",
        "range",
        d(2024, 3, 4),
        d(2024, 3, 19),
    )
    assert plan.ambiguities == []  # the second date is part of the window, not "another expression"
    a = axes(q)
    assert (a.date_from, a.date_to, a.as_of, a.boost_range) == (d(2024, 3, 4), d(2024, 3, 19), None, None)
    assert plan_dict(a)["effect"] == "filter"  # type: ignore[index]


@pytest.mark.parametrize(
    ("query", "start"),
    [
        ("After the outage on May 3, 2024, what did the platform team change in the deploy process?", d(2024, 5, 3)),
        ("what changed after 2024-05-03", d(2024, 5, 3)),
        ("since the reorg on 2024-01-15 who joined", d(2024, 1, 15)),
        ("since January 2024", d(2024, 1)),
    ],
)
def test_after_and_since_open_at_the_date(query: str, start: datetime) -> None:
    plan = plan_temporal(query, NOW)
    assert (plan.kind, plan.range_start, plan.range_end) == ("since", start, NOW)
    a = axes(query)
    assert (a.date_from, a.date_to, a.boost_range) == (start, NOW, None)


@pytest.mark.parametrize(
    ("query", "end"),
    [
        ("what was decided before March 2024", d(2024, 3)),  # before A closes at A's start
        ("prior to the launch in Q2 2024, what was the plan", d(2024, 4)),
        ("decisions until 2024-03-04", d(2024, 3, 5)),  # until A keeps A's day
        ("everything till March 2024", d(2024, 4)),
    ],
)
def test_before_and_until_close_at_the_date(query: str, end: datetime) -> None:
    plan = plan_temporal(query, NOW)
    assert (plan.kind, plan.range_start, plan.range_end) == ("before", None, end)
    a = axes(query)
    # closed at A in the plan, but no filter: the note of the change at A (saying what it *was*) is boosted
    assert (a.date_from, a.date_to, a.diff_range, a.as_of) == (None, None, None, None)
    assert a.boost_range == plan.anchor and plan.anchor is not None
    assert plan.anchor[0] <= end <= plan.anchor[1]
    assert plan_dict(a)["effect"] == "boost"  # type: ignore[index]


def test_several_unrelated_dates_give_no_window() -> None:
    for q in ("compare Q1 2024 with Q1 2025", "the 2024-03-04 review and the 2024-05-01 launch"):
        a = axes(q)
        assert a.plan is not None and a.plan.ambiguities, q
        assert (a.date_from, a.date_to, a.as_of, a.boost_range, a.diff_range) == (None, None, None, None, None)
        assert plan_dict(a)["effect"] == "none"  # type: ignore[index]


@pytest.mark.parametrize("query", ["budget in March", "since March", "between Q1 and Q3", "between 2025 and 2023"])
def test_an_ambiguous_plan_never_filters(query: str) -> None:
    a = axes(query)
    assert a.plan is not None and a.plan.ambiguities
    assert (a.date_from, a.date_to, a.as_of, a.boost_range) == (None, None, None, None)


@pytest.mark.parametrize(
    "query",
    [
        "What did the report on 2023-10-22 say about churn?",
        "summarise the standup on March 4, 2024",
        "what did Dana say in March 2024 about pricing",
        "what happened in 2023",
    ],
)
def test_a_date_naming_the_document_is_a_soft_boost(query: str) -> None:
    a = axes(query)
    assert a.plan is not None and a.plan.kind == "range"
    assert (a.date_from, a.date_to, a.as_of) == (None, None, None)
    assert a.boost_range == (a.plan.range_start, a.plan.range_end)
    assert plan_dict(a)["effect"] == "boost"  # type: ignore[index]


@pytest.mark.parametrize(
    ("query", "as_of"),
    [
        ("who led Search in March 2024?", d(2024, 4) - timedelta(microseconds=1)),
        ("What was Compass answer accuracy at the end of March 2025?", d(2025, 4) - timedelta(microseconds=1)),
        ("who owned billing on 2024-02-29", d(2024, 3, 1) - timedelta(microseconds=1)),
        ("who is the manager of Search this year", NOW),  # capped at now
    ],
)
def test_a_question_about_the_state_at_a_time_bounds_facts_and_passages(query: str, as_of: datetime) -> None:
    assert is_state_question(query, plan_temporal(query, NOW))
    a = axes(query)
    assert (a.as_of, a.date_from, a.date_to, a.boost_range) == (as_of, None, None, None)
    assert plan_dict(a)["effect"] == "as_of"  # type: ignore[index]


def test_host_as_of_still_wins() -> None:
    host = d(2024, 1)
    a = resolve_time("the report on 2023-10-22", PassageFilters(), as_of=host, believed_as_of=None, grain=None, now=NOW)
    assert (a.as_of, a.boost_range, a.source) == (host, None, "host")


def _hit(i: int, when: datetime) -> Hit:
    return Hit(f"c{i:02d}", f"d{i}", f"h{i}", None, f"text {i}", when, "user")


def test_boost_range_lifts_the_documents_of_that_day_without_dropping_others() -> None:
    day = (d(2023, 10, 22), d(2023, 10, 23))
    hits = {
        f"c{i:02d}": _hit(
            i,
            d(
                2023,
                10,
                22,
            )
            + timedelta(hours=1)
            if i == 3
            else d(2023, 1, 1),
        )
        for i in range(6)
    }
    arms = {"lexical": [f"c{i:02d}" for i in range(6)]}
    scores = {"lexical": {f"c{i:02d}": 10.0 - i * 0.5 for i in range(6)}}
    plain = fuse_and_rank(arms, hits, "q", NOW, DEFAULT, arm_scores=scores, keep_at_least=10)
    boosted = fuse_and_rank(arms, hits, "q", NOW, DEFAULT, arm_scores=scores, boost_range=day, keep_at_least=10)
    assert plain.hits[0].hit.chunk_id == "c00"
    assert boosted.hits[0].hit.chunk_id == "c03"
    assert {rh.hit.chunk_id for rh in boosted.hits} == set(hits)  # a boost, not a filter
    assert boosted.hits[0].boosts["date"] == DEFAULT.date_boost


def test_autocut_never_trims_below_the_requested_limit() -> None:
    # one strong hit, then a big gap: autocut alone keeps 3, a multi-evidence question asked for 10
    scores = [1.0, 0.95, 0.9, 0.2, 0.19, 0.18, 0.17, 0.16, 0.15, 0.14, 0.13, 0.01]
    assert autocut_index(scores, 3, 0.3) == 3
    hits = {f"c{i:02d}": _hit(i, d(2023, 1, 1)) for i in range(len(scores))}
    arms = {"lexical": list(hits)}
    raw = {"lexical": {f"c{i:02d}": s for i, s in enumerate(scores)}}
    cut = fuse_and_rank(arms, hits, "q", NOW, DEFAULT, arm_scores=raw)
    kept = fuse_and_rank(arms, hits, "q", NOW, DEFAULT, arm_scores=raw, keep_at_least=10)
    assert len(cut.hits) == 3
    assert len(kept.hits) >= 10 and [rh.hit.chunk_id for rh in kept.hits][:3] == [rh.hit.chunk_id for rh in cut.hits]


@pytest.mark.parametrize(
    ("query", "day"),
    [
        ("what did she say on 10.01.2024?", d(2024, 1, 10)),  # dotted: day first
        ("what did she say on 3.2.2024", d(2024, 2, 3)),
        ("the note from 2024/01/10", d(2024, 1, 10)),  # year first
        ("what did she say on 25/01/2024?", d(2024, 1, 25)),  # a first part above 12 is the day
        ("what did she say on 01/25/2024?", d(2024, 1, 25)),  # a second part above 12 is the day
        ("What did they discuss on the 16th of March 2024?", d(2024, 3, 16)),
    ],
)
def test_numeric_and_ordinal_dates_are_days(query: str, day: datetime) -> None:
    plan = plan_temporal(query, NOW)
    assert (plan.grain, plan.range_start, plan.range_end, plan.ambiguities) == ("day", day, day + timedelta(1), [])
    a = axes(query)
    assert (a.as_of, a.date_from, a.date_to, a.boost_range) == (None, None, None, (day, day + timedelta(1)))


def test_slashed_date_with_both_parts_up_to_12_is_an_ambiguity_not_a_guess() -> None:
    plan = plan_temporal("what did she say on 10/01/2024?", NOW)
    assert plan.range_start is None and plan.range_end is None
    assert plan.ambiguities == ["day_month_order: '10/01/2024' could mean 2024-10-01 or 2024-01-10"]
    a = axes("what did she say on 10/01/2024?")
    assert (a.as_of, a.date_from, a.date_to, a.boost_range) == (None, None, None, None)


@pytest.mark.parametrize("text", ["10.13.2024", "32.01.2024", "1.5 million", "2024.01"])
def test_numbers_that_are_not_dates_plan_nothing(text: str) -> None:
    assert plan_temporal(text, NOW).range_start is None
