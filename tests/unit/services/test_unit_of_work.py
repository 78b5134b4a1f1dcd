"""The order ``services.unit_of_work.UnitOfWork`` owns, on a fake pool that logs every step: decode or
dead-letter → prepare (no transaction) → claim → apply → commit → refused dead letters → publish → done; a
failed commit runs ``undo`` and publishes nothing."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import asyncpg
import pytest

from schemas.events import ChunksToEmbed
from services.errors import IdempotencyConflictError
from services.kafka.records import Record
from services.unit_of_work import Claim, Decoded, Message, Outcome, UnitOfWork, decoded


class Steps:
    def __init__(self, *, fail_commit: bool = False) -> None:
        self.log: list[str] = []
        self.fail_commit = fail_commit
        self.in_transaction = False


class FakeConn:
    def __init__(self, steps: Steps) -> None:
        self.steps = steps

    async def fetch(self, sql: str, *args: Any) -> list[dict[str, str]]:
        self.steps.log.append("claim")
        return [{"event_key": k} for k in args[1] if k != "seen"]

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[None]:
        self.steps.in_transaction = True
        yield
        self.steps.in_transaction = False
        if self.steps.fail_commit:
            raise asyncpg.exceptions.SerializationError("commit refused")
        self.steps.log.append("commit")


class FakePool:
    def __init__(self, steps: Steps) -> None:
        self.steps = steps

    @asynccontextmanager
    async def acquire(self) -> AsyncIterator[FakeConn]:
        yield FakeConn(self.steps)


class Letters:
    def __init__(self, steps: Steps) -> None:
        self.steps = steps

    async def send(self, record: Record, exc: BaseException, **_: Any) -> None:
        self.steps.log.append(f"dead letter {record.offset} {type(exc).__name__}")


class Publisher:
    def __init__(self, steps: Steps) -> None:
        self.steps = steps

    async def send_many(self, items: list[Message]) -> None:
        self.steps.log.append(f"publish {len(items)}")


Item = Decoded[ChunksToEmbed]


class Work(UnitOfWork[Item, str]):
    def __init__(self, steps: Steps) -> None:
        super().__init__(stage="t", pool=FakePool(steps), dead_letters=Letters(steps), publisher=Publisher(steps))  # type: ignore[arg-type]
        self.steps = steps

    def parse(self, record: Record) -> Item:
        return decoded(record, ChunksToEmbed)

    def key(self, item: Item) -> str:
        return "seen" if item.record.offset == 2 else item.record.position

    async def prepare(self, items: list[Item]) -> str:
        assert not self.steps.in_transaction
        self.steps.log.append(f"prepare {len(items)}")
        return "prepared"

    async def claim(self, conn: asyncpg.Connection, items: list[Item]) -> Claim[Item]:
        claim = await super().claim(conn, items)
        return Claim(claim.items, claim.fresh, [(i, IdempotencyConflictError("re-used")) for i in items[:1]])

    async def apply(self, conn: asyncpg.Connection, claim: Claim[Item], prepared: str) -> Outcome:
        assert self.steps.in_transaction and prepared == "prepared"
        self.steps.log.append(f"apply {len(claim.fresh)} fresh of {len(claim.items)}")

        async def undo() -> None:
            self.steps.log.append("undo")

        async def done() -> None:
            self.steps.log.append("done")

        return Outcome(publish=[("out", b"v", None, {})], undo=undo, done=done)


def _records() -> list[Record]:
    good = ChunksToEmbed(workspace="w", document_id=uuid.uuid4(), version=1, chunk_ids=[uuid.uuid4()]).model_dump_json()
    return [Record("in", 0, i, None, b"not json" if i == 1 else good.encode()) for i in range(3)]


async def test_the_order_of_one_batch() -> None:
    steps = Steps()
    await Work(steps)(_records())
    assert steps.log == [
        "dead letter 1 InvalidPayloadError",  # decoded or dead-lettered first
        "prepare 2",  # outside the transaction
        "claim",
        "apply 1 fresh of 2",  # offset 2's key was processed before
        "commit",
        "dead letter 0 IdempotencyConflictError",  # refused: after the commit
        "publish 1",
        "done",
    ]


async def test_a_failed_commit_undoes_and_publishes_nothing() -> None:
    steps = Steps(fail_commit=True)
    with pytest.raises(asyncpg.exceptions.SerializationError):
        await Work(steps)(_records())
    assert steps.log == ["dead letter 1 InvalidPayloadError", "prepare 2", "claim", "apply 1 fresh of 2", "undo"]
