"""Extractor stage wiring: group ``om-extract`` on ``om.documents.v1`` -> ``om.graph.v1``.

The taxonomy registry is loaded (and validated) when the stage registers: an invalid registry stops the
process at boot. The LLM path is enabled only when ``LLM_BASE_URL`` or ``LLM_API_KEY`` is set.
"""

from __future__ import annotations

from extractor.handler import ExtractHandler, LinkSource
from schemas.graph import GraphEvent
from services.kafka.app import document_publisher
from services.kafka.delivery import DeadLetters
from services.runtime import Runtime
from services.stagekit import register_batch_stage
from services.taxonomy import default_registry, load_registry

STAGE = "extract"
TOPIC = "documents"
BATCH = 200


def build_handler(rt: Runtime, dead_letters: DeadLetters) -> ExtractHandler:
    s = rt.settings
    registry = load_registry(s.taxonomy_registry_path) if s.taxonomy_registry_path else default_registry()
    llm: LinkSource | None = rt.extras.get("llm_extractor")
    if llm is None and (s.llm_base_url or s.llm_api_key):
        from extractor.llm import LlmExtractor

        llm = LlmExtractor.from_settings(s, registry)
    return ExtractHandler(
        pool=rt.pool,
        store=rt.store,
        publisher=rt.publisher,
        dead_letters=dead_letters,
        graph_topic=s.topic("graph"),
        registry=registry,
        llm=llm,
    )


def register(rt: Runtime) -> None:
    register_batch_stage(
        rt,
        stage=STAGE,
        topic=TOPIC,
        build=build_handler,
        max_records=BATCH,
        description="Extracts registry-bound entities, claims and relationships (zero-LLM by default)",
    )
    s = rt.settings
    document_publisher(rt.broker, s.topic("graph"), GraphEvent, "extractor -> conflicts")
