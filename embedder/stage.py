"""Embedder stage wiring: group ``om-embed`` on ``om.chunks.v1``.

The provider is built once per process (MiniLM loads its weights once) and must report the model
id and dimension the deployment is configured for (``services.embedding_config``).
"""

from __future__ import annotations

from embedder.handler import EmbedHandler
from embedder.port import Embedder
from embedder.process import ProcessEmbedder
from embedder.providers import build_embedder
from services.embedding_config import provider_kwargs
from services.errors import ConfigurationError
from services.kafka.delivery import DeadLetters
from services.runtime import Runtime
from services.stagekit import register_batch_stage

STAGE = "embed"
TOPIC = "chunks"
LOCAL_MODELS = ("local", "bge")  # CPU models that ProcessEmbedder can host


def runtime_embedder(rt: Runtime) -> Embedder:
    """The process's embedding provider (shared by the embed stage and the retriever)."""
    existing = rt.extras.get("embedder")
    if existing is not None:
        return existing  # type: ignore[no-any-return]
    s = rt.settings
    embedder: Embedder
    if s.embedding_provider in LOCAL_MODELS and s.embed_worker == "process":
        embedder = ProcessEmbedder(s.embedding_provider, **provider_kwargs(s))
    else:
        embedder = build_embedder(s.embedding_provider, **provider_kwargs(s))
    if embedder.model != rt.embedding.model or embedder.dim != rt.embedding.dim:
        if isinstance(embedder, ProcessEmbedder):
            embedder.shutdown()
        raise ConfigurationError(
            f"embedder reports {embedder.model}/{embedder.dim}, settings say {rt.embedding.model}/{rt.embedding.dim}",
            setting="EMBEDDING_PROVIDER",
        )
    rt.extras["embedder"] = embedder
    return embedder


def build_handler(rt: Runtime, dead_letters: DeadLetters) -> EmbedHandler:
    return EmbedHandler(
        pool=rt.pool,
        embedder=runtime_embedder(rt),
        provider=rt.settings.embedding_provider,
        dead_letters=dead_letters,
    )


def register(rt: Runtime) -> None:
    register_batch_stage(
        rt,
        stage=STAGE,
        topic=TOPIC,
        build=build_handler,
        # a backlog fills several model batches per poll; the handler stores one while the model runs the next
        max_records=max(1, rt.settings.embed_batch_size * 2),
        description="Embeds chunks that lack a vector for the configured model (cache + carry-over first)",
    )
