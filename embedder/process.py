"""A local model in its own process, so model work never fights the stages' event loop for the GIL.

With every stage in one process (``orgmem up``), the numpy MiniLM forward pass in a worker *thread* runs
hundreds of short GIL-releasing numpy calls per batch; each reacquires the GIL against an event loop busy with
the other stages' Python (extraction, graph writes), and the model ran at a fraction of its standalone speed.
``ProcessEmbedder`` builds the provider in one child process (``spawn``) and sends it texts; the parent only
pickles strings out and a float32 array back. The ``Embedder`` contract is unchanged (``services.ports.Embedder``):
same model id, dimension, batch size, vectors and spend as the wrapped provider.

One worker: the model itself uses both cores (BLAS / onnxruntime threads); calls queue in order.
"""

from __future__ import annotations

import asyncio
import multiprocessing
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from typing import Any

import numpy as np

from embedder.metered import MeteredEmbedder
from services.errors import ConfigurationError
from services.ports import Embedder

_WORKER: Embedder | None = None
_LOOP: asyncio.AbstractEventLoop | None = None
_FAILED: str | None = None


def _init(provider: str, settings: dict[str, Any]) -> None:
    global _WORKER, _LOOP, _FAILED
    from embedder.providers import build_embedder

    try:
        _WORKER = build_embedder(provider, **settings)
    except Exception as exc:  # reported by _describe: an initializer failure would only break the pool
        _FAILED = str(exc)
        return
    _LOOP = asyncio.new_event_loop()


def _describe() -> tuple[str, int, int] | str:
    if _WORKER is None:
        return _FAILED or "the embedding provider did not start"
    return _WORKER.model, _WORKER.dim, _WORKER.max_batch


def _run(texts: list[str], queries: bool) -> tuple[np.ndarray[Any, np.dtype[np.float32]], int, int]:
    assert _WORKER is not None and _LOOP is not None
    call = _WORKER.embed_queries if queries else _WORKER.embed
    vectors = _LOOP.run_until_complete(call(texts))
    usage = _WORKER.last_usage
    return np.asarray(vectors, dtype=np.float32), usage.calls, usage.tokens


class ProcessEmbedder(MeteredEmbedder):
    """``Embedder`` that runs ``build_embedder(provider, **settings)`` in a child process."""

    def __init__(self, provider: str, **settings: Any) -> None:
        self._pool: ProcessPoolExecutor | None = ProcessPoolExecutor(
            max_workers=1,
            mp_context=multiprocessing.get_context("spawn"),
            initializer=_init,
            initargs=(provider, settings),
        )
        try:
            # blocks once at boot while the child loads the model; a bad setting raises here, naming it
            described = self._pool.submit(_describe).result()
            if isinstance(described, str):
                raise ConfigurationError(described, setting="EMBEDDING_PROVIDER")
        except BaseException:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None
            raise
        self._identify(*described)
        self.provider = provider

    async def _call(self, texts: Sequence[str], queries: bool) -> list[list[float]]:
        if not texts:
            self._meter.record(0, 0)
            return []
        if self._pool is None:
            raise RuntimeError("ProcessEmbedder used after aclose()")
        loop = asyncio.get_running_loop()
        vectors, calls, tokens = await loop.run_in_executor(self._pool, _run, list(texts), queries)
        self._meter.record(calls, tokens)
        result: list[list[float]] = vectors.tolist()
        return result

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        return await self._call(texts, False)

    async def embed_queries(self, texts: Sequence[str]) -> list[list[float]]:
        return await self._call(texts, True)

    def shutdown(self) -> None:
        """Stop the child process now (synchronous; ``aclose`` is the async form)."""
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)

    async def aclose(self) -> None:
        pool, self._pool = self._pool, None
        if pool is not None:
            await asyncio.get_running_loop().run_in_executor(None, pool.shutdown)
