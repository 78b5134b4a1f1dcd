"""The envelope contract under hostile input, without the stack: HTTP ingress and the ingest stage apply
ONE function (``validate_envelope`` on JSON parsed by ``load_json``), so whatever the door accepts, the
stage accepts unchanged; whatever it refuses is refused naming the field."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ingest.handler import parse_envelope
from schemas.envelope import ChangeEnvelope, envelope_from_json, validate_envelope
from schemas.validation import Rejected, load_json
from services.errors import InvalidPayloadError, UnresolvedAuthorError
from services.kafka.records import Record
from tests.reliability.strategies import FUZZ, deep_json, dumps, envelopes, nested


def base(**over: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "envelope_id": str(uuid.uuid4()),
        "source": {"system": "slack", "external_id": "C/1"},
        "event_time": "2024-05-08T13:56:00Z",
        "document": {"kind": "message", "title": "t", "text": "hello"},
        "author": {"email": "a@example.com", "display_name": "A"},
        "acl": {"principals": [f"group:{uuid.uuid4()}"]},
    }
    body.update(over)
    return body


def record(value: bytes) -> Record:
    return Record(topic="t", partition=0, offset=0, key=b"k", value=value)


def door(raw: bytes) -> ChangeEnvelope | Rejected:
    """What HTTP ingress does with a body: parse, validate (the same calls as services/api/ingress.py)."""
    try:
        return validate_envelope(load_json(raw))
    except Rejected as exc:
        return exc


def assert_named(exc: Rejected) -> None:
    assert exc.field and exc.errors, exc
    for e in exc.errors:
        assert set(e) == {"field", "msg", "type"} and e["field"], e
        json.dumps(e).encode("utf-8")  # always renderable


@FUZZ
@given(envelopes())
def test_accepted_at_the_door_means_accepted_by_ingest(body: dict[str, Any]) -> None:
    out = door(dumps(body))
    if isinstance(out, Rejected):
        assert_named(out)
        with pytest.raises((InvalidPayloadError, UnresolvedAuthorError)) as info:
            parse_envelope(record(dumps(body)))  # the Kafka path refuses it too, naming the same field
        assert getattr(info.value, "context", {}).get("field", getattr(info.value, "field", None)) == out.field
        return
    produced = out.model_dump_json().encode()  # the bytes ingress produces
    assert parse_envelope(record(produced)) == out  # ingest applies exactly what was accepted
    assert envelope_from_json(produced).model_dump_json().encode() == produced  # and it is a fixed point


@pytest.mark.parametrize(
    ("over", "field"),
    [
        ({"document": {"kind": "message", "text": "a\x00b"}}, "document.text"),
        ({"document": {"kind": "message", "text": "a\ud800b"}}, "document.text"),
        ({"document": {"kind": "message", "text": "ok", "title": "\x00"}}, "document.title"),
        (
            {"document": {"kind": "message", "text": "ok", "thread_external_id": "t\udfff"}},
            "document.thread_external_id",
        ),
        ({"source": {"system": "slack", "external_id": "C\x00"}}, "source.external_id"),
        ({"source": {"system": "slack", "external_id": "C", "url": "http://x/\x00"}}, "source.url"),
        ({"author": {"email": "a\x00@example.com"}}, "author.email"),
        ({"author": {"email": "a@example.com", "display_name": "\ud800"}}, "author.display_name"),
        (
            {"author": {"email": "a@example.com", "identities": [{"namespace": "slack", "value": "U\x00"}]}},
            "author.identities.0.value",
        ),
        ({"participants": [{"email": "p@example.com", "role": "r\x00"}]}, "participants.0.role"),
        ({"structured_fields": {"title\x00": "x"}}, "structured_fields.title\\x00"),
        ({"structured_fields": {"title": "x\x00"}}, "structured_fields.title"),
        ({"structured_fields": {"title": {"deep": ["ok", "\ud800"]}}}, "structured_fields.title.deep.1"),
        ({"structured_fields": nested(33)}, "structured_fields"),
        ({"structured_fields": nested(256)}, "structured_fields"),
        ({"structured_fields": "DEEP990"}, "structured_fields"),
        ({"event_time": "1990-01-01T00:30:00+01:00"}, "event_time"),  # 1989 in UTC
        ({"event_time": "9999-12-31T23:00:00-02:00"}, "event_time"),  # overflows when moved to UTC
        ({"event_time": "0001-01-01T00:30:00+01:00"}, "event_time"),
        ({"acl": {"principals": [], "acl_event_time": "1990-01-01T00:59:00+01:00"}}, "acl.acl_event_time"),
        ({"acl": {"principals": [], "acl_event_time": "9999-12-31T23:59:59-14:00"}}, "acl.acl_event_time"),
        ({"author": None, "structured_fields": {"title": "CTO"}}, "author"),
        ({"author": {"display_name": "No Keys"}, "structured_fields": {"title": "CTO"}}, "author"),
    ],
)
def test_refused_at_the_door_and_on_the_kafka_path_naming_the_field(over: dict[str, Any], field: str) -> None:
    if over.get("structured_fields") == "DEEP990":  # beyond what json.dumps can write: built as text
        raw = dumps(base()).replace(b'"author"', b'"structured_fields": ' + deep_json(990).encode() + b', "author"', 1)
    else:
        raw = dumps(base(**over))
    out = door(raw)
    assert isinstance(out, Rejected), out
    assert_named(out)
    assert out.field.startswith(field), (out.field, field)
    with pytest.raises((InvalidPayloadError, UnresolvedAuthorError)) as info:
        parse_envelope(record(raw))
    assert info.value.context["field"] == out.field


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        (b"[" * 100_000 + b"]" * 100_000, "0.0"),
        (deep_json(5000).encode(), "k.k"),
        (b'{"structured_fields": {"x": ' + deep_json(300).encode() + b"}}", "structured_fields.x"),
    ],
)
def test_any_depth_is_refused_naming_the_item_that_nests_too_deep(raw: bytes, field: str) -> None:
    out = door(raw)
    assert isinstance(out, Rejected) and out.field == field and out.type == "nesting_too_deep"
    with pytest.raises(InvalidPayloadError):
        parse_envelope(record(raw))


@pytest.mark.parametrize(
    "raw",
    [
        b"\xff\xfe not utf-8",
        b'{"a": NaN}',
        b'{"a": Infinity}',
        b"1" * 5000,
        b"",
        b"[]",
        b'"just a string"',
    ],
)
def test_undecodable_bodies_are_refused_naming_the_body(raw: bytes) -> None:
    out = door(raw)
    assert isinstance(out, Rejected)
    assert_named(out)
    assert out.field == "body"


def test_a_lowercased_email_that_grows_is_refused_not_accepted_then_dead_lettered() -> None:
    email = "İ" * 300 + "@example.com"  # 312 characters; lower-cased 612
    out = door(dumps(base(author={"email": email})))
    assert isinstance(out, Rejected) and out.field == "author.email"


@FUZZ
@given(st.integers(min_value=1, max_value=990))
def test_nesting_between_the_parsers_limits_is_one_answer(depth: int) -> None:
    raw = dumps(base()).replace(
        b'"author"', b'"structured_fields": {"x": ' + deep_json(depth).encode() + b'}, "author"'
    )
    out = door(raw)
    if isinstance(out, Rejected):
        assert out.field.startswith("structured_fields")
        with pytest.raises(InvalidPayloadError):
            parse_envelope(record(raw))
    else:
        assert parse_envelope(record(out.model_dump_json().encode())) == out


def _one_pass_or_none(raw: bytes) -> ChangeEnvelope | None:
    from schemas.envelope import _plain_envelope

    return _plain_envelope(raw)


@FUZZ
@given(envelopes(), st.booleans())
def test_the_one_pass_parse_gives_the_door_answer_or_steps_aside(body: dict[str, Any], compact: bool) -> None:
    """``envelope_from_json`` parses plain text in one pass; it must accept exactly what the door accepts,
    as the same envelope, and leave every refusal (and every text it cannot vouch for) to the full path."""
    raw = json.dumps(body, ensure_ascii=False, separators=(",", ":") if compact else None).encode("utf-8", "replace")
    fast = _one_pass_or_none(raw)
    out = door(raw)
    if isinstance(out, Rejected):
        assert fast is None, out
    elif fast is not None:
        assert fast == out and fast.model_dump_json() == out.model_dump_json()
    assert (envelope_from_json(raw) == out) if not isinstance(out, Rejected) else True


@pytest.mark.parametrize(
    "raw",
    [
        dumps(base(structured_fields={"n": 1})).replace(b'{"n": 1}', b'{"n": NaN}'),
        dumps(base(structured_fields={"n": 1})).replace(b'{"n": 1}', b'{"n": 1e999}'),
        dumps(base(structured_fields={"n": 1})).replace(b'{"n": 1}', b'{"n": ' + b"9" * 400 + b".0}"),
        dumps(base(document={"kind": "message", "text": "a\x00b"})),
        dumps(base(document={"kind": "message", "text": "a\ud800b"})),
        dumps(base(structured_fields=nested(33))),
    ],
)
def test_the_one_pass_parse_steps_aside_for_what_only_the_full_path_refuses(raw: bytes) -> None:
    assert _one_pass_or_none(raw) is None
    assert isinstance(door(raw), Rejected)
    with pytest.raises(InvalidPayloadError):
        parse_envelope(record(raw))


def test_the_one_pass_parse_takes_what_the_producer_writes() -> None:
    env = validate_envelope(base(structured_fields={"title": "CTO", "n": 1.5}))
    produced = env.model_dump_json().encode()
    assert _one_pass_or_none(produced) == env  # the common case really is one pass
