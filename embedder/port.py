"""The embedding port: what the embedder stage needs from any provider.

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


class UsageMeter:
    """Small helper providers use to keep ``last_usage`` and ``total_usage`` consistent."""

    __slots__ = ("last", "total")

    def __init__(self, model: str) -> None:
        self.last = EmbedUsage(model)
        self.total = EmbedUsage(model)

    def record(self, calls: int, tokens: int) -> None:
        self.last = EmbedUsage(self.total.model, calls, tokens)
        self.total = self.total + self.last


class MeteredEmbedder:
    """What every provider shares: ``max_batch``, the spend meter behind ``last_usage`` /
    ``total_usage``, queries embedded exactly like passages, and a no-op ``aclose``.

    Subclasses set ``self._max_batch`` and ``self._meter`` in ``__init__`` and implement ``embed``;
    a model with a query instruction overrides ``embed_queries``, one holding clients ``aclose``.
    """

    _max_batch: int
    _meter: UsageMeter

    @property
    def max_batch(self) -> int:
        return self._max_batch

    @property
    def last_usage(self) -> EmbedUsage:
        return self._meter.last

    @property
    def total_usage(self) -> EmbedUsage:
        return self._meter.total

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        raise NotImplementedError

    async def embed_queries(self, texts: Sequence[str]) -> list[list[float]]:
        """Queries are embedded exactly like passages (no query instruction)."""
        return await self.embed(texts)

    async def aclose(self) -> None:
        return None
