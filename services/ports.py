"""The ports of the clients a process's ``Runtime`` holds: the embedding provider, the reranker, the
synthesizer and the LLM extractor. Adapters live with their stage (``embedder/``, ``retriever/vendors.py``,
``extractor/llm.py``); the top floor (``services/wiring.py``) builds them once per runtime, and
``Runtime.close`` closes them.

The embedding port
==================
What the embedder stage needs from any provider, and the query embedding the retriever uses.

Contract
--------
``await embedder.embed(texts)`` returns one L2-normalized ``list[float]`` of length ``dim`` per
input text, in input order. It accepts any number of texts and splits them into vendor/compute
batches of at most ``max_batch`` itself; ``max_batch`` is exposed so the stage can size its own
batches to match. ``model`` is the stable id stored next to each vector: the same id always means
the same vector space, so a change of model (or dimension) re-embeds.

Queries vs passages
-------------------
``embed`` is for passages (what gets stored); ``await embedder.embed_queries(texts)`` is for search
queries and obeys the same contract (same ``dim``, same vector space, input order). Asymmetric
models differ here: BGE prepends its retrieval instruction to queries only. Every other provider
embeds queries exactly like passages. Retrieval must embed queries with ``embed_queries``.

Spend
-----
Providers keep two ``EmbedUsage`` records:

- ``last_usage`` — what the most recent completed ``embed`` / ``embed_queries`` call cost (calls, tokens).
- ``total_usage`` — running totals since the provider was built (for metrics).

``last_usage`` is assigned in the same event-loop step in which ``embed`` (or ``embed_queries``)
returns, so reading it right after ``await embedder.embed(...)`` (before the caller's next
``await``) is race-free even when several tasks share one provider.

Errors
------
Vendor adapters raise ``services.errors.VendorError`` (transient: timeout, connection, 5xx, 429)
or ``services.errors.VendorRejectedError`` (permanent: other 4xx, wrong vector count/dimension).
Local providers only raise on programming errors.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import asyncpg


@dataclass(frozen=True, slots=True)
class EmbedUsage:
    """Spend of one or more embed calls. ``calls`` counts vendor requests / compute batches."""

    model: str
    calls: int = 0
    tokens: int = 0

    def __add__(self, other: EmbedUsage) -> EmbedUsage:
        if other.model != self.model:
            raise ValueError(f"cannot add usage of {other.model!r} to {self.model!r}")
        return EmbedUsage(self.model, self.calls + other.calls, self.tokens + other.tokens)


@runtime_checkable
class Embedder(Protocol):
    """A text-embedding provider. See the module docstring for the full contract."""

    @property
    def model(self) -> str:
        """Stable model id stored with each vector, e.g. ``local/all-MiniLM-L6-v2``."""
        ...

    @property
    def dim(self) -> int:
        """Length of every returned vector."""
        ...

    @property
    def max_batch(self) -> int:
        """Largest number of texts sent to the vendor / model in one call."""
        ...

    @property
    def last_usage(self) -> EmbedUsage:
        """Spend of the most recent completed ``embed`` or ``embed_queries`` call."""
        ...

    @property
    def total_usage(self) -> EmbedUsage:
        """Spend since this provider was built."""
        ...

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """Embed passages ``texts``; one L2-normalized vector per text, in input order."""
        ...

    async def embed_queries(self, texts: Sequence[str]) -> list[list[float]]:
        """Embed search queries (with the model's query instruction, if it has one); as ``embed`` otherwise."""
        ...

    async def aclose(self) -> None:
        """Release clients (HTTP pools). Idempotent; a no-op for local providers."""
        ...


class Reranker(Protocol):
    """A cross-encoder: ``(index, score)`` of the best texts for ``query``."""

    async def rerank(self, query: str, texts: Sequence[str]) -> list[tuple[int, float]]: ...

    async def aclose(self) -> None: ...


class Synthesizer(Protocol):
    """An answer written from numbered passages (the caller degrades to a citation list on failure)."""

    async def synthesize(self, query: str, passages: Sequence[str]) -> str: ...

    async def aclose(self) -> None: ...


class LlmExtraction(Protocol):
    """The LLM extraction client (``extractor.llm.LlmExtractor``): what the runtime needs to hold and
    close it. The extractor stage uses it through its own ``LinkSource`` port."""

    async def extract(self, conn: asyncpg.Connection, workspace: str, text: str) -> Sequence[object]: ...

    def take_spend(self) -> list[tuple[object, ...]]: ...

    async def probe(self) -> None:
        """Raise if the vendor is not answering (the stage's dependency watch)."""
        ...

    async def aclose(self) -> None: ...
