"""Build the process's ``RetrieverService`` once from the ``Runtime`` (clients at the edge)."""

from __future__ import annotations

from embedder.stage import runtime_embedder
from retriever.service import RetrieverService
from retriever.vendors import ChatSynthesizer, HttpReranker
from services.runtime import Runtime

EXTRA_KEY = "retriever"


def get_service(rt: Runtime) -> RetrieverService:
    """The runtime's retriever; built on first use. Reuses the embed stage's provider when present."""
    existing = rt.extras.get(EXTRA_KEY)
    if isinstance(existing, RetrieverService):
        return existing
    s = rt.settings
    embedder = runtime_embedder(rt)  # shared with the embed stage; checked against the settings
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
        hierarchy=rt.hierarchy,
        embedder=embedder,
        embedding=rt.embedding,
        reranker=reranker,
        synthesizer=synthesizer,
    )
    rt.extras[EXTRA_KEY] = service
    rt.on_close.append(service.aclose)
    return service
