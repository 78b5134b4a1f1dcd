"""The one place Kafka clients are configured: producer settings and the admin client's lifetime.

Message sizes: the envelopes topic accepts ``INPUT_MAX_BYTES``; every dead-letter topic accepts that plus
``HEADERS_ROOM`` (the dead-letter headers), and every producer of this project may send up to
``DLQ_MAX_BYTES``, so a record any input accepted can always be written to its dead-letter topic.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from aiokafka.admin import AIOKafkaAdminClient

INPUT_MAX_BYTES = 8 * 1024 * 1024
HEADERS_ROOM = 1024 * 1024
DLQ_MAX_BYTES = INPUT_MAX_BYTES + HEADERS_ROOM


def producer_config(*, client_id: str, **overrides: Any) -> dict[str, Any]:
    """Keyword arguments of an idempotent, acks=all producer (aiokafka and FastStream's broker alike)."""
    config: dict[str, Any] = {
        "client_id": client_id,
        "acks": "all",
        "enable_idempotence": True,
        "linger_ms": 5,
        "max_batch_size": 1024 * 1024,
        "max_request_size": DLQ_MAX_BYTES,
        "request_timeout_ms": 30_000,
    }
    config.update(overrides)
    return config


@asynccontextmanager
async def kafka_admin(
    bootstrap_servers: str, *, request_timeout_ms: int = 30_000
) -> AsyncIterator[AIOKafkaAdminClient]:
    """``async with kafka_admin(bootstrap) as admin:`` — started, and closed however the block ends."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap_servers, request_timeout_ms=request_timeout_ms)
    try:
        await admin.start()
        yield admin
    finally:
        await admin.close()
