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


def test_a_process_builds_only_the_clients_its_stages_and_api_need() -> None:
    from services.stages import clients_needed

    assert clients_needed(["ingest"], api=False) == frozenset()
    assert clients_needed(["ingest", "embed"], api=False) == {"embedder"}
    assert clients_needed(["extract", "conflicts", "collab"], api=False) == {"llm_extractor"}
    assert clients_needed(["retrieve"], api=False) == {"embedder", "reranker", "synthesizer"}
    assert clients_needed([], api=True) == {"embedder", "reranker", "synthesizer"}


def test_the_factory_leaves_out_what_is_not_needed_even_when_configured() -> None:
    from services.embedding_config import embedding_config
    from services.taxonomy import default_registry
    from services.wiring import clients_for

    s = Settings(
        database_url="postgresql://none/none",
        kafka_bootstrap_servers="none:9092",
        embedding_provider="hash",
        rerank_url="http://127.0.0.1:9/rerank",
        llm_base_url="http://127.0.0.1:9/v1",
    )
    ingest_only = clients_for(frozenset())(s, embedding_config(s), default_registry())
    assert (ingest_only.embedder, ingest_only.reranker, ingest_only.synthesizer, ingest_only.llm_extractor) == (
        None,
        None,
        None,
        None,
    )
    embed_only = clients_for(frozenset({"embedder"}))(s, embedding_config(s), default_registry())
    assert embed_only.embedder is not None and embed_only.embedder.model == embedding_config(s).model
    assert embed_only.reranker is None and embed_only.llm_extractor is None
