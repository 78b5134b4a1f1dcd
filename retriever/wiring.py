"""Build the process's ``RetrieverService`` once from the ``Runtime`` (clients at the edge)."""

from __future__ import annotations

from embedder.stage import runtime_embedder
from retriever.service import RetrieverService
from retriever.vendors import ChatSynthesizer, HttpReranker, Reranker
from services.errors import ConfigurationError
from services.runtime import Runtime
from services.settings import Settings

EXTRA_KEY = "retriever"


def get_service(rt: Runtime) -> RetrieverService:
    """The runtime's retriever; built on first use. Reuses the embed stage's provider when present."""
    existing = rt.extras.get(EXTRA_KEY)
    if isinstance(existing, RetrieverService):
        return existing
    s = rt.settings
    embedder = runtime_embedder(rt)  # shared with the embed stage; checked against the settings
    reranker = build_reranker(s)
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
    return service


def build_reranker(s: Settings) -> Reranker | None:
    """``RERANK_PROVIDER=onnx`` → the local cross-encoder; ``http`` (or a ``RERANK_URL``) → the vendor."""
    reranker: Reranker | None = None
    if s.rerank_provider == "onnx":
        if s.rerank_model_path is None:
            raise ConfigurationError("RERANK_PROVIDER=onnx needs RERANK_MODEL_PATH", field="rerank_model_path")
        from retriever.onnx_rerank import OnnxReranker

        reranker = OnnxReranker(s.rerank_model_path, tokenizer_path=s.rerank_tokenizer_path)
    elif s.rerank_provider == "http" and not s.rerank_url:
        raise ConfigurationError("RERANK_PROVIDER=http needs RERANK_URL", field="rerank_url")
    elif s.rerank_url:
        key = s.rerank_api_key.get_secret_value() if s.rerank_api_key else None
        reranker = HttpReranker(s.rerank_url, api_key=key)
    return reranker
