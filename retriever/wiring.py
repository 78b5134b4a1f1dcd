"""Build the process's ``RetrieverService`` once from the ``Runtime`` (clients at the edge)."""

from __future__ import annotations

from embedder.providers import build_embedder
from retriever.scope import OrgHierarchy
from retriever.service import RetrieverService
from retriever.vendors import ChatSynthesizer, HttpReranker
from services.embedding_config import provider_kwargs
from services.errors import ConfigurationError
from services.runtime import Runtime

EXTRA_KEY = "retriever"


def get_service(rt: Runtime) -> RetrieverService:
    """The runtime's retriever; built on first use. Reuses the embed stage's provider when present."""
    existing = rt.extras.get(EXTRA_KEY)
    if isinstance(existing, RetrieverService):
        return existing
    s = rt.settings
    embedder = rt.extras.get("embedder")
    if embedder is None:
        embedder = build_embedder(s.embedding_provider, **provider_kwargs(s))
        rt.extras["embedder"] = embedder
    if embedder.model != rt.embedding.model or embedder.dim != rt.embedding.dim:
        raise ConfigurationError(
            f"embedder reports {embedder.model}/{embedder.dim}, settings say {rt.embedding.model}/{rt.embedding.dim}",
            setting="EMBEDDING_PROVIDER",
        )
    try:
        hierarchy = OrgHierarchy.from_config(rt.hierarchy_config)
    except ValueError as exc:
        raise ConfigurationError(f"invalid org hierarchy: {exc}", setting="ORG_HIERARCHY_PATH") from exc
    reranker = None
    if s.rerank_url:
        key = s.rerank_api_key.get_secret_value() if s.rerank_api_key else None
        reranker = HttpReranker(s.rerank_url, api_key=key)
    synthesizer = None
    if s.llm_base_url:
        key = s.llm_api_key.get_secret_value() if s.llm_api_key else None
        synthesizer = ChatSynthesizer(s.llm_base_url, api_key=key, model=s.llm_model)
    service = RetrieverService(
        pool=rt.pool,
        hierarchy=hierarchy,
        embedder=embedder,
        embedding=rt.embedding,
        reranker=reranker,
        synthesizer=synthesizer,
    )
    rt.extras[EXTRA_KEY] = service
    return service
