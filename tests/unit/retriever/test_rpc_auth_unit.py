"""The retriever's RPC door with fakes: whatever the credential check says, exactly one reply, never a serve."""

from __future__ import annotations

import json
from typing import Any

from retriever.handler import RpcHandler
from retriever.rpc import sign_rpc
from services.credentials import KeyStore
from services.kafka.records import Record


class Publisher:
    def __init__(self) -> None:
        self.sent: list[tuple[str, dict[str, Any]]] = []

    async def send(self, topic: str, value: bytes, **_: Any) -> None:
        self.sent.append((topic, json.loads(value)))


class Service:
    pool: Any = None

    async def retrieve_context(self, *_: Any) -> Any:
        raise AssertionError("an unauthenticated request must not be served")


class DownStore(KeyStore):
    async def verifier(self, key_id: str) -> Any:
        raise ConnectionRefusedError("postgres down")


def record(headers: list[tuple[str, bytes]]) -> Record:
    base = [("reply_to", b"om.rpc.reply.c1.v1"), ("correlation_id", b"r1")]
    return Record("om.rpc.retrieve.v1", 0, 7, b"r1", b'{"request": {"query": "x"}}', tuple(base + headers))


def handler(keys: KeyStore | None, publisher: Publisher) -> RpcHandler:
    return RpcHandler(Service(), publisher, None, "om", tools={}, keys=keys)  # type: ignore[arg-type]


async def test_no_key_store_refuses_everything() -> None:
    pub = Publisher()
    await handler(None, pub).handle(record([]))
    assert [(t, b["ok"], b["error"]["status"]) for t, b in pub.sent] == [("om.rpc.reply.c1.v1", False, 401)]


async def test_unsigned_request_gets_one_401_reply() -> None:
    pub = Publisher()
    await handler(KeyStore(lambda: None, "dev-key"), pub).handle(record([]))
    assert [(b["error"]["status"], b["error"]["field"]) for _, b in pub.sent] == [(401, "x-orgmem-key-id")]


async def test_key_table_down_is_a_503_reply() -> None:
    pub = Publisher()
    body = b'{"request": {"query": "x"}}'
    signed = sign_rpc("dev-key", request_id="r1", reply_to="om.rpc.reply.c1.v1", deadline="", body=body)
    await handler(DownStore(lambda: None, None), pub).handle(record(signed))
    assert [(b["error"]["status"], b["error"]["type"]) for _, b in pub.sent] == [(503, "Unavailable")]
