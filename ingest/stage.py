"""Ingest stage wiring (catalogue entry ``ingest`` in ``services/stages.py``): group ``om-ingest`` on
``om.envelopes.v1``."""

from __future__ import annotations

from faststream.kafka import KafkaBroker

from ingest.handler import IngestHandler
from schemas.envelope import ChangeEnvelope
from schemas.events import ChunksToEmbed, DocumentEvent
from services.kafka.app import document_publisher
from services.kafka.delivery import DeadLetters
from services.runtime import Runtime
from services.settings import Settings


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


def declare_publishers(broker: KafkaBroker, s: Settings) -> None:
    document_publisher(broker, s.topic("envelopes"), ChangeEnvelope, "connectors and HTTP ingress produce here")
    document_publisher(broker, s.topic("documents"), DocumentEvent, "ingest -> extractor, collaboration")
    document_publisher(broker, s.topic("chunks"), ChunksToEmbed, "ingest -> embedder")
