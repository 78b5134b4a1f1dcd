"""The process's ``RetrieverService``, built once per ``Runtime`` from its clients (clients at the edge)."""

from __future__ import annotations

from weakref import WeakKeyDictionary

from retriever.service import RetrieverService
from services.runtime import Runtime

_SERVICES: WeakKeyDictionary[Runtime, RetrieverService] = WeakKeyDictionary()


def get_service(rt: Runtime) -> RetrieverService:
    """The runtime's retriever (shared by the RPC stage and the HTTP tools); built on first use."""
    service = _SERVICES.get(rt)
    if service is None:
        service = RetrieverService(
            pool=rt.pool,
            read_pool=rt.reads,
            hierarchy=rt.hierarchy,
            embedder=rt.embedder,
            embedding=rt.embedding,
            reranker=rt.clients.reranker,
            synthesizer=rt.clients.synthesizer,
        )
        _SERVICES[rt] = service
        rt.on_close.append(service.aclose)  # pending access counts, before the pool closes
    return service
