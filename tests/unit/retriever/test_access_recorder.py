"""AccessRecorder: counts are batched off the request path — many responses, one UPDATE per flush."""

from __future__ import annotations

import asyncio
import uuid
from contextlib import asynccontextmanager
from typing import Any

from retriever.access import AccessRecorder


class FakePool:
    def __init__(self) -> None:
        self.statements: list[tuple[str, tuple[Any, ...]]] = []

    @asynccontextmanager
    async def acquire(self) -> Any:
        pool = self

        class Conn:
            async def execute(self, sql: str, *args: Any) -> str:
                pool.statements.append((sql, args))
                return "UPDATE"

        yield Conn()


async def test_many_records_one_statement_with_summed_counts() -> None:
    pool = FakePool()
    rec = AccessRecorder(pool, delay_s=0.05)
    a, b = uuid.uuid4(), uuid.uuid4()
    rec.record([a, b])
    rec.record([str(a)])
    assert pool.statements == []  # nothing written on the request path
    await asyncio.sleep(0.15)
    [(sql, (ids, counts))] = pool.statements
    assert "access_count = c.access_count + k.n" in sql
    assert dict(zip(ids, counts, strict=True)) == {a: 2, b: 1}
    rec.record([b])
    await rec.aclose()  # pending counts are written on close
    assert pool.statements[-1][1] == ([b], [1]) and rec.flushed == 3
