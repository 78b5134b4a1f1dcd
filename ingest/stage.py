"""Ingest stage wiring: group ``om-ingest`` on ``om.envelopes.v1``."""

from __future__ import annotations

from ingest.handler import IngestHandler
from schemas.envelope import ChangeEnvelope
from schemas.events import ChunksToEmbed, DocumentEvent
from services.kafka.app import document_publisher, subscribe_batch
from services.runtime import Runtime

STAGE = "ingest"


def register(rt: Runtime) -> None:
    s = rt.settings
    handler: IngestHandler | None = None

    async def handle(records):  # type: ignore[no-untyped-def]
        assert handler is not None
        await handler(records)

    dead_letters = subscribe_batch(
        rt.broker, s, rt.publisher, stage=STAGE, topic=s.topic("envelopes"), handler=handle,
        max_records=s.ingest_batch_size,
        description="Applies ChangeEnvelopes to the Postgres projection and archives them in the object store",
    )
    handler = IngestHandler(
        pool=rt.pool, store=rt.store, publisher=rt.publisher, dead_letters=dead_letters,
        documents_topic=s.topic("documents"), chunks_topic=s.topic("chunks"), embedding_model=rt.embedding.model,
    )
    document_publisher(rt.broker, s.topic("envelopes"), ChangeEnvelope, "connectors and HTTP ingress produce here")
    document_publisher(rt.broker, s.topic("documents"), DocumentEvent, "ingest -> extractor, collaboration")
    document_publisher(rt.broker, s.topic("chunks"), ChunksToEmbed, "ingest -> embedder")
