"""Loaders for the common JSONL layout, the gold/predictions formats and the demo corpus.

Inline samples only: nothing here reads ``/work/shared``; the demo corpus comes from ``deploy/demo``.
"""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from schemas.envelope import SOURCE_KINDS, DocumentKind
from services.eval.dataset_queries import any_visible, event_visibility, iter_queries, read_gold_any, score_files
from services.eval.datasets import (
    FALLBACK_TIME,
    NAMESPACE,
    DatasetFormatError,
    envelope_uuid,
    group_principal,
    iter_envelopes,
    iter_loaded,
    map_kind,
    system_name,
)
from services.eval.directory_data import DEMO_DATASET, DEMO_HIERARCHY_SPEC, hierarchy_from_spec
from services.eval.gold import (
    GoldFormatError,
    GoldQuery,
    Prediction,
    read_gold,
    read_predictions,
    write_gold,
    write_predictions,
)

DEMO = Path(__file__).resolve().parents[3] / "deploy" / "demo"
NOW = datetime(2026, 1, 1, tzinfo=UTC)


def _event(eid: str, **fields: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "id": eid,
        "dataset": "toy",
        "kind": "chat_message",
        "author": "Caroline",
        "timestamp": "2023-05-08T13:56:00",
        "groups": ["toy:conv-1"],
        "thread": "conv-1/session_1",
        "text": "hello",
        "meta": {},
    }
    return {**base, **fields}


def _write(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


@pytest.fixture
def chat(tmp_path: Path) -> Path:
    _write(
        tmp_path / "events.jsonl",
        [
            _event("c/1", text="Hey Mel!"),
            _event("c/2", author="Melanie", timestamp="2023-05-08T13:56:30", text="Hi Caroline, busy week."),
            _event("c/3", timestamp="2023-05-08T13:57:00", text="I went to a support group."),
            _event("c/4", author="Melanie", timestamp="2023-05-10T09:00:00", text="Two days later."),
        ],
    )
    return tmp_path


# --- deterministic names --------------------------------------------------------------------


def test_ids_are_deterministic_uuid5() -> None:
    assert envelope_uuid("eval-a", "toy", "c/1") == uuid.uuid5(NAMESPACE, "eval-a/toy/c/1")
    assert envelope_uuid("eval-a", "toy", "c/1") == envelope_uuid("eval-a", "toy", "c/1")
    assert envelope_uuid("eval-a", "toy", "c/1") != envelope_uuid("eval-b", "toy", "c/1")
    assert group_principal("toy", "g") == f"group:{uuid.uuid5(NAMESPACE, 'group:toy:g')}"
    assert system_name("HERB Corpus/v2") == "herb-corpus-v2"


@pytest.mark.parametrize(
    ("kind", "expected"),
    [
        ("chat_message", DocumentKind.MESSAGE),
        ("slack_message", DocumentKind.MESSAGE),
        ("meeting_transcript", DocumentKind.MEETING),
        ("meeting_notes", DocumentKind.MEETING),
        ("shared_link", DocumentKind.DOCUMENT),
        ("pull_request", DocumentKind.PULL_REQUEST),
        ("email", DocumentKind.EMAIL),
        ("ticket", DocumentKind.TICKET),
        ("jira_issue", DocumentKind.TICKET),
        ("teams_chat", DocumentKind.MESSAGE),
        ("outlook_mail", DocumentKind.EMAIL),
        ("spreadsheet", DocumentKind.DOCUMENT),
    ],
)
def test_kind_mapping(kind: str, expected: DocumentKind) -> None:
    assert map_kind(kind) is expected


# --- events → envelopes ---------------------------------------------------------------------


def test_envelope_fields(chat: Path) -> None:
    first = next(iter_envelopes(chat, workspace="eval-x", now=NOW))
    assert first.envelope_id == envelope_uuid("eval-x", "toy", "c/1")
    assert first.workspace == "eval-x"
    assert first.source.system == "toy" and first.source.external_id == "c/1"
    assert first.event_time == datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
    assert first.acl.principals == [group_principal("toy", "toy:conv-1")]
    assert first.document is not None and first.document.kind is DocumentKind.MESSAGE
    assert first.document.thread_external_id == "conv-1/session_1"
    assert first.author is not None and first.author.display_name == "Caroline" and first.author.email is None
    assert first.author.identity_keys() == [("toy", "Caroline")]


@pytest.mark.parametrize(
    ("context", "third"),
    [
        ("turn", "I went to a support group."),
        ("speaker", "Caroline: I went to a support group."),
        (
            "speaker_prev",
            "Melanie: Hi Caroline, busy week.\n[8 May 2023] Caroline: I went to a support group.",
        ),
    ],
)
def test_chat_context(chat: Path, context: Any, third: str) -> None:
    texts = [e.document.text for e in iter_envelopes(chat, workspace="w", context=context, now=NOW) if e.document]
    assert texts[2] == third


def test_default_is_the_connector_protocol_the_message_alone(chat: Path) -> None:
    loaded = list(iter_loaded(chat, workspace="w", now=NOW))
    assert [x.envelope.document.text for x in loaded if x.envelope.document] == [x.raw.text for x in loaded]
    first = loaded[0].envelope
    assert first.author is not None and first.author.display_name == "Caroline"
    assert first.document is not None and first.document.thread_external_id == "conv-1/session_1"


def test_speaker_prev_skips_stale_previous_turn(chat: Path) -> None:
    loaded = list(iter_loaded(chat, workspace="w", now=NOW, context="speaker_prev"))
    texts = [x.envelope.document.text for x in loaded if x.envelope.document]
    assert texts[0] == "[8 May 2023] Caroline: Hey Mel!"  # first turn: nothing before it
    assert texts[3] == "[10 May 2023] Melanie: Two days later."  # previous turn > 24 h older
    assert loaded[2].raw.text == "I went to a support group."  # the raw turn is kept


def test_limit_streams_only_the_first_events(chat: Path) -> None:
    assert [e.source.external_id for e in iter_envelopes(chat, workspace="w", limit=2, now=NOW)] == [
        "c/1",
        "c/2",
    ]


def test_documents_people_and_fallbacks(tmp_path: Path) -> None:
    _write(
        tmp_path / "events.jsonl",
        [
            _event(
                "m/1",
                kind="meeting_transcript",
                author=None,
                thread=None,
                text="Attendees: ...",
                meta={"participants": ["eid_1", "Bo Li <Bo.Li@Acme.example>"]},
            ),
            _event(
                "p/1",
                kind="pull_request",
                author="eid_1",
                timestamp=None,
                text="Fix the cache\nbody",
                meta={"reviewers": ["eid_2"], "link": "https://example.com/pr/1"},
            ),
            _event(
                "d/1",
                kind="design_doc",
                author="ann@acme.example",
                timestamp="2024-01-01T10:00:00+02:00",
                text="A doc",
                meta={"title": "Cache design"},
            ),
        ],
    )
    _write(tmp_path / "people.jsonl", [{"id": "eid_1", "name": "Ann Lee"}, {"id": "eid_2", "name": "Raj Iyer"}])
    meeting, pr, design = list(iter_envelopes(tmp_path, workspace="w", now=NOW, synthetic_emails=True))
    assert meeting.author is None and meeting.document is not None
    assert meeting.document.kind is DocumentKind.MEETING and meeting.document.text == "Attendees: ..."
    assert [(p.display_name, p.email, p.role) for p in meeting.participants] == [
        ("Ann Lee", "ann.lee@toy.example", "participant"),
        ("Bo Li", "bo.li@acme.example", "participant"),
    ]
    assert pr.event_time == FALLBACK_TIME
    assert pr.document is not None and pr.document.title == "Fix the cache"
    assert pr.source.url == "https://example.com/pr/1"
    assert pr.author is not None and pr.author.display_name == "Ann Lee"
    assert [(p.display_name, p.role) for p in pr.participants] == [("Raj Iyer", "reviewer")]
    assert design.document is not None and design.document.kind is DocumentKind.DOCUMENT
    assert design.document.title == "Cache design"
    assert design.event_time == datetime(2024, 1, 1, 8, 0, tzinfo=UTC)
    assert design.author is not None and design.author.email == "ann@acme.example"


def test_no_synthetic_email_by_default(chat: Path) -> None:
    assert all(e.author and e.author.email is None for e in iter_envelopes(chat, workspace="w", now=NOW))


def test_future_timestamps_and_time_offset(tmp_path: Path) -> None:
    _write(tmp_path / "events.jsonl", [_event("f/1", timestamp="2027-07-16T15:44:00"), _event("f/2")])
    with pytest.raises(DatasetFormatError) as err:
        list(iter_envelopes(tmp_path, workspace="w", now=NOW))
    assert err.value.line == 1 and err.value.field == "timestamp"
    skipped = list(iter_envelopes(tmp_path, workspace="w", now=NOW, on_future="skip"))
    assert [e.source.external_id for e in skipped] == ["f/2"]
    clamped = list(iter_envelopes(tmp_path, workspace="w", now=NOW, on_future="clamp"))
    assert clamped[0].event_time == NOW
    shifted = list(iter_envelopes(tmp_path, workspace="w", now=NOW, time_offset=timedelta(days=-1095)))
    assert shifted[0].event_time == datetime(2024, 7, 16, 15, 44, tzinfo=UTC)


def test_herb_default_offset(tmp_path: Path) -> None:
    _write(tmp_path / "events.jsonl", [_event("h/1", dataset="herb", timestamp="2027-07-16T15:44:00")])
    (env,) = iter_envelopes(tmp_path, workspace="w", now=NOW)
    assert env.event_time == datetime(2024, 7, 19, 15, 44, tzinfo=UTC)  # 156 weeks earlier, same weekday


def test_invalid_event_names_line_and_field(tmp_path: Path) -> None:
    bad = _event("x/2")
    del bad["kind"]
    _write(tmp_path / "events.jsonl", [_event("x/1"), bad])
    with pytest.raises(DatasetFormatError) as err:
        list(iter_envelopes(tmp_path, workspace="w", now=NOW))
    assert err.value.line == 2 and err.value.field == "kind"
    assert "line=2" in str(err.value)


# --- queries and gold format ----------------------------------------------------------------


def _query(qid: str, **fields: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "qid": qid,
        "dataset": "toy",
        "split": "dev",
        "query": "When did Caroline go to the support group?",
        "gold_ids": ["c/3"],
        "answer": "7 May 2023",
        "category": "temporal",
        "groups": ["toy:conv-1"],
        "as_of": "2023-10-22T09:55:00",
        "meta": {},
    }
    return {**base, **fields}


def test_queries_map_to_gold(tmp_path: Path) -> None:
    _write(
        tmp_path / "queries.jsonl",
        [
            _query("q0"),
            _query(
                "q1",
                gold_ids=[],
                category="adversarial",
                answer=None,
                as_of=None,
                meta={"subjects": ["Caroline"]},
            ),
        ],
    )
    q0, q1 = iter_queries(tmp_path)
    assert q0.viewer.groups == (group_principal("toy", "toy:conv-1"),) and q0.viewer.principal_id is None
    assert q0.expected_doc_ids == ("c/3",) and q0.answer == "7 May 2023"
    assert q0.as_of == datetime(2023, 10, 22, 9, 55, tzinfo=UTC)
    assert q1.expected_doc_ids == () and q1.as_of is None and q1.subjects == ("Caroline",)
    assert len(list(iter_queries(tmp_path, limit=1))) == 1


def test_gold_roundtrip_and_sniffing(tmp_path: Path) -> None:
    _write(tmp_path / "queries.jsonl", [_query("q0")])
    gold = list(iter_queries(tmp_path))
    write_gold(tmp_path / "gold.jsonl", gold)
    assert read_gold(tmp_path / "gold.jsonl") == gold
    assert read_gold_any(tmp_path / "gold.jsonl") == gold
    assert read_gold_any(tmp_path / "queries.jsonl") == gold
    preds = [Prediction(qid="q0", doc_ids=["c/3", "c/1"], doc_scores=[2.0, 1.0])]
    write_predictions(tmp_path / "p.jsonl", preds)
    assert read_predictions(tmp_path / "p.jsonl") == preds


@pytest.mark.parametrize(
    ("line", "field", "fragment"),
    [
        ({"qid": "q2", "query": "x", "viewer": {"groups": ["team-search"]}}, "viewer.groups.0", "pattern"),
        ({"qid": "q2", "query": "x", "mode": "fastest"}, "mode", "vector_first"),
        ({"qid": "q2", "query": "x", "expected_ids": []}, "expected_ids", "Extra inputs"),
        ({"qid": "q1", "query": "again"}, "qid", "duplicate qid"),
    ],
)
def test_gold_errors_name_line_and_field(tmp_path: Path, line: dict[str, Any], field: str, fragment: str) -> None:
    path = tmp_path / "gold.jsonl"
    path.write_text(json.dumps({"qid": "q1", "query": "ok"}) + "\n\n" + json.dumps(line) + "\n", encoding="utf-8")
    with pytest.raises(GoldFormatError) as err:
        read_gold(path)
    assert err.value.line == 3 and err.value.field == field and fragment in str(err.value)
    assert str(path) in str(err.value)


def test_malformed_json_names_line(tmp_path: Path) -> None:
    path = tmp_path / "p.jsonl"
    path.write_text('{"qid": "q1"}\n{"qid": \n', encoding="utf-8")
    with pytest.raises(GoldFormatError, match="invalid JSON") as err:
        read_predictions(path)
    assert err.value.line == 2


def test_viewer_principals() -> None:
    g = group_principal("toy", "a")
    q = GoldQuery(qid="q", query="x", viewer={"principal_id": "user:" + str(uuid.UUID(int=1)), "groups": [g, g]})
    assert q.viewer.groups == (g,)
    assert q.viewer.principals() == frozenset({g, "user:" + str(uuid.UUID(int=1))})


def test_score_files_end_to_end(tmp_path: Path, chat: Path) -> None:
    _write(
        tmp_path / "events.jsonl",
        [
            *map(json.loads, (chat / "events.jsonl").read_text().splitlines()),
            _event("s/1", groups=["toy:secret"]),
        ],
    )
    _write(tmp_path / "queries.jsonl", [_query("q0"), _query("q1", gold_ids=["c/1"])])
    write_predictions(
        tmp_path / "p.jsonl",
        [Prediction(qid="q0", doc_ids=["c/1", "c/3"]), Prediction(qid="q1", doc_ids=["s/1", "c/1"])],
    )
    report = score_files(tmp_path / "queries.jsonl", tmp_path / "p.jsonl", events=tmp_path)
    assert report.leak_rate == pytest.approx(0.5) and report.leaked_qids == ("q1",)
    assert report.overall is not None and report.overall.mrr == pytest.approx((0.5 + 0.5) / 2)


# --- the repository's demo corpus -----------------------------------------------------------


def test_demo_corpus_loads() -> None:
    envelopes = list(iter_envelopes(DEMO, workspace="eval-demo", now=NOW))
    assert 80 <= len(envelopes) <= 120
    assert len({e.envelope_id for e in envelopes}) == len(envelopes)
    assert {e.source.system for e in envelopes} == {DEMO_DATASET}
    assert {e.document.kind for e in envelopes if e.document} == set(SOURCE_KINDS)
    emails = {e.author.email for e in envelopes if e.author}
    assert len(emails) == 12 and all(m and m.endswith("@northwind.example") for m in emails)
    assert all(e.acl.principals for e in envelopes)


def test_demo_gold_ids_exist_and_are_visible() -> None:
    visibility = event_visibility(DEMO)
    visible = any_visible(visibility)
    queries = list(iter_queries(DEMO))
    assert 30 <= len(queries) <= 45
    assert {q.category for q in queries} == {"single_hop", "multi_hop", "temporal", "relational", "acl"}
    assert len({q.qid for q in queries}) == len(queries)
    for q in queries:
        assert q.viewer.groups, q.qid
        for gold_id in q.expected_doc_ids:
            assert gold_id in visibility, (q.qid, gold_id)
            assert visible(q.viewer.principals(), gold_id), (q.qid, gold_id)


def test_demo_acl_queries_have_private_events_the_viewer_cannot_see() -> None:
    visibility = event_visibility(DEMO)
    private = {group_principal(DEMO_DATASET, g) for g in ("exec-private", "dm-ana-omar")}
    private_ids = {i for i, p in visibility.items() if p <= private}
    assert len(private_ids) >= 10
    acl = [q for q in iter_queries(DEMO) if q.category == "acl"]
    assert sum(1 for q in acl if not q.expected_doc_ids) >= 3
    hidden = [q for q in acl if not (q.viewer.principals() & private)]
    assert hidden and not any(set(q.expected_doc_ids) & private_ids for q in hidden)


def test_demo_hierarchy_is_reproducible_and_complete() -> None:
    on_disk = json.loads((DEMO / "org_hierarchy.json").read_text(encoding="utf-8"))
    assert on_disk == hierarchy_from_spec(DEMO_DATASET, DEMO_HIERARCHY_SPEC)
    groups = {p for principals in event_visibility(DEMO).values() for p in principals}
    assert groups == {group_principal(DEMO_DATASET, g) for g in DEMO_HIERARCHY_SPEC}
    search = on_disk["groups"][group_principal(DEMO_DATASET, "team-search").removeprefix("group:")]
    assert search["level"] == "team" and search["name"] == "team-search"
    assert search["parent"] == group_principal(DEMO_DATASET, "div-engineering").removeprefix("group:")


def test_hierarchy_rejects_unknown_parent() -> None:
    with pytest.raises(ValueError, match="parent"):
        hierarchy_from_spec("toy", {"team-a": ("team", "div-missing")})


def test_event_that_cannot_become_an_envelope_names_the_field(tmp_path: Path) -> None:
    _write(tmp_path / "events.jsonl", [_event("x" * 600)])
    with pytest.raises(DatasetFormatError) as err:
        list(iter_envelopes(tmp_path, workspace="w", now=NOW))
    assert err.value.line == 1 and err.value.field == "source.external_id"
