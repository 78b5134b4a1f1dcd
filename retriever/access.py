"""Access counts of returned passages, batched and off the request path (the access boost reads them).

``record`` only adds to an in-memory counter; one background flush per ``delay_s`` writes every pending
count in a single ``UPDATE … FROM unnest(…)``. A failed flush is logged with the number of counts it
could not write (a ranking signal, never content: the request that returned the passages has already
succeeded). ``aclose`` writes what is pending before the pool closes.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections import Counter
from collections.abc import Iterable

import asyncpg

from services.decay import decay_sql

log = logging.getLogger("orgmem.retriever.access")
DELAY_S = 0.5
ACCESS_HALF_LIFE_DAYS = 30.0
"""Usage decays: an access is worth half after this many days (``chunks.access_weight``, migration 0014)."""


def decayed_weight_sql(alias: str = "c") -> str:
    """``chunks.access_weight`` decayed from its ``accessed_at`` to the statement's ``now()``."""
    a = f"{alias}." if alias else ""
    return decay_sql(f"{a}access_weight", "now()", f"coalesce({a}accessed_at, now())", repr(ACCESS_HALF_LIFE_DAYS))


class AccessRecorder:
    """``frozen`` (evaluation) records nothing: every query then sees the same usage, whatever ran before it."""

    def __init__(self, pool: asyncpg.Pool, *, delay_s: float = DELAY_S, frozen: bool = False) -> None:
        self.pool = pool
        self.delay_s = delay_s
        self.frozen = frozen
        self.pending: Counter[uuid.UUID] = Counter()
        self.flushed = 0
        self._task: asyncio.Task[None] | None = None
        self._closed = False

    def record(self, chunk_ids: Iterable[uuid.UUID | str]) -> None:
        """Count one access per returned passage; schedules a flush (no I/O here)."""
        if self.frozen:
            return
        for cid in chunk_ids:
            self.pending[cid if isinstance(cid, uuid.UUID) else uuid.UUID(str(cid))] += 1
        if self.pending and not self._closed and (self._task is None or self._task.done()):
            self._task = asyncio.get_running_loop().create_task(self._later())

    async def _later(self) -> None:
        await asyncio.sleep(self.delay_s)
        await self.flush()

    async def flush(self) -> int:
        """Write every pending count in one statement; returns how many chunks were updated."""
        if not self.pending:
            return 0
        batch, self.pending = self.pending, Counter()
        ids, counts = list(batch), [batch[i] for i in batch]
        try:
            async with self.pool.acquire() as conn:
                await conn.execute(
                    "UPDATE chunks c SET access_count = c.access_count + k.n,"
                    f" access_weight = {decayed_weight_sql()} + k.n, accessed_at = now()"
                    " FROM unnest($1::uuid[], $2::int[]) AS k(id, n) WHERE c.id = k.id",
                    ids,
                    counts,
                )
        except (asyncpg.PostgresError, OSError, asyncpg.InterfaceError) as exc:
            log.warning("access counts not written for %d chunks: %s", len(ids), exc)
            return 0
        self.flushed += len(ids)
        return len(ids)

    async def aclose(self) -> None:
        self._closed = True
        if self._task is not None and not self._task.done():
            await self._task  # at most delay_s; cancelling could drop a batch mid-write
        await self.flush()
