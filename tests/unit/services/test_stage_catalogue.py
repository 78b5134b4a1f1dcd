"""The stage catalogue: one typed description serving up/run/replay/rebuild/status and AsyncAPI."""

from __future__ import annotations

import pytest
from faststream.specification import AsyncAPI

from services.settings import Settings
from services.stages import (
    CATALOGUE,
    available_stages,
    projection_stages,
    replayable_stages,
    specification_broker,
    stage,
)

SETTINGS = Settings(database_url="postgresql://none/none", kafka_bootstrap_servers="none:9092", topic_namespace="om")


def test_every_stage_once_with_its_group_topic_and_batch() -> None:
    names = [s.name for s in CATALOGUE]
    assert names == available_stages() == ["ingest", "embed", "retrieve", "extract", "conflicts", "collab"]
    assert {s.name: s.input_topic(SETTINGS) for s in CATALOGUE} == {
        "ingest": "om.envelopes.v1",
        "embed": "om.chunks.v1",
        "retrieve": "om.rpc.retrieve.v1",
        "extract": "om.documents.v1",
        "conflicts": "om.graph.v1",
        "collab": "om.documents.v1",
    }
    assert all(s.group(SETTINGS) == f"om-{s.name}" for s in CATALOGUE)
    assert stage("ingest").max_records(SETTINGS) == SETTINGS.ingest_batch_size
    assert stage("embed").max_records(SETTINGS) == SETTINGS.embed_batch_size * 2


def test_replay_and_rebuild_take_their_stages_from_the_catalogue() -> None:
    assert replayable_stages() == ["ingest", "embed", "extract", "conflicts", "collab"]
    assert projection_stages() == ["ingest", "embed", "extract", "conflicts", "collab"]
    with pytest.raises(SystemExit, match="unknown stage 'embedder'"):
        stage("embedder")


def test_the_asyncapi_document_describes_every_stage_whatever_this_process_runs() -> None:
    spec = AsyncAPI(specification_broker(SETTINGS), title="t", version="1").to_specification().to_jsonable()
    channels = set(spec["channels"])
    assert {f"{s.name}:{s.input_topic(SETTINGS)}" for s in CATALOGUE} <= channels
    assert {f"om.{t}.v1:publish" for t in ("envelopes", "documents", "chunks", "graph")} <= channels


def test_the_processed_event_keys_of_each_repository_are_the_catalogue_names() -> None:
    """``processed_events.stage`` rows are keyed by these constants: they must stay the stage names."""
    import embedder.repository
    import extractor.repository
    import ingest.repository
    import services.collaboration.repository
    import services.conflicts.repository

    keys = {
        ingest.repository.STAGE,
        embedder.repository.STAGE,
        extractor.repository.STAGE,
        services.conflicts.repository.STAGE,
        services.collaboration.repository.STAGE,
    }
    assert keys == set(projection_stages())
