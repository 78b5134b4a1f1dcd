"""Ingest stage wiring: group ``om-ingest`` on ``om.envelopes.v1``."""

from __future__ import annotations

from ingest.handler import IngestHandler
from schemas.envelope import ChangeEnvelope
from schemas.events import ChunksToEmbed, DocumentEvent
from services.kafka.app import document_publisher
from services.kafka.delivery import DeadLetters
from services.runtime import Runtime
from services.stagekit import register_batch_stage

STAGE = "ingest"
TOPIC = "envelopes"


def build_handler(rt: Runtime, dead_letters: DeadLetters) -> IngestHandler:
    s = rt.settings
    return IngestHandler(
        pool=rt.pool,
        store=rt.store,
        publisher=rt.publisher,
        dead_letters=dead_letters,
        documents_topic=s.topic("documents"),
        chunks_topic=s.topic("chunks"),
        embedding_model=rt.embedding.model,
    )


def register(rt: Runtime) -> None:
    s = rt.settings
    register_batch_stage(
        rt,
        stage=STAGE,
        topic=TOPIC,
        build=build_handler,
        max_records=s.ingest_batch_size,
        description="Applies ChangeEnvelopes to the Postgres projection and archives them in the object store",
    )
    document_publisher(rt.broker, s.topic("envelopes"), ChangeEnvelope, "connectors and HTTP ingress produce here")
    document_publisher(rt.broker, s.topic("documents"), DocumentEvent, "ingest -> extractor, collaboration")
    document_publisher(rt.broker, s.topic("chunks"), ChunksToEmbed, "ingest -> embedder")
