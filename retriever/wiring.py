"""The process's ``RetrieverService``, built once per ``Runtime`` from its clients (clients at the edge)."""

from __future__ import annotations

from retriever import learned_rank
from retriever.service import RetrieverService
from services.runtime import Runtime


def get_service(rt: Runtime) -> RetrieverService:
    """The runtime's retriever (shared by the RPC stage and the HTTP tools); built on first use."""

    def build() -> RetrieverService:
        service = RetrieverService(
            pool=rt.pool,
            read_pool=rt.reads,
            hierarchy=rt.hierarchy,
            embedder=rt.embedder,
            embedding=rt.embedding,
            reranker=rt.clients.reranker,
            synthesizer=rt.clients.synthesizer,
        )
        service.passages.learned = learned_rank.load(rt.settings.ranker_model_path)
        rt.on_close.append(service.aclose)  # pending access counts, before the pool closes
        return service

    return rt.owned(RetrieverService, build)
