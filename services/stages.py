"""The stage catalogue: every stage this codebase runs, statically imported, one ``Stage`` each.

It serves ``orgmem up`` (all of them), ``orgmem run <stage>``, ``replay`` (the replayable ones),
``rebuild`` (the ones that write the projection), ``status`` (consumer lag per group) and the AsyncAPI
document (the subscribers and publishers the registered stages declare). A stage's name is its consumer
group's suffix and its dead-letter topic's; it matches its package except where a shorter verb was
shipped first and is now part of group and topic names (``embed`` = ``embedder/``, ``extract`` =
``extractor/``, ``retrieve`` = ``retriever/``, ``collab`` = ``services/collaboration/``): renaming would
orphan live consumer groups and dead-letter topics.
"""

from __future__ import annotations

from faststream import AckPolicy
from faststream.kafka import KafkaBroker

import embedder.stage
import extractor.stage
import ingest.stage
import retriever.stage
import services.collaboration.stage
import services.conflicts.stage
from services.api.catalogue import rpc_tools
from services.kafka.app import build_broker
from services.kafka.lag import Lag, group_lag
from services.runtime import ClientName, Runtime
from services.settings import Settings
from services.stagekit import Stage

EXTRACT_BATCH = 200
CONFLICTS_BATCH = 200
COLLAB_BATCH = 500
API_CLIENTS: frozenset[ClientName] = frozenset({"embedder", "reranker", "synthesizer"})
"""What the HTTP API's tools (and the retriever stage) use."""

CATALOGUE: tuple[Stage, ...] = (
    Stage(
        name="ingest",
        topic="envelopes",
        description="Applies ChangeEnvelopes to the Postgres projection and archives them in the object store",
        build_handler=ingest.stage.build_handler,
        max_records=lambda s: s.ingest_batch_size,
        declare_publishers=ingest.stage.declare_publishers,
    ),
    Stage(
        name="embed",
        topic="chunks",
        description="Embeds chunks that lack a vector for the configured model (cache + carry-over first)",
        build_handler=embedder.stage.build_handler,
        # a backlog fills several model batches per poll; the handler stores one while the model runs the next
        max_records=lambda s: max(1, s.embed_batch_size * 2),
        clients=frozenset({"embedder"}),
    ),
    Stage(
        name="retrieve",
        topic="rpc.retrieve",
        description="Agent tool calls (every tool of the tool catalogue); replies go to the reply_to topic",
        build_handler=lambda rt, dead_letters: retriever.stage.build_handler(rt, dead_letters, rpc_tools),
        max_records=lambda s: retriever.stage.MAX_RECORDS,
        subscribe=lambda rt, stage: retriever.stage.subscribe(rt, stage, rpc_tools),
        writes_projection=False,
        clients=API_CLIENTS,
    ),
    Stage(
        name="extract",
        topic="documents",
        description="Extracts registry-bound entities, claims and relationships (zero-LLM by default)",
        build_handler=extractor.stage.build_handler,
        max_records=lambda s: EXTRACT_BATCH,
        clients=frozenset({"llm_extractor"}),
        declare_publishers=extractor.stage.declare_publishers,
    ),
    Stage(
        name="conflicts",
        topic="graph",
        description="Writes entities/facts/evidence: identity merge, dedup, exclusive close, retraction",
        build_handler=services.conflicts.stage.build_handler,
        max_records=lambda s: CONFLICTS_BATCH,
    ),
    Stage(
        name="collab",
        topic="documents",
        description="Aggregates person-person collaboration edges (co-participation, threads) with decay",
        build_handler=services.collaboration.stage.build_handler,
        max_records=lambda s: COLLAB_BATCH,
    ),
)
STAGES: dict[str, Stage] = {stage.name: stage for stage in CATALOGUE}


def stage(name: str) -> Stage:
    if name not in STAGES:
        raise SystemExit(f"unknown stage {name!r}; available: {', '.join(STAGES)}")
    return STAGES[name]


def available_stages() -> list[str]:
    return list(STAGES)


def replayable_stages() -> list[str]:
    return [s.name for s in CATALOGUE if s.replayable]


def projection_stages() -> list[str]:
    """The stages that write the projection (what ``rebuild`` runs on a new generation), in pipeline order."""
    return [s.name for s in CATALOGUE if s.writes_projection]


async def _declared(body: bytes) -> None:
    """Never called: the specification broker is never connected."""


def specification_broker(settings: Settings) -> KafkaBroker:
    """A broker that declares every stage's subscriber and publishers (never connected, no handler built):
    the AsyncAPI document of the whole deployment, whichever stages this process runs."""
    broker = build_broker(settings)
    for entry in CATALOGUE:
        topic = entry.input_topic(settings)
        broker.subscriber(
            topic,
            group_id=entry.group(settings),
            batch=True,
            ack_policy=AckPolicy.NACK_ON_ERROR,
            title=f"{entry.name}:{topic}",
            description=entry.description,
        )(_declared)
        entry.declare_publishers(broker, settings)
    return broker


async def stage_lag(settings: Settings, name: str) -> Lag:
    """Consumer lag of stage ``name``'s group on its input topic."""
    return await group_lag(settings, name, stage(name).topic)


def clients_needed(names: list[str], *, api: bool) -> frozenset[ClientName]:
    """The clients a process running ``names`` (and the HTTP API when ``api``) uses."""
    needed: set[ClientName] = set(API_CLIENTS) if api else set()
    for name in names:
        needed |= stage(name).clients
    return frozenset(needed)


def register_stages(rt: Runtime, names: list[str]) -> None:
    for chosen in [stage(name) for name in names]:
        chosen.register(rt)
