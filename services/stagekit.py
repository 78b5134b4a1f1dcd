"""What a stage is (``Stage``: name, input topic, group, handler factory, batch size from ``Settings``) and the
one way a batch stage is wired: subscribe its consumer group, then bind the handler the stage builds (the
handler needs the stage's DeadLetters, which the subscription creates). The catalogue of every stage is
``services/stages.py``."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from faststream.kafka import KafkaBroker

from services import logs, tracing
from services.health import check_kafka, check_postgres, check_store
from services.kafka.app import subscribe_batch
from services.kafka.deadletters import PgDeadLetterLedger
from services.kafka.delivery import BatchHandler, DeadLetters
from services.kafka.records import Record
from services.kafka.watch import DependencyWatch, Probe
from services.metrics import STAGE_BATCH_SECONDS, STAGE_FAILED, STAGE_PROCESSED
from services.runtime import ClientName, Runtime
from services.settings import Settings

H = TypeVar("H", bound=BatchHandler)


class LateHandler:
    """A batch handler bound after subscription."""

    def __init__(self) -> None:
        self._handler: BatchHandler | None = None

    def bind(self, handler: BatchHandler) -> None:
        self._handler = handler

    async def __call__(self, records: Sequence[Record]) -> None:
        if self._handler is None:
            raise RuntimeError("stage handler used before it was bound")
        await self._handler(records)


class InstrumentedHandler:
    """Metrics and trace spans around every call of a stage's batch handler (each retry attempt too)."""

    def __init__(self, stage: str, inner: BatchHandler) -> None:
        self.stage = stage
        self.inner = inner

    async def __call__(self, records: Sequence[Record]) -> None:
        start = time.perf_counter()
        try:
            with logs.stage_context(self.stage, records), tracing.stage_spans(self.stage, records):
                await self.inner(records)
        except BaseException:
            STAGE_FAILED.labels(self.stage).inc(len(records))
            raise
        else:
            STAGE_PROCESSED.labels(self.stage).inc(len(records))
        finally:
            STAGE_BATCH_SECONDS.labels(self.stage).observe(time.perf_counter() - start)


def register_batch_stage(
    rt: Runtime,
    *,
    stage: str,
    topic: str,
    build: Callable[[Runtime, DeadLetters], H],
    max_records: int,
    description: str,
    clients: frozenset[ClientName] = frozenset(),
) -> H:
    """Subscribe ``stage`` (its consumer group's fetch loop, ``rt.consumers``) to the logical ``topic`` and bind
    ``build(rt, dead_letters)``. ``description`` is the AsyncAPI document's (``services.stages``).

    The stage's dependency watch (outage vs poison, a partition it cannot fetch; shown by ``/readyz``) is
    ``rt.watches[stage]``.
    """
    late = LateHandler()
    watch = dependency_watch(rt, stage, clients)
    dead_letters = subscribe_batch(
        rt.consumers,
        rt.settings,
        rt.publisher,
        stage=stage,
        topic=rt.settings.topic(topic),
        handler=InstrumentedHandler(stage, late),
        max_records=max_records,
        watch=watch,
        ledger=PgDeadLetterLedger(rt.pool),
    )
    handler = build(rt, dead_letters)
    late.bind(handler)
    return handler


VENDOR_PROBE_TEXT = "orgmem dependency probe"
VENDOR_PROBES = frozenset({"embedding_vendor", "llm_vendor"})


def dependency_watch(rt: Runtime, stage: str, clients: frozenset[ClientName] = frozenset()) -> DependencyWatch:
    """The stage's probes of Postgres, the object store and the broker — and of the embedding / LLM vendor
    when the stage uses one (``clients``) — registered on the runtime."""
    s = rt.settings
    watch = rt.watches.get(stage)
    if watch is None:
        probes: dict[str, Probe] = {
            "postgres": lambda: check_postgres(rt.pool),
            "object_store": lambda: check_store(rt.store),
            "kafka": lambda: check_kafka(s.kafka_bootstrap_servers),
        }
        if "embedder" in clients and rt.clients.embedder is not None:
            embedder = rt.clients.embedder
            probes["embedding_vendor"] = lambda: embedder.embed([VENDOR_PROBE_TEXT])
        if "llm_extractor" in clients and rt.clients.llm_extractor is not None:
            probes["llm_vendor"] = rt.clients.llm_extractor.probe
        watch = DependencyWatch(stage, probes, max_delay=s.outage_max_delay_s, vendors=VENDOR_PROBES)
        rt.watches[stage] = watch
    return watch


HandlerFactory = Callable[[Runtime, DeadLetters], BatchHandler]


def _declares_nothing(broker: KafkaBroker, settings: Settings) -> None:
    return None


@dataclass(frozen=True, slots=True)
class Stage:
    """One stage of the pipeline, as ``up``, ``run``, ``replay``, ``rebuild``, ``status`` and AsyncAPI see it.

    ``name`` is the consumer group's suffix (``om-<name>``) and the dead-letter topic's (``om.dlq.<name>.v1``);
    ``topic`` the logical input topic (``Settings.topic``). ``build_handler(rt, dead_letters)`` makes the
    handler the live subscriber and ``replay`` both feed. ``subscribe`` replaces the batch wiring for a stage
    with its own (the retriever's request/reply); such a stage is not replayable.
    """

    name: str
    topic: str
    description: str
    build_handler: HandlerFactory
    max_records: Callable[[Settings], int]
    declare_publishers: Callable[[KafkaBroker, Settings], None] = _declares_nothing
    subscribe: Callable[[Runtime, Stage], BatchHandler] | None = None
    writes_projection: bool = True
    clients: frozenset[ClientName] = frozenset()
    """The runtime clients its handler uses: a process builds only what its stages (and its API) need."""

    @property
    def replayable(self) -> bool:
        return self.subscribe is None

    def group(self, settings: Settings) -> str:
        return settings.group(self.name)

    def input_topic(self, settings: Settings) -> str:
        return settings.topic(self.topic)

    def register(self, rt: Runtime) -> BatchHandler:
        """Subscribe this stage in ``rt`` (and declare what it publishes); ``rt.handlers[name]`` is its handler."""
        if self.subscribe is not None:
            handler = self.subscribe(rt, self)
        else:
            handler = register_batch_stage(
                rt,
                stage=self.name,
                topic=self.topic,
                build=self.build_handler,
                max_records=self.max_records(rt.settings),
                description=self.description,
                clients=self.clients,
            )
        self.declare_publishers(rt.broker, rt.settings)
        rt.handlers[self.name] = handler
        rt.stages.append(self.name)
        return handler
