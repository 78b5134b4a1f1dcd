# ruff: noqa: E501  (the table of inputs reads best one per line)
"""The HTTP doors on the real stack: the issue's 500s are 4xx naming the field, every error has the
project's shape, the key is checked before a byte of the body is read, the bytes read are bounded,
fuzzed tool requests never answer 5xx, and every envelope the door accepts is ingested."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from services.api.app import create_app
from services.settings import Settings
from tests.integration.helpers import eventually, fetchval
from tests.reliability.strategies import (
    FUZZ,
    FUZZ_EXAMPLES,
    datetimes,
    deep_json,
    dumps,
    envelopes,
    json_values,
    maybe,
    nested,
    sample,
    text,
)

KEY = {"X-Api-Key": "test-key"}
G = f"group:{uuid.uuid4()}"
VIEWER = KEY | {"X-Principal-Groups": G, "content-type": "application/json"}
UUID = str(uuid.uuid4())


@pytest.fixture
async def client(settings: Settings, pipeline: Any) -> AsyncIterator[httpx.AsyncClient]:
    rt = await pipeline("ingest")
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=create_app(rt)), base_url="http://t") as c:
        yield c


def envelope(**over: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "envelope_id": str(uuid.uuid4()),
        "source": {"system": "slack", "external_id": f"C/{uuid.uuid4().hex[:8]}"},
        "event_time": "2024-05-08T13:56:00Z",
        "document": {"kind": "message", "text": "hello"},
        "author": {"email": "a@example.com"},
        "acl": {"principals": [G]},
    }
    return body | over


def assert_error_shape(r: httpx.Response) -> dict[str, Any]:
    body = r.json()
    assert set(body) == {"detail"}, body
    detail = body["detail"]
    assert isinstance(detail["field"], str) and detail["field"], detail
    assert detail["errors"] and all(set(e) == {"field", "msg", "type"} for e in detail["errors"]), detail
    return dict(detail)


# (path, body as JSON text, the field the 4xx must name) — the inputs that answered 500 before
DEEP = deep_json(300)
ISSUE_INPUTS: list[tuple[str, str, str]] = [
    ("/tools/retrieve_context", json.dumps({"query": "a\x00b"}), "query"),
    ("/tools/retrieve_context", json.dumps({"query": "a\ud800b"}), "query"),
    ("/tools/search_knowledge_base", json.dumps({"query": "\udfff"}), "query"),
    ("/tools/retrieve_context", json.dumps({"query": "q", "about": "Dana\x00"}), "about"),
    ("/tools/retrieve_context", json.dumps({"query": "q", "filters": {"author": "\x00"}}), "filters.author"),
    ("/tools/retrieve_context", json.dumps({"query": "q", "filters": {"source_systems": ["\ud800"]}}), "filters.source_systems.0"),
    ("/tools/search_knowledge_base", json.dumps({"query": "q", "filters": {"kinds": ["x\x00"]}}), "filters.kinds.0"),
    ("/tools/retrieve_context", json.dumps({"query": "q", "as_of": "0001-01-01T00:00:00Z"}), "as_of"),
    ("/tools/retrieve_context", json.dumps({"query": "q", "as_of": "9999-12-31T23:59:59Z"}), "as_of"),
    ("/tools/retrieve_context", json.dumps({"query": "q", "as_of": "0001-01-01T00:30:00+01:00"}), "as_of"),
    ("/tools/search_knowledge_base", json.dumps({"query": "q", "filters": {"date_from": "0001-01-01T00:00:00Z"}}), "filters.date_from"),
    ("/tools/search_knowledge_base", json.dumps({"query": "q", "filters": {"date_to": "9999-12-31T23:59:59-14:00"}}), "filters.date_to"),
    ("/tools/retrieve_context", json.dumps({"query": "q", "believed_as_of": "9999-12-31T23:00:00Z"}), "believed_as_of"),
    ("/tools/query_facts", json.dumps({"about": "x", "as_of": "9999-12-31T00:00:00Z", "as_of_grain": "year"}), "as_of"),
    ("/tools/query_paths", json.dumps({"about": "x", "as_of": "9999-11-30T00:00:00Z", "as_of_grain": "quarter"}), "as_of"),
    ("/tools/diff_facts", json.dumps({"about": "x", "from_time": "0001-01-01T00:00:00Z", "to_time": "2024-01-01T00:00:00Z"}), "from_time"),
    ("/tools/query_facts", json.dumps({"about": "\ud800"}), "about"),
    ("/tools/query_paths", json.dumps({"about": "a\x00"}), "about"),
    ("/tools/query_facts", json.dumps({"subjects": [{"type": "p\x00", "id": UUID}]}), "subjects.0.type"),
    ("/tools/retrieve_context", json.dumps({"query": "q", "\ud800": 1}), "\\ud800"),
    ("/tools/retrieve_context", '{"query": "q", "filters": ' + DEEP + "}", "filters.k"),
    ("/ingress/envelope", json.dumps(envelope(structured_fields={"title\x00": "CTO"})), "structured_fields.title"),
    ("/ingress/envelope", json.dumps(envelope(structured_fields={"title": "C\ud800"})), "structured_fields.title"),
    ("/ingress/envelope", json.dumps(envelope(structured_fields=nested(256))), "structured_fields.k"),
    ("/ingress/envelope", json.dumps(envelope()).replace('"author"', '"structured_fields": ' + deep_json(990) + ', "author"'), "structured_fields.k"),
    ("/ingress/envelope", json.dumps(envelope(event_time="9999-12-31T23:00:00-02:00")), "event_time"),
    ("/ingress/envelope", json.dumps(envelope(event_time="1990-01-01T00:30:00+01:00")), "event_time"),
    ("/ingress/envelope", json.dumps(envelope(document={"kind": "message", "text": "a\x00"})), "document.text"),
    ("/ingress/envelope", json.dumps(envelope(**{"\udc80": 1})), "\\udc80"),
    ("/ingress/envelopes", json.dumps([envelope(), envelope(document={"kind": "message", "title": "\x00"})]), "1.document.title"),
]  # fmt: skip


async def test_the_issues_500s_are_4xx_naming_the_field(client: httpx.AsyncClient) -> None:
    assert len(ISSUE_INPUTS) >= 28
    for path, raw, field in ISSUE_INPUTS:
        r = await client.post(path, content=raw.encode(), headers=VIEWER)
        assert r.status_code == 422, (path, field, r.status_code, r.text[:300])
        detail = assert_error_shape(r)
        assert detail["field"].startswith(field), (path, field, detail)
    r = await client.get(f"/v1/graph/persons/{UUID}", params={"as_of": "9999-12-31T23:59:59Z"}, headers=VIEWER)
    assert r.status_code == 422 and assert_error_shape(r)["field"] == "as_of", r.text
    r = await client.get(f"/v1/graph/entities/{UUID}", params={"as_of": "0001-01-01T00:00:00Z"}, headers=VIEWER)
    assert r.status_code == 422 and assert_error_shape(r)["field"] == "as_of", r.text


async def test_every_error_has_the_project_shape(client: httpx.AsyncClient) -> None:
    r = await client.post("/tools/retrieve_context", json={"query": "q"})
    assert r.status_code == 401 and assert_error_shape(r)["field"] == "X-Api-Key"
    r = await client.post("/tools/retrieve_context", json={"query": "q"}, headers={"X-Api-Key": "wrong"})
    assert r.status_code == 401 and assert_error_shape(r)["field"] == "X-Api-Key"
    r = await client.get("/no/such/route", headers=KEY)
    assert r.status_code == 404 and assert_error_shape(r)
    r = await client.get("/tools/retrieve_context", headers=KEY)
    assert r.status_code == 405 and assert_error_shape(r)
    r = await client.get(f"/v1/graph/persons/{UUID}", headers=VIEWER)
    assert r.status_code == 404 and assert_error_shape(r)
    r = await client.post("/tools/retrieve_context", json={"query": ""}, headers=VIEWER)
    assert r.status_code == 422 and assert_error_shape(r)["field"] == "query"
    r = await client.post("/tools/retrieve_context", json={"query": "q"}, headers=VIEWER | {"X-Principal-Id": "bob"})
    assert r.status_code == 422 and assert_error_shape(r)["field"] == "X-Principal-Id"
    r = await client.post("/tools/retrieve_context", content=b"{not json", headers=VIEWER)
    assert r.status_code == 422 and assert_error_shape(r)["field"] == "body"
    r = await client.post("/tools/retrieve_context", content=b"\xff\xfe", headers=VIEWER)
    assert r.status_code == 422 and assert_error_shape(r)["field"] == "body"
    r = await client.post("/ingress/envelope", content=b"x" * 10, headers=KEY | {"content-length": "99999999999"})
    assert r.status_code == 413 and assert_error_shape(r)["field"] == "body"
    r = await client.post(
        "/ingress/envelope", json=envelope(author=None, structured_fields={"title": "CTO"}), headers=KEY
    )
    assert r.status_code == 422 and assert_error_shape(r)["field"] == "author"


class CountingBody:
    """A chunked request body (no Content-Length) that records how much of it the server pulled."""

    def __init__(self, total: int, chunk: int = 64 * 1024) -> None:
        self.total, self.chunk, self.pulled = total, chunk, 0

    async def __aiter__(self) -> AsyncIterator[bytes]:
        sent = 0
        while sent < self.total:
            self.pulled += self.chunk
            sent += self.chunk
            yield b"[" * self.chunk


async def test_the_key_is_checked_before_the_body_and_bytes_read_are_bounded(
    client: httpx.AsyncClient, settings: Settings
) -> None:
    huge = 150 * 1024 * 1024
    body = CountingBody(huge)
    r = await client.post("/ingress/envelope", content=body)  # no key
    assert r.status_code == 401 and assert_error_shape(r)["field"] == "X-Api-Key"
    assert body.pulled <= body.chunk, body.pulled  # nothing (or the first chunk) was read
    body = CountingBody(huge)
    r = await client.post("/ingress/envelope", content=body, headers=KEY)
    assert r.status_code == 413 and assert_error_shape(r)["field"] == "body"
    assert body.pulled <= settings.max_request_bytes + 2 * body.chunk, body.pulled  # cut at the bound
    body = CountingBody(huge)
    r = await client.post("/tools/retrieve_context", content=body, headers=VIEWER)
    assert r.status_code == 413 and body.pulled <= settings.max_request_bytes + 2 * body.chunk


def tool_bodies() -> st.SearchStrategy[tuple[str, Any]]:
    filters = st.fixed_dictionaries(
        {},
        optional={
            "source_systems": maybe(st.lists(text, max_size=3), ["slack"]),
            "kinds": st.lists(text, max_size=3),
            "date_from": datetimes,
            "date_to": datetimes,
            "author": text,
        },
    )
    search = st.fixed_dictionaries(
        {"query": maybe(st.one_of(text, st.text(min_size=1900, max_size=2100)), "who owns billing?")},
        optional={
            "limit": st.one_of(st.integers(), json_values),
            "filters": st.one_of(filters, json_values),
            "as_of": datetimes,
            "workspace": maybe(text, "default"),
            "arms": maybe(text, "lexical"),
        },
    )
    retrieve = st.builds(
        lambda base, extra: base | extra,
        search,
        st.fixed_dictionaries(
            {},
            optional={
                "mode": maybe(text, "joint"),
                "about": maybe(text, "Dana"),
                "subjects": st.lists(st.fixed_dictionaries({"type": text, "id": maybe(text, UUID)}), max_size=3),
                "believed_as_of": datetimes,
                "as_of_grain": maybe(text, "quarter"),
                "max_tokens": st.one_of(st.integers(), json_values),
            },
        ),
    )
    graph_common = {
        "about": maybe(text, "Dana Lee"),
        "as_of": datetimes,
        "believed_as_of": datetimes,
        "as_of_grain": maybe(text, "year"),
        "workspace": maybe(text, "default"),
    }
    facts = st.fixed_dictionaries({}, optional=graph_common | {"limit": st.integers()})
    paths = st.fixed_dictionaries(
        {}, optional=graph_common | {"max_depth": st.integers(), "max_fanout": st.integers(), "limit": st.integers()}
    )
    diff = st.fixed_dictionaries(
        {"from_time": datetimes, "to_time": datetimes}, optional={"about": graph_common["about"], "axis": text}
    )
    return st.one_of(
        st.tuples(st.just("/tools/search_knowledge_base"), search),
        st.tuples(st.just("/tools/retrieve_context"), retrieve),
        st.tuples(st.just("/tools/query_facts"), facts),
        st.tuples(st.just("/tools/query_paths"), paths),
        st.tuples(st.just("/tools/diff_facts"), diff),
        st.tuples(st.sampled_from(["/tools/retrieve_context", "/tools/query_facts"]), json_values),
    )


@FUZZ
@given(case=tool_bodies())
async def test_fuzzed_tool_requests_never_answer_5xx_and_name_the_field(
    client: httpx.AsyncClient, case: tuple[str, Any]
) -> None:
    path, body = case
    r = await client.post(path, content=dumps(body), headers=VIEWER)
    assert r.status_code < 500, (path, body, r.status_code, r.text[:300])
    if r.status_code >= 400:
        assert_error_shape(r)


@FUZZ
@given(st.sampled_from(["persons", "entities"]), datetimes, st.one_of(st.none(), text), maybe(text, UUID))
async def test_fuzzed_card_queries_never_answer_5xx(
    client: httpx.AsyncClient, kind: str, when: str, grain: str | None, ident: str
) -> None:
    params = {"as_of": when} | ({"as_of_grain": grain} if grain is not None else {})
    qs = "&".join(f"{k}={raw(v)}" for k, v in params.items())
    r = await client.get(f"/v1/graph/{kind}/{raw(ident)}?{qs}", headers=VIEWER)
    assert r.status_code < 500, (kind, params, ident, r.text[:300])
    if r.status_code >= 400:
        assert_error_shape(r)


def raw(value: str) -> str:
    """Percent-encoded, lone surrogates included (as the bytes no UTF-8 decoder accepts)."""
    return quote(value.encode("utf-8", "surrogatepass"), safe="")


async def test_every_envelope_the_door_accepts_is_ingested(client: httpx.AsyncClient, settings: Settings) -> None:
    """Fuzzed envelopes over HTTP: each is refused naming the field or accepted (202), and every
    accepted one is then applied by the ingest stage — none dead-lettered, none lost."""
    accepted: list[str] = []
    refused = 0
    for body in sample(envelopes(), FUZZ_EXAMPLES):
        r = await client.post("/ingress/envelope", content=dumps(body), headers=KEY)
        assert r.status_code in (202, 413, 422), (r.status_code, r.text[:300])
        if r.status_code == 202:
            accepted.append(r.json()["envelope_id"])
        else:
            assert_error_shape(r)
            refused += 1
    assert accepted and refused, (len(accepted), refused)  # the sample exercises both answers
    await eventually(
        lambda: fetchval(
            settings,
            "SELECT count(*) FROM processed_events WHERE stage = 'ingest' AND event_key = ANY($1::text[])",
            accepted,
        ),
        until=lambda n: n == len(set(accepted)),
        timeout=90,
    )
    print(f"fuzzed envelopes: {len(accepted)} accepted and ingested, {refused} refused naming the field")


async def test_the_openapi_document_describes_the_real_bodies_and_errors(client: httpx.AsyncClient) -> None:
    doc = (await client.get("/openapi.json")).json()
    schemas = doc["components"]["schemas"]
    assert "HTTPValidationError" not in schemas and "ErrorBody" in schemas
    ingress = doc["paths"]["/ingress/envelope"]["post"]
    assert ingress["requestBody"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/ChangeEnvelope"
    }
    assert set(schemas["ChangeEnvelope"]["required"]) >= {"envelope_id", "source", "event_time"}
    assert "409" in ingress["responses"] and "413" in ingress["responses"]
    for path, ops in doc["paths"].items():
        for method, op in ops.items():
            for code, resp in op["responses"].items():
                if int(code) >= 400:
                    ref = resp["content"]["application/json"]["schema"]["$ref"]
                    assert ref == "#/components/schemas/ErrorBody", (method, path, code)
    assert "404" in doc["paths"]["/v1/graph/persons/{person_id}"]["get"]["responses"]
    assert "429" in doc["paths"]["/tools/query_paths"]["post"]["responses"]
    metrics = doc["paths"]["/metrics"]["get"]["responses"]["200"]["content"]
    assert list(metrics) == ["text/plain; version=0.0.4; charset=utf-8"] or all(
        m.startswith("text/plain") for m in metrics
    )
