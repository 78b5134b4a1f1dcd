"""What every embedding provider shares: the spend meter and the ``MeteredEmbedder`` base.

The port the providers implement (``Embedder``, its contract and ``EmbedUsage``) is on the runtime floor,
``services.ports``: the process's runtime holds one provider, shared by the embed stage and the retriever.
"""

from __future__ import annotations

from collections.abc import Sequence

from services.ports import EmbedUsage


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
    """What every provider shares: its identity (``model``, ``dim``, ``max_batch``), the spend meter behind
    ``last_usage`` / ``total_usage``, queries embedded exactly like passages, and a no-op ``aclose``.

    Subclasses call ``_identify`` in ``__init__`` and implement ``embed``; a model with a query instruction
    overrides ``embed_queries``, one holding clients ``aclose``.
    """

    _model: str
    _dim: int
    _max_batch: int
    _meter: UsageMeter

    def _identify(self, model: str, dim: int, max_batch: int) -> None:
        """Record the provider's identity and start its meter under the same model id, so usage rows
        can never name a different model than the vectors they paid for."""
        self._model = model
        self._dim = dim
        self._max_batch = max_batch
        self._meter = UsageMeter(model)

    @property
    def model(self) -> str:
        return self._model

    @property
    def dim(self) -> int:
        return self._dim

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
