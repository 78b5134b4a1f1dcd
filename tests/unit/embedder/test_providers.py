from __future__ import annotations

import inspect
import json
from typing import Any

import httpx
import pytest
from pydantic import SecretStr

from embedder.bge import QUERY_INSTRUCTION, BGESmallEmbedder
from embedder.hashing import HashingEmbedder
from embedder.minilm import MiniLMEmbedder
from embedder.openai_compat import OpenAICompatEmbedder
from embedder.providers import PROVIDERS, build_embedder
from services.embedding_config import embedding_config, provider_kwargs
from services.errors import ConfigurationError
from services.ports import Embedder
from services.settings import Settings, load_settings

PASSAGE = "Dana moved the quarterly budget review to Friday."


def _echo_vendor(request: httpx.Request) -> httpx.Response:
    """An OpenAI-compatible server whose vector depends on the input text (its length)."""
    inputs = json.loads(request.content)["input"]
    data = [{"object": "embedding", "index": i, "embedding": [float(len(t)), 1.0]} for i, t in enumerate(inputs)]
    usage = {"prompt_tokens": len(inputs), "total_tokens": len(inputs)}
    return httpx.Response(200, json={"object": "list", "data": data, "model": "m", "usage": usage})


def _provider_settings(name: str) -> dict[str, Any]:
    if name == "openai":
        client = httpx.AsyncClient(transport=httpx.MockTransport(_echo_vendor))
        return {"model": "m", "dim": 2, "base_url": "http://x.test/v1", "api_key": "k", "http_client": client}
    return {}


def test_builds_each_provider() -> None:
    hashing = build_embedder("hash", dim=64)
    assert isinstance(hashing, HashingEmbedder)
    assert hashing.model == "hash/v1-64"
    assert isinstance(build_embedder("local"), MiniLMEmbedder)
    assert isinstance(build_embedder("bge"), BGESmallEmbedder)
    vendor = build_embedder("openai", model="m", dim=8, api_key=SecretStr("k"), base_url="http://x.test/v1")
    assert isinstance(vendor, OpenAICompatEmbedder)
    assert isinstance(vendor, Embedder)
    assert vendor.model == "openai/m"


def test_unknown_provider_names_the_setting() -> None:
    with pytest.raises(ConfigurationError, match="unknown embedding provider 'bert'"):
        build_embedder("bert")


def test_unknown_or_invalid_settings_fail_at_boot() -> None:
    with pytest.raises(ConfigurationError, match="colour"):
        build_embedder("hash", colour="red")
    with pytest.raises(ConfigurationError, match="dim"):
        build_embedder("hash", dim=2)
    with pytest.raises(ConfigurationError):
        build_embedder("openai", dim=8)  # model missing


@pytest.mark.parametrize("name", PROVIDERS)
async def test_every_provider_implements_the_port_with_embed_queries(name: str) -> None:
    embedder = build_embedder(name, **_provider_settings(name))
    try:
        assert isinstance(embedder, Embedder)  # runtime_checkable: embed_queries is part of the Protocol
        assert inspect.iscoroutinefunction(embedder.embed_queries)
        [query] = await embedder.embed_queries([PASSAGE])
        assert len(query) == embedder.dim
        assert embedder.last_usage.calls >= 1
        [passage] = await embedder.embed([PASSAGE])
        if name == "bge":  # asymmetric: queries carry the instruction prefix
            [prefixed] = await embedder.embed([QUERY_INSTRUCTION + PASSAGE])
            assert query == pytest.approx(prefixed, abs=1e-6)
            assert query != pytest.approx(passage, abs=1e-3)
        else:  # symmetric: a query is embedded exactly like a passage
            assert query == pytest.approx(passage, abs=1e-6)
        assert await embedder.embed_queries([]) == []
    finally:
        await embedder.aclose()


@pytest.mark.parametrize("name", ["hash", "local", "bge"])
def test_embedding_config_matches_the_built_provider(name: str) -> None:
    """What ingest/retriever are told (without loading the model) is what the provider reports."""
    settings = load_settings(
        _env_file=None, database_url="postgresql://x", kafka_bootstrap_servers="k:1", embedding_provider=name
    )
    config = embedding_config(settings)
    embedder = build_embedder(settings.embedding_provider, **provider_kwargs(settings))
    assert config.provider == name
    assert (config.model, config.dim) == (embedder.model, embedder.dim)


def test_embed_threads_reaches_the_bge_session_and_only_bge() -> None:
    def settings(provider: str, **extra: object) -> Settings:
        return load_settings(
            _env_file=None,
            database_url="postgresql://x",
            kafka_bootstrap_servers="k:1",
            embedding_provider=provider,
            **extra,
        )

    assert provider_kwargs(settings("bge")) == {"intra_op_num_threads": 0}
    assert provider_kwargs(settings("bge", embed_threads=1)) == {"intra_op_num_threads": 1}
    assert provider_kwargs(settings("local", embed_threads=1)) == {}
    built = build_embedder("bge", **provider_kwargs(settings("bge", embed_threads=1)))
    assert built._session.get_session_options().intra_op_num_threads == 1  # type: ignore[attr-defined]
    with pytest.raises(ConfigurationError, match="EMBED_THREADS"):
        settings("bge", embed_threads=-1)
