"""The clients one process needs, built once at startup, injected into stages and routes, closed once.

``build_runtime(settings, clients)`` connects Postgres (refusing an unmigrated/newer schema), the object
store and the broker, and takes the vendor clients (``Clients``: embedder, reranker, synthesizer, LLM
extractor) from the factory the top floor passes in (``services.wiring.build_clients``): the runtime floor
knows the clients only by their ports (``services.ports``). ``Runtime.close`` closes every one of them.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

import asyncpg
from faststream.kafka import KafkaBroker

from services.db.migrate import check_schema
from services.db.pool import create_pool
from services.db.readpool import ReadPool
from services.embedding_config import EmbeddingConfig, embedding_config
from services.errors import ConfigurationError
from services.hierarchy import OrgHierarchy
from services.kafka.app import BrokerPublisher, build_broker
from services.kafka.consumer import StageConsumer
from services.kafka.delivery import BatchHandler
from services.kafka.watch import DependencyWatch
from services.objectstore import ObjectStore, build_object_store
from services.ports import Embedder, LlmExtraction, Reranker, Synthesizer
from services.settings import Settings
from services.taxonomy import Registry, default_registry, load_registry
from services.tracing import TracedPublisher

log = logging.getLogger("orgmem.runtime")


@dataclass
class Clients:
    """The vendor clients of one runtime; ``None`` = not configured (or not needed by this process)."""

    embedder: Embedder | None = None
    reranker: Reranker | None = None
    synthesizer: Synthesizer | None = None
    llm_extractor: LlmExtraction | None = None


T = TypeVar("T")
ClientFactory = Callable[[Settings, EmbeddingConfig, Registry], Clients]
ClientName = Literal["embedder", "reranker", "synthesizer", "llm_extractor"]
"""A ``Clients`` field: what a stage (``services.stagekit.Stage.clients``) or the HTTP API needs built."""


@dataclass(eq=False)
class Runtime:
    settings: Settings
    pool: asyncpg.Pool
    store: ObjectStore
    broker: KafkaBroker
    publisher: BrokerPublisher
    embedding: EmbeddingConfig
    hierarchy: OrgHierarchy = field(default_factory=lambda: OrgHierarchy({}))
    registry: Registry = field(default_factory=default_registry)
    clients: Clients = field(default_factory=Clients)
    stages: list[str] = field(default_factory=list)
    watches: dict[str, DependencyWatch] = field(default_factory=dict)  # per stage: outage vs poison
    handlers: dict[str, BatchHandler] = field(default_factory=dict)
    consumers: list[StageConsumer] = field(default_factory=list)
    """The fetch loop of each registered batch stage (started by ``start``, drained by ``close``)."""
    """The bound batch handler of each registered stage, by stage name (replay and tests read it)."""
    on_close: list[Callable[[], Awaitable[None]]] = field(default_factory=list)
    """Run first on close, while the pool is open (e.g. the retriever's pending access counts)."""
    read_pool: ReadPool | None = None
    """Reads that may come from the streaming replica (``DATABASE_READ_URL``); ``None`` = the primary."""
    _graph_walk_slots: asyncio.Semaphore | None = field(default=None, init=False, repr=False)
    _owned: dict[type, object] = field(default_factory=dict, init=False, repr=False)
    """The services built once from this runtime's clients (retriever, memory writes, profile synthesis)."""

    def owned(self, kind: type[T], build: Callable[[], T]) -> T:
        """This runtime's one ``kind`` service, built by ``build`` on first use. What a runtime owns is a
        field of the runtime (no module-global cache keyed by runtime): it lives and dies with it."""
        found = self._owned.get(kind)
        if found is None:
            found = self._owned[kind] = build()
        assert isinstance(found, kind)
        return found

    @property
    def reads(self) -> ReadPool:
        """Where read-only queries acquire connections: the replica when configured and caught up, else the primary."""
        if self.read_pool is None:
            self.read_pool = ReadPool(self.pool, None)
        return self.read_pool

    @property
    def graph_walk_slots(self) -> asyncio.Semaphore:
        """At most ``GRAPH_WALK_CONCURRENCY`` path walks hold a connection at once (every door: HTTP, MCP)."""
        if self._graph_walk_slots is None:
            self._graph_walk_slots = asyncio.Semaphore(self.settings.graph_walk_concurrency)
        return self._graph_walk_slots

    @property
    def embedder(self) -> Embedder:
        """The process's embedding provider (shared by the embed stage and the retriever)."""
        if self.clients.embedder is None:
            raise ConfigurationError(
                "no embedding provider was built for this runtime (none of its stages needs one)",
                setting="EMBEDDING_PROVIDER",
            )
        return self.clients.embedder

    async def start(self) -> None:
        """Connect the producer and the broker; the stages registered by then start consuming."""
        await self.publisher.start()
        await self.broker.start()
        for consumer in self.consumers:
            await consumer.start()

    async def close(self) -> None:
        try:
            for consumer in self.consumers:  # the batch in flight finishes and commits first
                try:
                    await consumer.stop()
                except Exception as exc:
                    log.warning("stopping %s's consumer failed: %s", consumer.stage, exc)
            for hook in self.on_close:
                try:
                    await hook()
                except Exception as exc:
                    log.warning("close hook %s failed: %s", getattr(hook, "__qualname__", hook), exc)
            await self.broker.stop()
            await self.publisher.stop()
        finally:
            try:
                await close_clients(self.clients)
            finally:
                await self.store.close()
                try:
                    if self.read_pool is not None:
                        await self.read_pool.close()
                finally:
                    await self.pool.close()


async def close_clients(clients: Clients) -> None:
    """``aclose`` every client, each once, even when one of them fails (the first failure is re-raised)."""
    failure: BaseException | None = None
    for client in (clients.embedder, clients.reranker, clients.synthesizer, clients.llm_extractor):
        if client is None:
            continue
        try:
            await client.aclose()
        except Exception as exc:
            log.warning("closing %s failed: %s", type(client).__name__, exc)
            failure = failure or exc
    if failure is not None:
        raise failure


async def _read_pool(settings: Settings, primary: asyncpg.Pool) -> ReadPool:
    """The replica pool (lazy: min_size 0, so a replica that is down at boot only means reads use the primary)."""
    if not settings.database_read_url:
        return ReadPool(primary, None)
    replica_settings = settings.model_copy(update={"database_url": settings.database_read_url})
    replica = await create_pool(replica_settings, min_size=0)
    return ReadPool(primary, replica, wait_s=settings.read_min_lsn_wait_s)


def load_hierarchy(settings: Settings) -> OrgHierarchy:
    """The org hierarchy (group expansion, scope tiers), validated once at boot."""
    if settings.org_hierarchy_path is None:
        return OrgHierarchy({})
    try:
        data: dict[str, Any] = json.loads(settings.org_hierarchy_path.read_text())
        return OrgHierarchy.from_config(data)
    except (OSError, ValueError) as exc:
        raise ConfigurationError(f"invalid org hierarchy: {exc}", setting="ORG_HIERARCHY_PATH") from exc


def load_taxonomy(settings: Settings) -> Registry:
    """The taxonomy registry (configured file, else the bundled one), validated once at boot."""
    return load_registry(settings.taxonomy_registry_path) if settings.taxonomy_registry_path else default_registry()


def _no_clients(settings: Settings, embedding: EmbeddingConfig, registry: Registry) -> Clients:
    return Clients()


async def build_runtime(settings: Settings, clients: ClientFactory = _no_clients) -> Runtime:
    """Connect to Postgres (refusing an unmigrated/newer schema), build the store, the broker and the clients."""
    hierarchy = load_hierarchy(settings)
    registry = load_taxonomy(settings)
    embedding = embedding_config(settings)
    pool = await create_pool(settings)
    try:
        async with pool.acquire() as conn:
            await check_schema(conn, settings.db_schema)
    except BaseException:
        await pool.close()
        raise
    try:
        store = build_object_store(settings)
    except BaseException:
        await pool.close()
        raise
    try:
        built = clients(settings, embedding, registry)
    except BaseException:
        await store.close()
        await pool.close()
        raise
    return Runtime(
        read_pool=await _read_pool(settings, pool),
        settings=settings,
        pool=pool,
        store=store,
        broker=build_broker(settings),
        publisher=TracedPublisher(settings),
        embedding=embedding,
        hierarchy=hierarchy,
        registry=registry,
        clients=built,
    )
