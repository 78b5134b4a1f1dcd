"""Embedder stage wiring: group ``om-embed`` on ``om.chunks.v1``.

The provider is built when the stage registers (MiniLM loads its weights once) and must report the
model id and dimension the deployment is configured for (``services.embedding_config``).
"""

from __future__ import annotations

from collections.abc import Sequence

from embedder.handler import EmbedHandler
from embedder.providers import build_embedder
from services.embedding_config import provider_kwargs
from services.errors import ConfigurationError
from services.kafka.app import subscribe_batch
from services.kafka.records import Record
from services.runtime import Runtime

STAGE = "embed"


def register(rt: Runtime) -> None:
    s = rt.settings
    embedder = rt.extras.get("embedder") or build_embedder(s.embedding_provider, **provider_kwargs(s))
    if embedder.model != rt.embedding.model or embedder.dim != rt.embedding.dim:
        raise ConfigurationError(
            f"embedder reports {embedder.model}/{embedder.dim}, settings say {rt.embedding.model}/{rt.embedding.dim}",
            setting="EMBEDDING_PROVIDER",
        )
    rt.extras["embedder"] = embedder
    handler: EmbedHandler | None = None

    async def handle(records: Sequence[Record]) -> None:
        assert handler is not None
        await handler(records)

    dead_letters = subscribe_batch(
        rt.broker, s, rt.publisher, stage=STAGE, topic=s.topic("chunks"), handler=handle,
        max_records=max(1, s.embed_batch_size // 2),
        description="Embeds chunks that lack a vector for the configured model (cache + carry-over first)",
    )
    handler = EmbedHandler(pool=rt.pool, embedder=embedder, provider=s.embedding_provider,
                           dead_letters=dead_letters)
    rt.extras["embed_handler"] = handler
