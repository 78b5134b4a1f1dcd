"""The vendor clients of a process, built once from ``Settings`` (top floor: it knows every adapter).

``clients_for(needed)`` is the ``ClientFactory`` that ``services.serve.start_runtime`` and ``orgmem replay``
hand to ``services.runtime.build_runtime`` (``needed`` from the stage catalogue); ``Runtime.close`` closes
what it builds.
"""

from __future__ import annotations

from embedder.process import ProcessEmbedder
from embedder.providers import build_embedder
from extractor.llm import LlmExtractor
from retriever.vendors import ChatSynthesizer, HttpReranker
from services.embedding_config import EmbeddingConfig, provider_kwargs
from services.errors import ConfigurationError
from services.ports import Embedder, Reranker
from services.runtime import ClientFactory, ClientName, Clients
from services.settings import Settings
from services.taxonomy import Registry

LOCAL_MODELS = ("local", "bge")  # CPU models that ProcessEmbedder can host (EMBED_WORKER=process)


def build_checked_embedder(settings: Settings, embedding: EmbeddingConfig) -> Embedder:
    """The configured provider; it must report the model id and dimension the deployment expects."""
    embedder: Embedder
    if settings.embedding_provider in LOCAL_MODELS and settings.embed_worker == "process":
        embedder = ProcessEmbedder(settings.embedding_provider, **provider_kwargs(settings))
    else:
        embedder = build_embedder(settings.embedding_provider, **provider_kwargs(settings))
    if embedder.model != embedding.model or embedder.dim != embedding.dim:
        if isinstance(embedder, ProcessEmbedder):
            embedder.shutdown()
        raise ConfigurationError(
            f"embedder reports {embedder.model}/{embedder.dim}, settings say {embedding.model}/{embedding.dim}",
            setting="EMBEDDING_PROVIDER",
        )
    return embedder


def build_reranker(s: Settings) -> Reranker | None:
    """``RERANK_PROVIDER=onnx`` → the local cross-encoder; ``http`` (or a ``RERANK_URL``) → the vendor."""
    if s.rerank_provider == "onnx":
        if s.rerank_model_path is None:
            raise ConfigurationError("RERANK_PROVIDER=onnx needs RERANK_MODEL_PATH", field="rerank_model_path")
        from retriever.onnx_rerank import OnnxReranker

        return OnnxReranker(s.rerank_model_path, tokenizer_path=s.rerank_tokenizer_path)
    if s.rerank_provider == "http" and not s.rerank_url:
        raise ConfigurationError("RERANK_PROVIDER=http needs RERANK_URL", field="rerank_url")
    if s.rerank_url:
        key = s.rerank_api_key.get_secret_value() if s.rerank_api_key else None
        return HttpReranker(s.rerank_url, api_key=key)
    return None


ALL_CLIENTS: frozenset[ClientName] = frozenset({"embedder", "reranker", "synthesizer", "llm_extractor"})


def clients_for(needed: frozenset[ClientName]) -> ClientFactory:
    """The factory building only ``needed`` (an ingest-only process loads no embedding model)."""

    def build(settings: Settings, embedding: EmbeddingConfig, registry: Registry) -> Clients:
        return build_clients(settings, embedding, registry, needed=needed)

    return build


def build_clients(
    settings: Settings, embedding: EmbeddingConfig, registry: Registry, *, needed: frozenset[ClientName] = ALL_CLIENTS
) -> Clients:
    """Every configured client in ``needed``; the embedder is checked against the deployment's model and dimension."""
    s = settings
    # first: the only one that can refuse the settings, so a refusal leaks no HTTP client
    embedder = build_checked_embedder(s, embedding) if "embedder" in needed else None
    reranker = build_reranker(s) if "reranker" in needed else None
    synthesizer = None
    if s.llm_base_url and "synthesizer" in needed:
        key = s.llm_api_key.get_secret_value() if s.llm_api_key else None
        synthesizer = ChatSynthesizer(s.llm_base_url, api_key=key, model=s.llm_model)
    llm = None
    if (s.llm_base_url or s.llm_api_key) and "llm_extractor" in needed:
        llm = LlmExtractor.from_settings(s, registry)
    return Clients(
        embedder=embedder,
        reranker=reranker,
        synthesizer=synthesizer,
        llm_extractor=llm,
    )
