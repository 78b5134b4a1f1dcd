"""One unit of work per batch: the one sequence every batch stage runs (issue 22 §1).

A stage's handler says only what is its own — how a record is parsed (``parse``), its idempotency key
(``key``), what is done before the transaction (``prepare``: slow vendor work, reads) and what is written in
it (``apply``). ``UnitOfWork.__call__`` owns the order, the way Quix Streams' ``Checkpoint.commit()`` owns
its commit order:

1. **decode or dead-letter**: ``parse`` each record; one that is the record's own fault (``REJECTED``) is
   dead-lettered with the field at fault, the others go on in log order;
2. ``prepare`` the decoded items, outside any transaction (the embedder's model calls, the extractor's
   reads and extraction: a vendor can be slow, a transaction must not wait on it);
3. in ONE transaction: ``claim`` the items' keys in ``processed_events`` (``services.db.processed``; ingest's
   claim also binds each envelope id to its content, ``services.idempotency``) → ``apply(conn, claim,
   prepared) -> Outcome`` → commit. If anything fails, ``Outcome.undo`` (when ``apply`` got that far) undoes
   what lives outside Postgres (ingest's archived blobs), and the error goes up to the delivery layer;
4. after the commit: the refused items are dead-lettered (an envelope id re-used for other content), the
   outgoing events are published (``apply`` includes the re-publish of a redelivered duplicate where a stage
   does that), then ``Outcome.done`` (counters, the proposal webhook).

Kafka offsets are committed by the fetch loop only after this returns (``services.kafka.consumer``); retry,
outage pause, bisect and dead letters stay in ``services.kafka.delivery``, which calls this as its handler.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Generic, Protocol, TypeVar

import asyncpg
from pydantic import BaseModel

from services.db import processed
from services.errors import InvalidPayloadError, UnresolvedAuthorError
from services.kafka.deadletters import DeadLetters
from services.kafka.decode import decode
from services.kafka.records import Record

Message = tuple[str, bytes, bytes | None, dict[str, str]]
"""One outgoing event: (topic, value, key, headers), as ``BrokerPublisher.send_many`` takes it."""
REJECTED: tuple[type[Exception], ...] = (InvalidPayloadError, UnresolvedAuthorError)
"""What ``parse`` raises for a record that is at fault on its own: it is dead-lettered, the batch goes on."""


class Carried(Protocol):
    """A decoded item knows the record it came from (dead letters, archives, positions)."""

    @property
    def record(self) -> Record: ...


class Publisher(Protocol):
    async def send_many(self, items: list[Message]) -> None: ...


E = TypeVar("E", bound=Carried)
P = TypeVar("P")
M = TypeVar("M", bound=BaseModel)


@dataclass(frozen=True, slots=True)
class Decoded(Generic[M]):
    """A record and its validated payload."""

    record: Record
    value: M


def decoded(record: Record, model: type[M]) -> Decoded[M]:
    """The ``parse`` of a stage whose payload is one model (headers checked, ``InvalidPayloadError`` names the
    field)."""
    return Decoded(record, decode(record, model))


@dataclass(frozen=True, slots=True)
class Claim(Generic[E]):
    """What the claim found. ``items``: every decoded item but the refused, in log order; ``fresh``: the items
    whose key this batch claimed now (in replay mode every item: apply is idempotent); ``refused``: items with
    the error they are dead-lettered with after the commit."""

    items: list[E]
    fresh: list[E]
    refused: list[tuple[E, Exception]] = field(default_factory=list)


Hook = Callable[[], Awaitable[None]]


@dataclass(slots=True)
class Outcome:
    """What ``apply`` leaves for after its transaction: events to publish once it committed, ``undo`` if the
    commit fails (effects outside Postgres), ``done`` once everything is out."""

    publish: list[Message] = field(default_factory=list)
    undo: Hook | None = None
    done: Hook | None = None


class UnitOfWork(Generic[E, P]):
    """The batch handler of a stage (a ``services.kafka.delivery.BatchHandler``); a stage subclasses it and
    defines ``parse``, ``key``, ``prepare`` and ``apply`` (see the module docstring for the order)."""

    stage: str

    def __init__(
        self, *, stage: str, pool: asyncpg.Pool, dead_letters: DeadLetters, publisher: Publisher | None = None
    ) -> None:
        self.stage = stage
        self.pool = pool
        self.dead_letters = dead_letters
        self.publisher = publisher

    def parse(self, record: Record) -> E:
        raise NotImplementedError

    def key(self, item: E) -> str:
        """The item's key in ``processed_events``."""
        raise NotImplementedError

    async def prepare(self, items: list[E]) -> P:
        """Work outside the transaction, before the claim (``Transactional``: none)."""
        raise NotImplementedError

    async def apply(self, conn: asyncpg.Connection, claim: Claim[E], prepared: P) -> Outcome:
        raise NotImplementedError

    async def claim(self, conn: asyncpg.Connection, items: list[E]) -> Claim[E]:
        """Record the items' keys as processed by this stage (first statement of the transaction)."""
        fresh = await processed.claim_events(conn, self.stage, list(dict.fromkeys(self.key(i) for i in items)))
        return Claim(items, [i for i in items if self.key(i) in fresh])

    async def __call__(self, records: Sequence[Record]) -> None:
        items = await self._decode(records)
        if not items:
            return
        prepared = await self.prepare(items)
        claim, outcome = await self._transact(items, prepared)
        for item, exc in claim.refused:  # after the commit: a crash before this re-finds them on redelivery
            await self.dead_letters.send(item.record, exc)
        if outcome.publish:
            if self.publisher is None:
                raise RuntimeError(f"{self.stage}: events to publish but no publisher")
            await self.publisher.send_many(outcome.publish)
        if outcome.done is not None:
            await outcome.done()

    async def _decode(self, records: Sequence[Record]) -> list[E]:
        items: list[E] = []
        for record in records:
            try:
                items.append(self.parse(record))
            except REJECTED as exc:  # one record's fault: its dead letter
                await self.dead_letters.send(record, exc)
        return items

    async def _transact(self, items: list[E], prepared: P) -> tuple[Claim[E], Outcome]:
        outcome: Outcome | None = None
        try:
            async with self.pool.acquire() as conn, conn.transaction():
                claim = await self.claim(conn, items)
                outcome = await self.apply(conn, claim, prepared)
        except BaseException:
            if outcome is not None and outcome.undo is not None:
                await outcome.undo()
            raise
        return claim, outcome


class Transactional(UnitOfWork[E, None]):
    """A stage with nothing to do outside its transaction."""

    async def prepare(self, items: list[E]) -> None:
        return None
