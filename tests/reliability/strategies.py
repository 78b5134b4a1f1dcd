"""Hypothesis strategies for hostile input: NULs, lone surrogates, extreme datetimes, deep nesting,
huge strings and arrays — mixed with valid values so the generated requests reach deep into the code."""

from __future__ import annotations

import json
import os
import uuid
from datetime import UTC, datetime, timedelta, timezone
from typing import Any, TypeVar

from hypothesis import HealthCheck, Phase, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

T = TypeVar("T")
NASTY = ["\x00", "a\x00b", "\ud800", "x\udfffy", "\udbff\udc00", " ", "", "\u202e", "\ufeff", "İ" * 200, "🙂"]
OFFSETS = [UTC, timezone(timedelta(hours=14)), timezone(timedelta(hours=-14)), timezone(timedelta(hours=1)),
           timezone(timedelta(hours=-2)), timezone(timedelta(minutes=-59))]  # fmt: skip
EDGE_TIMES = [
    "0001-01-01T00:00:00Z", "0001-01-01T00:30:00+01:00", "0001-01-01T00:00:00-01:00", "9999-12-31T23:59:59Z",
    "9999-12-31T23:00:00-02:00", "9999-12-31T23:59:59+14:00", "1990-01-01T00:30:00+01:00",
    "1989-12-31T23:30:00-01:00", "1990-01-01T00:00:00Z", "2024-02-30T00:00:00Z", "2024-05-08T13:56:00",
    "not a date", "", "2024-05-08T13:56:00+25:00", "1e10",
]  # fmt: skip

# any code point, surrogates included (hypothesis excludes category Cs by default)
wild_text = st.text(st.characters(exclude_categories=()), max_size=40)
text = st.one_of(st.sampled_from(NASTY), wild_text, st.text(max_size=20))
huge_text = st.integers(min_value=1, max_value=3_000_000).map(lambda n: "x" * n)


def iso(dt: datetime) -> str:
    return dt.isoformat()


datetimes = st.one_of(
    st.sampled_from(EDGE_TIMES),
    st.builds(
        iso,
        st.datetimes(min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30), timezones=st.sampled_from(OFFSETS)),
    ),
    st.builds(iso, st.datetimes(min_value=datetime(1, 1, 1), max_value=datetime(9999, 12, 31))),
)

json_leaf = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), text)
json_values = st.recursive(
    json_leaf, lambda c: st.lists(c, max_size=4) | st.dictionaries(text, c, max_size=4), max_leaves=12
)


def nested(depth: int, leaf: Any = 1) -> Any:
    value: Any = leaf
    for _ in range(depth):
        value = {"k": value}
    return value


# as objects up to 500 levels (json.dumps itself recurses); deeper bodies are built as text (deep_json)
deep = st.integers(min_value=1, max_value=500).map(nested)


def deep_json(depth: int) -> str:
    """Nesting beyond what ``json.dumps`` can write: built as text."""
    return '{"k":' * depth + "1" + "}" * depth


def maybe(strategy: st.SearchStrategy[Any], valid: Any) -> st.SearchStrategy[Any]:
    """Mostly (9 in 10) the valid value, sometimes the hostile one: a dozen hostile fields at once would
    leave no request valid enough to reach past the first check."""
    return st.integers(0, 9).flatmap(lambda i: strategy if i == 0 else st.just(valid))


@st.composite
def envelopes(draw: st.DrawFn) -> dict[str, Any]:
    body: dict[str, Any] = {
        "envelope_id": draw(maybe(text, str(uuid.uuid4()))),
        "workspace": draw(maybe(text, "default")),
        "op": draw(maybe(st.sampled_from(["upsert", "delete", "acl", "UPSERT", "x"]), "upsert")),
        "source": {
            "system": draw(maybe(text, "slack")),
            "external_id": draw(maybe(text, f"C/{uuid.uuid4().hex[:8]}")),
        },
        "event_time": draw(maybe(datetimes, "2024-05-08T13:56:00Z")),
        "document": {
            "kind": draw(maybe(text, "message")),
            "title": draw(maybe(text, "title")),
            "text": draw(maybe(st.one_of(text, huge_text), "hello world")),
        },
        "acl": {"principals": draw(maybe(st.lists(text, max_size=3), [f"group:{uuid.uuid4()}"]))},
    }
    if draw(st.booleans()):
        body["author"] = {
            "email": draw(maybe(text, "author@example.com")),
            "display_name": draw(maybe(text, "Author")),
            "identities": draw(
                maybe(st.lists(st.fixed_dictionaries({"namespace": text, "value": text}), max_size=2), [])
            ),
        }
    if draw(st.booleans()):
        body["structured_fields"] = draw(
            st.one_of(st.dictionaries(text, json_values, max_size=4), deep.map(lambda d: {"title": d}))
        )
    if draw(st.booleans()):
        body["acl"]["acl_event_time"] = draw(datetimes)
    if draw(st.integers(0, 9)) == 0:
        body[draw(text)] = draw(json_values)  # unknown field
    return body


def dumps(obj: Any) -> bytes:
    """JSON bytes as a client sends them (lone surrogates travel as \\u escapes)."""
    return json.dumps(obj, ensure_ascii=True).encode()


# examples per property: bounded for make test; ORGMEM_FUZZ_EXAMPLES raises it (make test-reliability)
FUZZ_EXAMPLES = int(os.environ.get("ORGMEM_FUZZ_EXAMPLES", "150"))
FUZZ = hsettings(
    max_examples=FUZZ_EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large],
)


def sample(strategy: st.SearchStrategy[T], n: int) -> list[T]:
    """``n`` generated values, for tests that must act on the whole sample afterwards (end to end)."""
    out: list[T] = []

    @hsettings(
        max_examples=n, database=None, deadline=None, phases=[Phase.generate], suppress_health_check=list(HealthCheck)
    )
    @given(strategy)
    def collect(value: T) -> None:
        out.append(value)

    collect()
    return out
