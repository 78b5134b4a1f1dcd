"""The runtime builds its vendor clients once and closes them: the real adapters' HTTP pools are shut."""

from __future__ import annotations

from typing import Any

from extractor.llm import LlmExtractor
from retriever.vendors import ChatSynthesizer, HttpReranker
from retriever.wiring import get_service
from services.runtime import build_runtime
from services.wiring import build_clients


async def test_build_runtime_builds_each_client_once_and_close_closes_them(settings_factory: Any) -> None:
    s = await settings_factory(
        rerank_url="http://127.0.0.1:9/rerank", llm_base_url="http://127.0.0.1:9/v1", llm_api_key="k"
    )
    rt = await build_runtime(s, build_clients)
    closed = False
    try:
        c = rt.clients
        assert isinstance(c.reranker, HttpReranker)
        assert isinstance(c.synthesizer, ChatSynthesizer)
        assert isinstance(c.llm_extractor, LlmExtractor)
        assert rt.embedder.model == rt.embedding.model and rt.embedder.dim == rt.embedding.dim
        service = get_service(rt)
        assert get_service(rt) is service  # one retriever per runtime
        assert service.passages.embedder is rt.embedder and service.passages.reranker is c.reranker
        assert not c.reranker.client.is_closed
        assert not c.synthesizer.client.is_closed()
        assert not c.llm_extractor.client.is_closed()
        await rt.close()
        closed = True
        assert c.reranker.client.is_closed
        assert c.synthesizer.client.is_closed()
        assert c.llm_extractor.client.is_closed()
    finally:
        if not closed:
            await rt.close()


async def test_without_vendor_settings_only_the_embedder_is_built(settings_factory: Any) -> None:
    rt = await build_runtime(await settings_factory(), build_clients)
    try:
        c = rt.clients
        assert c.embedder is not None
        assert (c.reranker, c.synthesizer, c.llm_extractor) == (None, None, None)
    finally:
        await rt.close()
