"""The runtime owns its clients: built once by the factory, every one ``aclose``d by ``Runtime.close``."""

from __future__ import annotations

from typing import Any

import pytest

from services.errors import ConfigurationError
from services.runtime import Clients, Runtime, close_clients


class Closeable:
    def __init__(self, fail: bool = False) -> None:
        self.closed = 0
        self.fail = fail

    async def aclose(self) -> None:
        self.closed += 1
        if self.fail:
            raise RuntimeError("vendor went away")


class Stoppable:
    def __init__(self, log: list[str], name: str) -> None:
        self.log, self.name = log, name

    async def stop(self) -> None:
        self.log.append(f"{self.name}.stop")

    async def close(self) -> None:
        self.log.append(f"{self.name}.close")


def runtime(clients: Clients, log: list[str]) -> Runtime:
    fake: Any = None
    rt = Runtime(
        settings=fake,
        pool=Stoppable(log, "pool"),
        store=Stoppable(log, "store"),  # type: ignore[arg-type]
        broker=Stoppable(log, "broker"),  # type: ignore[arg-type]
        publisher=Stoppable(log, "publisher"),  # type: ignore[arg-type]
        embedding=fake,
        clients=clients,
    )
    return rt


async def test_close_acloses_every_client_once_then_the_store_and_the_pool() -> None:
    log: list[str] = []
    embedder, reranker, synthesizer, llm = Closeable(), Closeable(), Closeable(), Closeable()
    rt = runtime(Clients(embedder, reranker, synthesizer, llm), log)  # type: ignore[arg-type]
    await rt.close()
    assert [c.closed for c in (embedder, reranker, synthesizer, llm)] == [1, 1, 1, 1]
    assert log == ["broker.stop", "publisher.stop", "store.close", "pool.close"]


async def test_a_failing_aclose_does_not_leak_the_others_and_is_reraised() -> None:
    log: list[str] = []
    embedder, reranker, synthesizer = Closeable(fail=True), Closeable(), Closeable(fail=True)
    rt = runtime(Clients(embedder, reranker, synthesizer, None), log)  # type: ignore[arg-type]
    with pytest.raises(RuntimeError, match="vendor went away"):
        await rt.close()
    assert [c.closed for c in (embedder, reranker, synthesizer)] == [1, 1, 1]
    assert log[-2:] == ["store.close", "pool.close"]


async def test_close_clients_skips_what_was_not_configured() -> None:
    await close_clients(Clients())


def test_a_runtime_without_an_embedder_says_which_setting() -> None:
    rt = runtime(Clients(), [])
    with pytest.raises(ConfigurationError) as err:
        _ = rt.embedder
    assert err.value.context["setting"] == "EMBEDDING_PROVIDER"
