"""OpenAI-compatible ``/embeddings`` adapter (OpenAI, vLLM, Ollama, TEI, LiteLLM, ...).

Error mapping (the stage's retry policy depends on it):

=============================================== ==========================================
vendor outcome                                  raised
=============================================== ==========================================
timeout, connection error, 5xx, 408, 429        ``VendorError`` (transient; ``retry_after``
                                                 in the context when the vendor sent one)
any other 4xx                                   ``VendorRejectedError`` (permanent)
body that fails validation, wrong vector count, ``VendorRejectedError`` — never padded,
wrong dimension, non-finite or zero vector      truncated or invented
=============================================== ==========================================

Vectors are re-normalized client-side (OpenAI's already are; some self-hosted servers'
are not). The ``openai`` client's own retries (``max_retries``, honouring ``Retry-After``) run
before an error reaches the stage; set it to 0 to leave all retrying to the stage.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, cast

import httpx
import openai
from pydantic import SecretStr

from embedder.metered import MeteredEmbedder
from services.errors import VendorError, VendorRejectedError

_TRANSIENT_STATUS = frozenset({408, 429})
_NO_KEY = "EMPTY"  # self-hosted servers ignore the key; never fall back to OPENAI_API_KEY


class OpenAICompatEmbedder(MeteredEmbedder):
    """``Embedder`` over an OpenAI-compatible ``/embeddings`` endpoint.

    ``model`` id is ``openai/<model>`` (``openai/<model>@<dimensions>`` when a reduced
    ``dimensions`` is requested). ``dim`` is required: the adapter checks every vector against it.
    Texts must be non-empty: OpenAI rejects empty inputs (→ ``VendorRejectedError``).
    """

    def __init__(
        self,
        *,
        model: str,
        dim: int,
        base_url: str | None = None,
        api_key: str | SecretStr | None = None,
        timeout: float = 30.0,
        max_retries: int = 2,
        max_batch: int = 128,
        dimensions: int | None = None,
        http_client: httpx.AsyncClient | None = None,
    ) -> None:
        if not model:
            raise ValueError("model is required")
        if dim < 1:
            raise ValueError(f"dim must be >= 1, got {dim}")
        if dimensions is not None and dimensions != dim:
            raise ValueError(f"dimensions ({dimensions}) must equal dim ({dim}) when set")
        if max_batch < 1:
            raise ValueError(f"max_batch must be >= 1, got {max_batch}")
        key = api_key.get_secret_value() if isinstance(api_key, SecretStr) else api_key
        self._vendor_model = model
        self._dimensions = dimensions
        self._identify(f"openai/{model}" if dimensions is None else f"openai/{model}@{dimensions}", dim, max_batch)
        self._client = openai.AsyncOpenAI(
            base_url=base_url,
            api_key=key or _NO_KEY,
            timeout=timeout,
            max_retries=max_retries,
            http_client=cast(Any, http_client),  # the client accepts httpx or httpx2 clients
        )

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        vectors: list[list[float]] = []
        calls = tokens = 0
        for start in range(0, len(texts), self._max_batch):
            batch = list(texts[start : start + self._max_batch])
            batch_vectors, batch_tokens = await self._embed_batch(batch)
            vectors.extend(batch_vectors)
            calls += 1
            tokens += batch_tokens
        self._meter.record(calls, tokens)
        return vectors

    async def aclose(self) -> None:
        await self._client.close()

    async def _embed_batch(self, batch: list[str]) -> tuple[list[list[float]], int]:
        extra: dict[str, Any] = {} if self._dimensions is None else {"dimensions": self._dimensions}
        try:
            response = await self._client.embeddings.create(
                model=self._vendor_model, input=batch, encoding_format="float", **extra
            )
        except openai.APIConnectionError as exc:  # includes APITimeoutError
            kind = "timeout" if isinstance(exc, openai.APITimeoutError) else "connection error"
            raise VendorError(f"embedding vendor {kind}", model=self._model, texts=len(batch)) from exc
        except openai.APIStatusError as exc:
            raise _status_error(exc, self._model, len(batch)) from exc
        except openai.APIResponseValidationError as exc:
            raise VendorRejectedError(
                "embedding vendor returned an invalid body", model=self._model, texts=len(batch)
            ) from exc
        vectors = self._check(response, len(batch))
        usage = getattr(response, "usage", None)
        tokens = int(getattr(usage, "prompt_tokens", 0) or getattr(usage, "total_tokens", 0) or 0)
        return vectors, tokens

    def _check(self, response: Any, expected: int) -> list[list[float]]:
        data = list(getattr(response, "data", None) or [])
        if len(data) != expected:
            raise VendorRejectedError(
                "embedding vendor returned the wrong number of vectors",
                model=self._model,
                expected=expected,
                got=len(data),
            )
        indices = [getattr(item, "index", position) for position, item in enumerate(data)]
        if sorted(indices) != list(range(expected)):
            raise VendorRejectedError("embedding vendor returned bad indices", model=self._model)
        ordered = [item for _, item in sorted(zip(indices, data, strict=True), key=lambda pair: pair[0])]
        vectors: list[list[float]] = []
        for index, item in enumerate(ordered):
            vector = item.embedding
            if not isinstance(vector, list) or len(vector) != self._dim:
                raise VendorRejectedError(
                    "embedding vendor returned the wrong dimension",
                    model=self._model,
                    index=index,
                    expected=self._dim,
                    got=len(vector) if isinstance(vector, list) else type(vector).__name__,
                )
            vectors.append(_normalized(vector, self._model, index))
        return vectors


def _normalized(vector: list[float], model: str, index: int) -> list[float]:
    norm = math.sqrt(math.fsum(float(x) * float(x) for x in vector))
    if not math.isfinite(norm) or norm == 0.0:
        raise VendorRejectedError("embedding vendor returned a zero or non-finite vector", model=model, index=index)
    return [float(x) / norm for x in vector]


def _status_error(exc: openai.APIStatusError, model: str, texts: int) -> VendorError | VendorRejectedError:
    status = exc.status_code
    if status >= 500 or status in _TRANSIENT_STATUS:
        retry_after = exc.response.headers.get("retry-after")
        return VendorError(
            f"embedding vendor answered {status}",
            model=model,
            status=status,
            texts=texts,
            retry_after=retry_after,
        )
    return VendorRejectedError(
        f"embedding vendor rejected the request with {status}: {_reason(exc)}",
        model=model,
        status=status,
        texts=texts,
    )


def _reason(exc: openai.APIStatusError) -> str:
    body = exc.body
    if isinstance(body, dict):
        error = body.get("error", body)
        if isinstance(error, dict) and error.get("message"):
            return str(error["message"])[:300]
    return exc.message[:300]
