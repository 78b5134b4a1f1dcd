"""Embedder stage wiring (catalogue entry ``embed``): group ``om-embed`` on ``om.chunks.v1``.

The provider is the runtime's (``Runtime.embedder``, built once per process by the top floor and checked
there against ``services.embedding_config``), shared with the retriever.
"""

from __future__ import annotations

from embedder.handler import EmbedHandler
from services.kafka.delivery import DeadLetters
from services.runtime import Runtime


def build_handler(rt: Runtime, dead_letters: DeadLetters) -> EmbedHandler:
    return EmbedHandler(
        pool=rt.pool,
        embedder=rt.embedder,
        provider=rt.settings.embedding_provider,
        dead_letters=dead_letters,
    )
