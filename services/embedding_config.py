"""Which embedding model a deployment uses — known without loading the model.

Ingest needs the model id (to carry stored vectors over); the retriever needs model id and
dimension (to pick the HNSW index). The embedder stage checks at boot that the provider it built
reports the same id and dimension, so the three can never disagree silently.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from services.settings import Settings

MINILM_DIM = 384
BGE_SMALL_MODEL = "local/bge-small-en-v1.5-q"
BGE_SMALL_DIM = 384


@dataclass(frozen=True, slots=True)
class EmbeddingConfig:
    provider: str
    model: str
    dim: int


def embedding_config(settings: Settings) -> EmbeddingConfig:
    if settings.embedding_provider == "hash":
        return EmbeddingConfig("hash", f"hash/v1-{settings.embedding_dim}", settings.embedding_dim)
    if settings.embedding_provider == "local":
        return EmbeddingConfig("local", "local/all-MiniLM-L6-v2", MINILM_DIM)
    if settings.embedding_provider == "bge":
        return EmbeddingConfig("bge", BGE_SMALL_MODEL, BGE_SMALL_DIM)
    return EmbeddingConfig("openai", f"openai/{settings.embedding_model}", settings.embedding_dim)


def provider_kwargs(settings: Settings) -> dict[str, Any]:
    """Keyword settings for ``embedder.providers.build_embedder``."""
    if settings.embedding_provider == "hash":
        return {"dim": settings.embedding_dim}
    if settings.embedding_provider == "bge":
        return {"intra_op_num_threads": settings.embed_threads}
    if settings.embedding_provider == "local":
        return {}
    return {
        "model": settings.embedding_model,
        "dim": settings.embedding_dim,
        "base_url": settings.embedding_base_url,
        "api_key": settings.embedding_api_key,
        "max_batch": settings.embed_batch_size,
    }
