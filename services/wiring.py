"""The vendor clients of a process, built once from ``Settings`` (top floor: it knows every adapter).

``build_clients`` is the ``ClientFactory`` that ``services.serve.start_runtime`` and ``orgmem replay``
hand to ``services.runtime.build_runtime``; ``Runtime.close`` closes what it builds.
"""

from __future__ import annotations

from embedder.providers import build_embedder
from extractor.llm import LlmExtractor
from retriever.vendors import ChatSynthesizer, HttpReranker
from services.embedding_config import EmbeddingConfig, provider_kwargs
from services.errors import ConfigurationError
from services.ports import Embedder
from services.runtime import Clients
from services.settings import Settings
from services.taxonomy import Registry


def build_checked_embedder(settings: Settings, embedding: EmbeddingConfig) -> Embedder:
    """The configured provider; it must report the model id and dimension the deployment expects."""
    embedder = build_embedder(settings.embedding_provider, **provider_kwargs(settings))
    if embedder.model != embedding.model or embedder.dim != embedding.dim:
        raise ConfigurationError(
            f"embedder reports {embedder.model}/{embedder.dim}, settings say {embedding.model}/{embedding.dim}",
            setting="EMBEDDING_PROVIDER",
        )
    return embedder


def build_clients(settings: Settings, embedding: EmbeddingConfig, registry: Registry) -> Clients:
    s = settings
    embedder = build_checked_embedder(s, embedding)  # first: the only one that can refuse the settings
    reranker = None
    if s.rerank_url:
        key = s.rerank_api_key.get_secret_value() if s.rerank_api_key else None
        reranker = HttpReranker(s.rerank_url, api_key=key)
    synthesizer = None
    if s.llm_base_url:
        key = s.llm_api_key.get_secret_value() if s.llm_api_key else None
        synthesizer = ChatSynthesizer(s.llm_base_url, api_key=key, model=s.llm_model)
    llm = LlmExtractor.from_settings(s, registry) if (s.llm_base_url or s.llm_api_key) else None
    return Clients(
        embedder=embedder,
        reranker=reranker,
        synthesizer=synthesizer,
        llm_extractor=llm,
    )
