"""A vendor outage is not poison either: the embed stage probes the embedding vendor (one tiny embedding
call), the extract stage the LLM (a 1-token completion), when a batch fails with a vendor error after its
budget. The vendor down → the stage pauses (``/readyz`` names ``embedding_vendor`` / ``llm_vendor``) and
resumes by itself, nothing dead-lettered; the vendor up but choking on one text → that record alone is
dead-lettered, its neighbours go through.

The vendor is a local HTTP server speaking the OpenAI embeddings / chat protocol, called by the real
``openai`` client inside the real pipeline (Kafka, Postgres, S3 of the stack)."""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from services.ops.dlq import read_dead_letters, read_stored_letters
from services.settings import Settings
from tests.integration.agents_helpers import serve_app
from tests.integration.helpers import envelope, eventually, fetchval, later, principal, produce

DIM = 16
POISON = "zqxvendorchoke"


def _vector(text: str) -> list[float]:
    digest = hashlib.sha256(text.encode()).digest()
    return [(b - 127.5) / 127.5 or 0.5 for b in digest[:DIM]]


def vendor_app(state: dict[str, Any]) -> FastAPI:
    app = FastAPI()

    @app.post("/v1/embeddings")
    async def embeddings(request: Request) -> JSONResponse:
        body = await request.json()
        texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
        state["calls"] += 1
        if state["down"]:
            return JSONResponse({"error": {"message": "upstream unavailable"}}, status_code=503)
        if any(POISON in t for t in texts):
            return JSONResponse({"error": {"message": "internal error on this input"}}, status_code=500)
        data = [{"object": "embedding", "index": i, "embedding": _vector(t)} for i, t in enumerate(texts)]
        usage = {"prompt_tokens": len(texts), "total_tokens": len(texts)}
        return JSONResponse({"object": "list", "data": data, "model": body["model"], "usage": usage})

    @app.post("/v1/chat/completions")
    async def chat(request: Request) -> JSONResponse:
        body = await request.json()
        state["calls"] += 1
        if state["down"]:
            return JSONResponse({"error": {"message": "upstream unavailable"}}, status_code=503)
        message = {"role": "assistant", "content": json.dumps({"links": []})}
        return JSONResponse(
            {
                "id": "c1",
                "object": "chat.completion",
                "created": 0,
                "model": body["model"],
                "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 10, "completion_tokens": 3, "total_tokens": 13},
            }
        )

    return app


@pytest.fixture
async def vendor() -> AsyncIterator[tuple[str, dict[str, Any]]]:
    state: dict[str, Any] = {"down": False, "calls": 0}
    async with serve_app(vendor_app(state)) as url:
        yield url, state


async def _vendor_settings(settings_factory: Any, url: str) -> Settings:
    s: Settings = await settings_factory(
        embedding_provider="openai",
        embedding_base_url=f"{url}/v1",
        embedding_api_key="test-key",
        embedding_model="fake-embed",
        embedding_dim=DIM,
        retry_attempts=2,
        retry_base_delay_s=0.05,
        retry_max_delay_s=0.2,
    )
    return s


async def _vectors(s: Settings) -> int:
    return int(await fetchval(s, "SELECT count(*) FROM chunks WHERE embedding IS NOT NULL AND NOT is_parent"))


async def _letters(s: Settings) -> int:
    return len(await read_dead_letters(s, "embed")) + len(await read_stored_letters(s, "embed"))


@pytest.mark.timeout(240)
async def test_vendor_down_pauses_the_embed_stage_and_it_resumes_without_dead_letters(
    settings_factory: Any, pipeline: Any, vendor: tuple[str, dict[str, Any]]
) -> None:
    url, state = vendor
    s = await _vendor_settings(settings_factory, url)
    rt = await pipeline("ingest", "embed", settings_override=s)
    watch = rt.watches["embed"]
    assert "embedding_vendor" in watch.vendors
    g = principal()
    state["down"] = True
    docs = [envelope(f"V/{i}", f"vendor outage document {i}", principals=[g], event_time=later(i)) for i in range(40)]
    await produce(s, *docs)

    async def paused() -> bool:
        return bool(watch.paused)

    await eventually(paused, timeout=120, interval=0.2)
    assert watch.state()["down"] == ["embedding_vendor"]
    await asyncio.sleep(3.0)  # the outage lasts: still paused, nothing dead-lettered, no vector
    assert watch.paused and await _letters(s) == 0 and await _vectors(s) == 0
    calls_while_down = state["calls"]
    state["down"] = False
    await eventually(lambda: _vectors(s), until=lambda n: n >= 40, timeout=120, interval=0.5)
    assert not watch.paused and watch.pauses >= 1 and watch.paused_seconds >= 3.0
    assert await _letters(s) == 0 and calls_while_down < 200  # probes back off; the vendor is not hammered


@pytest.mark.timeout(240)
async def test_a_text_the_vendor_chokes_on_is_dead_lettered_alone(
    settings_factory: Any, pipeline: Any, vendor: tuple[str, dict[str, Any]]
) -> None:
    url, _ = vendor
    s = await _vendor_settings(settings_factory, url)
    rt = await pipeline("ingest", "embed", settings_override=s)
    g = principal()
    docs = [f"ordinary memo {i} about the quarterly plan" for i in range(11)] + [f"the {POISON} memo"]
    await produce(s, *[envelope(f"P/{i}", t, principals=[g], event_time=later(i)) for i, t in enumerate(docs)])
    await eventually(lambda: _letters(s), until=lambda n: n >= 1, timeout=180, interval=0.5)
    await eventually(lambda: _vectors(s), until=lambda n: n >= 11, timeout=60, interval=0.5)
    letters = await read_dead_letters(s, "embed") + await read_stored_letters(s, "embed")
    assert len(letters) == 1 and letters[0].error_class == "VendorError"
    assert await _vectors(s) == 11
    unembedded = "SELECT count(*) FROM chunks WHERE embedding IS NULL AND NOT is_parent AND text NOT LIKE $1"
    assert await fetchval(s, unembedded, f"%{POISON}%") == 0  # only the choking document lacks a vector
    assert not rt.watches["embed"].paused


@pytest.mark.timeout(240)
async def test_llm_down_pauses_the_extract_stage_and_it_resumes_without_dead_letters(
    settings_factory: Any, pipeline: Any, vendor: tuple[str, dict[str, Any]]
) -> None:
    url, state = vendor
    s: Settings = await settings_factory(
        llm_base_url=f"{url}/v1", llm_api_key="test-key", retry_attempts=2, retry_base_delay_s=0.05
    )
    rt = await pipeline("ingest", "extract", settings_override=s)
    watch = rt.watches["extract"]
    assert "llm_vendor" in watch.vendors
    g = principal()
    state["down"] = True
    docs = [
        envelope(f"L/{i}", f"Dana Reyes leads project {i}.", principals=[g], event_time=later(i)) for i in range(12)
    ]
    await produce(s, *docs)

    async def paused() -> bool:
        return bool(watch.paused)

    async def extracted() -> int:
        return int(await fetchval(s, "SELECT count(*) FROM processed_events WHERE stage = 'extract'"))

    await eventually(paused, timeout=120, interval=0.2)
    assert watch.state()["down"] == ["llm_vendor"]
    await asyncio.sleep(2.0)
    assert watch.paused and await extracted() == 0
    state["down"] = False
    await eventually(extracted, until=lambda n: n >= 9, timeout=120, interval=0.5)
    assert not watch.paused and watch.pauses >= 1
    letters = await read_dead_letters(s, "extract") + await read_stored_letters(s, "extract")
    assert letters == []
