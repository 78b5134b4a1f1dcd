"""Extractor stage wiring (catalogue entry ``extract``): group ``om-extract`` on ``om.documents.v1`` ->
``om.graph.v1``.

The taxonomy registry is the runtime's (loaded and validated at boot: an invalid registry stops the
process). The LLM path is the runtime's LLM extractor, built only when ``LLM_BASE_URL`` or ``LLM_API_KEY``
is set.
"""

from __future__ import annotations

from faststream.kafka import KafkaBroker

from extractor.handler import ExtractHandler
from extractor.llm import LlmExtractor
from extractor.port import LinkSource
from schemas.graph import GraphEvent
from services.errors import ConfigurationError
from services.kafka.app import document_publisher
from services.kafka.delivery import DeadLetters
from services.ports import LlmExtraction
from services.runtime import Runtime
from services.settings import Settings


def link_source(llm: LlmExtraction | None) -> LinkSource | None:
    """The runtime's LLM extraction client as this stage's ``LinkSource`` port."""
    if llm is None or isinstance(llm, LlmExtractor):
        return llm
    raise ConfigurationError(f"LLM extractor {type(llm).__name__} is not an extractor.llm.LlmExtractor")


def build_handler(rt: Runtime, dead_letters: DeadLetters) -> ExtractHandler:
    s = rt.settings
    return ExtractHandler(
        pool=rt.pool,
        store=rt.store,
        publisher=rt.publisher,
        dead_letters=dead_letters,
        graph_topic=s.topic("graph"),
        registry=rt.registry,
        llm=link_source(rt.clients.llm_extractor),
    )


def declare_publishers(broker: KafkaBroker, s: Settings) -> None:
    document_publisher(broker, s.topic("graph"), GraphEvent, "extractor -> conflicts")
