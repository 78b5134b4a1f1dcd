"""The clients one process needs, built once at startup and injected into stages and routes."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from typing import Any

import asyncpg
from faststream.kafka import KafkaBroker

from retriever.scope import OrgHierarchy
from services.db.migrate import check_schema
from services.db.pool import create_pool
from services.embedding_config import EmbeddingConfig, embedding_config
from services.errors import ConfigurationError
from services.kafka.app import BrokerPublisher, build_broker
from services.objectstore import ObjectStore, build_object_store
from services.settings import Settings
from services.tracing import TracedPublisher

log = logging.getLogger("orgmem.runtime")


@dataclass
class Runtime:
    settings: Settings
    pool: asyncpg.Pool
    store: ObjectStore
    broker: KafkaBroker
    publisher: BrokerPublisher
    embedding: EmbeddingConfig
    hierarchy: OrgHierarchy = field(default_factory=lambda: OrgHierarchy({}))
    stages: list[str] = field(default_factory=list)
    extras: dict[str, Any] = field(default_factory=dict)

    async def start(self) -> None:
        """Connect the producer and the broker (subscribers registered by then start consuming)."""
        await self.publisher.start()
        await self.broker.start()

    async def close(self) -> None:
        try:
            await self.broker.stop()
            await self.publisher.stop()
        finally:
            await self.store.close()
            await self.pool.close()


def load_hierarchy(settings: Settings) -> OrgHierarchy:
    """The org hierarchy (group expansion, scope tiers), validated once at boot."""
    if settings.org_hierarchy_path is None:
        return OrgHierarchy({})
    try:
        data: dict[str, Any] = json.loads(settings.org_hierarchy_path.read_text())
        return OrgHierarchy.from_config(data)
    except (OSError, ValueError) as exc:
        raise ConfigurationError(f"invalid org hierarchy: {exc}", setting="ORG_HIERARCHY_PATH") from exc


async def build_runtime(settings: Settings) -> Runtime:
    """Connect to Postgres (refusing an unmigrated/newer schema), build the store and the broker."""
    pool = await create_pool(settings)
    try:
        async with pool.acquire() as conn:
            await check_schema(conn, settings.db_schema)
    except BaseException:
        await pool.close()
        raise
    broker = build_broker(settings)
    return Runtime(
        settings=settings,
        pool=pool,
        store=build_object_store(settings),
        broker=broker,
        publisher=TracedPublisher(settings),
        embedding=embedding_config(settings),
        hierarchy=load_hierarchy(settings),
    )
