"""``build_embedder(provider, **settings)``: the one place that turns settings into a provider.

======== ============================================ ================================================
provider class                                        settings (all optional unless noted)
======== ============================================ ================================================
hash     :class:`embedder.hashing.HashingEmbedder`    ``dim`` (384), ``max_batch`` (256) — tests only
local    :class:`embedder.minilm.MiniLMEmbedder`      ``model_dir`` (the wheel's), ``max_batch`` (32),
                                                      ``max_seq_length`` (256)
bge      :class:`embedder.bge.BGESmallEmbedder`       ``model_dir`` (``bge.default_model_dir()``,
                                                      filled by ``make models``), ``max_batch`` (32),
                                                      ``max_seq_length`` (512),
                                                      ``intra_op_num_threads`` (0 = onnxruntime's)
openai   :class:`embedder.openai_compat.OpenAICompat  ``model`` and ``dim`` (required), ``base_url``,
         Embedder`                                    ``api_key`` (str or SecretStr), ``timeout``,
                                                      ``max_retries``, ``max_batch``, ``dimensions``,
                                                      ``http_client``
======== ============================================ ================================================

Unknown providers or settings raise ``services.errors.ConfigurationError`` naming them, so a
bad configuration stops the process at boot (so do missing model files). Heavy imports (numpy
model, onnxruntime, openai) happen only for the provider asked for.
"""

from __future__ import annotations

import inspect
from typing import Any

from services.errors import ConfigurationError
from services.ports import Embedder

PROVIDERS = ("hash", "local", "bge", "openai")


def build_embedder(provider: str, **settings: Any) -> Embedder:
    """Build the embedding provider named ``provider`` from keyword ``settings``."""
    name = provider.strip().lower()
    factory: Any
    if name == "hash":
        from embedder.hashing import HashingEmbedder

        factory = HashingEmbedder
    elif name == "local":
        from embedder.minilm import MiniLMEmbedder

        factory = MiniLMEmbedder
    elif name == "bge":
        from embedder.bge import BGESmallEmbedder

        factory = BGESmallEmbedder
    elif name == "openai":
        from embedder.openai_compat import OpenAICompatEmbedder

        factory = OpenAICompatEmbedder
    else:
        raise ConfigurationError(
            f"unknown embedding provider {provider!r}; expected one of {', '.join(PROVIDERS)}",
            setting="embedding_provider",
        )
    accepted = set(inspect.signature(factory).parameters)
    unknown = sorted(set(settings) - accepted)
    if unknown:
        raise ConfigurationError(
            f"unknown settings for embedding provider {name!r}: {', '.join(unknown)}",
            setting="embedding_provider",
            accepted=sorted(accepted),
        )
    try:
        embedder: Embedder = factory(**settings)
    except (TypeError, ValueError) as exc:
        raise ConfigurationError(
            f"invalid settings for embedding provider {name!r}: {exc}", setting="embedding_provider"
        ) from exc
    return embedder
