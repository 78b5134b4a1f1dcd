"""Pure RPC contract helpers and the rerank adapter's response handling."""

from __future__ import annotations

import json

import httpx
import pytest

from retriever.rpc import DEFAULT_TTL_MS, deadline_ms, error_status, reply_topic, valid_reply_topic
from retriever.vendors import HttpReranker
from services.errors import InvalidPayloadError, TransientError, VendorError, VendorRejectedError


def test_reply_topics_are_confined_to_the_namespace() -> None:
    assert reply_topic("om", "agent-7") == "om.rpc.reply.agent-7.v1"
    assert valid_reply_topic("om", "om.rpc.reply.agent-7.v1")
    assert not valid_reply_topic("om", "om.envelopes.v1")
    assert not valid_reply_topic("om", "other.rpc.reply.agent-7.v1")
    assert not valid_reply_topic("om", "om.rpc.reply.Bad Name.v1")
    with pytest.raises(ValueError):
        reply_topic("om", "../x")


def test_deadline_from_header_or_record_time() -> None:
    assert deadline_ms("1700000000000", 5, 10) == 1_700_000_000_000
    assert deadline_ms(None, 1_000, 2_000) == 1_000 + DEFAULT_TTL_MS
    assert deadline_ms("garbage", None, 2_000) == 2_000 + DEFAULT_TTL_MS


def test_error_status_mapping() -> None:
    assert error_status(InvalidPayloadError("bad", field="subjects")) == (
        422,
        {"field": "subjects", "msg": "bad"},
    )
    assert error_status(VendorError("down"))[0] == 502
    assert error_status(VendorRejectedError("no"))[0] == 502
    assert error_status(TransientError("db"))[0] == 503
    assert error_status(RuntimeError("secret detail")) == (500, {"msg": "internal error"})


def _reranker(handler: httpx.MockTransport) -> HttpReranker:
    return HttpReranker("http://rerank/rerank", client=httpx.AsyncClient(transport=handler))


async def test_rerank_accepts_cohere_and_tei_shapes() -> None:
    def cohere(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        assert body["query"] == "q" and body["documents"] == ["a", "b"]
        return httpx.Response(
            200,
            json={"results": [{"index": 1, "relevance_score": 0.9}, {"index": 0, "relevance_score": 0.1}]},
        )

    assert await _reranker(httpx.MockTransport(cohere)).rerank("q", ["a", "b"]) == [(1, 0.9), (0, 0.1)]
    tei = httpx.MockTransport(
        lambda r: httpx.Response(200, json=[{"index": 0, "score": 0.2}, {"index": 1, "score": 0.7}])
    )
    assert await _reranker(tei).rerank("q", ["a", "b"]) == [(1, 0.7), (0, 0.2)]


@pytest.mark.parametrize(("status", "error"), [(503, VendorError), (429, VendorError), (400, VendorRejectedError)])
async def test_rerank_errors_surface(status: int, error: type[Exception]) -> None:
    with pytest.raises(error):
        await _reranker(httpx.MockTransport(lambda r: httpx.Response(status, text="no"))).rerank("q", ["a"])


async def test_rerank_rejects_malformed_bodies() -> None:
    bad = httpx.MockTransport(lambda r: httpx.Response(200, json={"results": [{"index": 5, "score": 1}]}))
    with pytest.raises(VendorRejectedError):
        await _reranker(bad).rerank("q", ["a"])
