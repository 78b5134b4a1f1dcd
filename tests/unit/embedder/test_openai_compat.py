from __future__ import annotations

import json
import math
from collections.abc import Callable

import httpx
import pytest

from embedder.openai_compat import OpenAICompatEmbedder
from services.errors import TransientError, VendorError, VendorRejectedError
from services.ports import Embedder, EmbedUsage

Handler = Callable[[httpx.Request], httpx.Response]


def _vectors_response(request: httpx.Request, dim: int = 4, drop: int = 0, scale: float = 2.0) -> httpx.Response:
    body = json.loads(request.content)
    inputs = body["input"]
    data = [
        {"object": "embedding", "index": i, "embedding": [scale * (i + 1)] + [0.0] * (dim - 1)}
        for i in range(len(inputs) - drop)
    ]
    data.reverse()  # servers may answer out of order; the index field decides
    usage = {"prompt_tokens": 3 * len(inputs), "total_tokens": 3 * len(inputs)}
    return httpx.Response(200, json={"object": "list", "data": data, "model": body["model"], "usage": usage})


def _embedder(handler: Handler, *, dim: int = 4, max_batch: int = 8) -> OpenAICompatEmbedder:
    client = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    return OpenAICompatEmbedder(
        model="test-embed",
        dim=dim,
        base_url="http://vendor.test/v1",
        api_key="sk-test",
        max_retries=0,
        max_batch=max_batch,
        http_client=client,
    )


async def test_ok_returns_normalized_vectors_in_order_and_usage() -> None:
    requests: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        requests.append(request)
        return _vectors_response(request)

    embedder = _embedder(handler, max_batch=2)
    assert isinstance(embedder, Embedder)
    assert embedder.model == "openai/test-embed"
    vectors = await embedder.embed(["a", "b", "c"])
    await embedder.aclose()

    assert vectors == [[1.0, 0.0, 0.0, 0.0]] * 3  # re-normalized, matched by index
    assert len(requests) == 2  # split at max_batch
    first = requests[0]
    assert first.url.path == "/v1/embeddings"
    assert first.headers["authorization"] == "Bearer sk-test"
    assert json.loads(first.content) == {
        "input": ["a", "b"],
        "model": "test-embed",
        "encoding_format": "float",
    }
    assert embedder.last_usage == EmbedUsage("openai/test-embed", calls=2, tokens=9)
    assert embedder.total_usage == embedder.last_usage


async def test_server_error_is_transient() -> None:
    calls = 0

    def handler(request: httpx.Request) -> httpx.Response:
        nonlocal calls
        calls += 1
        return httpx.Response(500, json={"error": {"message": "boom"}})

    embedder = _embedder(handler)
    with pytest.raises(VendorError) as info:
        await embedder.embed(["a"])
    await embedder.aclose()
    assert isinstance(info.value, TransientError)
    assert info.value.context["status"] == 500
    assert calls == 1  # max_retries=0: the stage owns retrying


async def test_rate_limit_is_transient_and_carries_retry_after() -> None:
    embedder = _embedder(lambda r: httpx.Response(429, headers={"retry-after": "7"}, json={}))
    with pytest.raises(VendorError) as info:
        await embedder.embed(["a"])
    await embedder.aclose()
    assert info.value.context["retry_after"] == "7"


async def test_connection_error_is_transient() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused", request=request)

    embedder = _embedder(handler)
    with pytest.raises(VendorError):
        await embedder.embed(["a"])
    await embedder.aclose()


async def test_timeout_is_transient() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        raise httpx.ReadTimeout("slow", request=request)

    embedder = _embedder(handler)
    with pytest.raises(VendorError, match="timeout"):
        await embedder.embed(["a"])
    await embedder.aclose()


@pytest.mark.parametrize("status", [400, 401, 404, 422])
async def test_client_errors_are_permanent(status: int) -> None:
    body = {"error": {"message": "input must not be empty"}}
    embedder = _embedder(lambda r: httpx.Response(status, json=body))
    with pytest.raises(VendorRejectedError) as info:
        await embedder.embed([""])
    await embedder.aclose()
    assert info.value.context["status"] == status
    assert "input must not be empty" in str(info.value)


async def test_wrong_dimension_is_rejected() -> None:
    embedder = _embedder(lambda r: _vectors_response(r, dim=3), dim=4)
    with pytest.raises(VendorRejectedError, match="dimension"):
        await embedder.embed(["a", "b"])
    await embedder.aclose()


async def test_wrong_vector_count_is_rejected() -> None:
    embedder = _embedder(lambda r: _vectors_response(r, drop=1))
    with pytest.raises(VendorRejectedError, match="number of vectors") as info:
        await embedder.embed(["a", "b"])
    await embedder.aclose()
    assert info.value.context == {"model": "openai/test-embed", "expected": 2, "got": 1}


async def test_zero_vector_is_rejected() -> None:
    embedder = _embedder(lambda r: _vectors_response(r, scale=0.0))
    with pytest.raises(VendorRejectedError, match="zero"):
        await embedder.embed(["a"])
    await embedder.aclose()


async def test_empty_input_makes_no_call() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        raise AssertionError("no request expected")

    embedder = _embedder(handler)
    assert await embedder.embed([]) == []
    assert embedder.last_usage == EmbedUsage("openai/test-embed", calls=0, tokens=0)
    await embedder.aclose()


async def test_reduced_dimensions_change_the_model_id() -> None:
    seen: list[dict[str, object]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(json.loads(request.content))
        return _vectors_response(request, dim=4)

    client = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    embedder = OpenAICompatEmbedder(
        model="text-embedding-3-small", dim=4, dimensions=4, max_retries=0, http_client=client
    )
    assert embedder.model == "openai/text-embedding-3-small@4"
    [vector] = await embedder.embed(["a"])
    await embedder.aclose()
    assert seen[0]["dimensions"] == 4
    assert math.isclose(sum(x * x for x in vector), 1.0)
