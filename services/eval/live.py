"""``orgmem eval live``: load a dataset through the real pipeline, query it as each gold viewer, score.

An isolated namespace per run (Kafka topics, consumer groups, Postgres schema, workspace) so a run
never sees other data: events are produced to Kafka, the ingest and embed stages (in this process)
write the projection, and once the pipeline has drained every query runs ``retrieve_context`` as its
viewer once per arm (``lexical``, ``dense``, ``hybrid``, ``full``) over the same ingested data.
Predictions are document external ids (= dataset event ids); the leak check uses the events' groups.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from services.db.migrate import migrate
from services.eval import flags
from services.eval.dataset_queries import any_visible, event_visibility, iter_queries
from services.eval.datasets import Context, iter_envelopes
from services.eval.gold import GoldQuery, Prediction, write_predictions
from services.eval.metrics import Report, compare_table, score
from services.kafka.topics import ensure_topics
from services.producer import EnvelopeProducer
from services.serve import start_runtime, stop_runtime
from services.settings import Settings
from services.stages import stage_lag

ARMS = ("lexical", "dense", "hybrid", "full")
Progress = Callable[[str, int, int], None]


@dataclass
class LiveResult:
    reports: dict[str, Report]
    events: int
    queries: int
    ingest_seconds: float
    query_seconds: dict[str, float] = field(default_factory=dict)
    out_dir: Path | None = None
    protocol: str = "connector"
    latencies_ms: dict[str, list[float]] = field(default_factory=dict)
    flags: tuple[str, ...] = ()

    def table(self) -> str:
        timing = ", ".join(f"{a} {s:.1f}s" for a, s in self.query_seconds.items())
        deltas = f"\n\nflags {', '.join(self.flags)} against full:\n" + flags.deltas_table(
            self.reports, self.latencies_ms
        )
        return (
            compare_table(self.reports) + f"\n\nevents {self.events}, queries {self.queries}; ingest+embed wall"
            f" {self.ingest_seconds:.1f}s; query wall per arm: {timing}; protocol: {self.protocol}"
            + (deltas if self.flags else "")
        )


def eval_settings(base: Settings, *, tag: str, embedder: str, dataset: Path) -> Settings:
    hierarchy = dataset / "org_hierarchy.json"
    return base.model_copy(
        update={
            "db_schema": f"eval_{tag}",
            "topic_namespace": f"eval{tag}",
            "group_prefix": f"eval{tag}-",
            "generation": "",
            "embedding_provider": embedder,
            "topic_partitions": 6,
            "org_hierarchy_path": hierarchy if hierarchy.exists() else None,
        }
    )


async def _drained(settings: Settings, produced: int, stages: Sequence[str] = ("ingest", "embed")) -> tuple[bool, int]:
    ingest = await stage_lag(settings, "ingest")
    others = [await stage_lag(settings, s) for s in stages if s != "ingest"]
    return ingest.lag == 0 and all(o.lag == 0 for o in others) and ingest.committed >= produced, ingest.committed


async def _predict(service: Any, q: GoldQuery, workspace: str, arm: str, limit: int) -> Prediction:
    return await flags.predict(service, q, workspace, arm, limit)


async def run_live(
    base: Settings,
    dataset: Path,
    *,
    arms: Sequence[str] = ARMS,
    embedder: str = "local",
    limit_events: int | None = None,
    limit_queries: int | None = None,
    k: int = 10,
    out_dir: Path | None = None,
    keep: bool = False,
    reuse: str | None = None,
    concurrency: int = 4,
    progress: Progress | None = None,
    loader_context: Context = "turn",
    eval_flags: Sequence[str] = (),
) -> LiveResult:
    """``keep`` leaves the isolated schema/topics in place (the run's tag is printed); ``reuse=<tag>``
    queries such a kept run again without re-ingesting (same data, e.g. after a ranking change).

    ``loader_context="turn"`` (default) sends each message alone, as a connector does; ``speaker`` /
    ``speaker_prev`` make the loader rewrite chat text itself (an upper bound, not what users get)."""
    from retriever.wiring import get_service

    tag = reuse or uuid.uuid4().hex[:8]
    settings = eval_settings(base, tag=tag, embedder=embedder, dataset=dataset)
    workspace = f"eval-{tag}"
    if keep or reuse:
        print(f"eval run tag {tag} (schema {settings.db_schema}); rerun queries with --reuse {tag}")
    if not reuse:
        await migrate(settings.database_url, settings.db_schema)
        await ensure_topics(settings)
    stages = ["ingest", "embed", *(["extract", "conflicts"] if "fabric" in eval_flags else [])]
    rt = await start_runtime(settings, [] if reuse else stages)
    try:
        began = time.perf_counter()
        if reuse:
            produced = sum(1 for _ in iter_envelopes(dataset, workspace=workspace, limit=limit_events))
        else:
            produced = await _load(settings, dataset, workspace, limit_events, progress, loader_context, stages)
        ingest_seconds = time.perf_counter() - began
        service = get_service(rt)
        # usage frozen: each arm's queries would otherwise raise the access boost of what the next one ranks
        service.access.frozen = True
        result = await _query_all(
            service,
            dataset,
            workspace,
            [*arms, *(a for a in flags.flag_arms(eval_flags) if a not in arms)],
            produced,
            ingest_seconds,
            limit_events,
            limit_queries,
            k,
            out_dir,
            embedder,
            concurrency,
            progress,
            "connector" if loader_context == "turn" else f"loader-context {loader_context} (upper bound)",
        )
        result.flags = tuple(eval_flags)
        if "consolidation" in eval_flags:
            await _consolidation_arms(rt, result, dataset, workspace, limit_events, limit_queries, k, concurrency)
        return result
    finally:
        await stop_runtime(rt)
        if not keep and not reuse:
            await _cleanup(settings)


async def _load(
    settings: Settings,
    dataset: Path,
    workspace: str,
    limit_events: int | None,
    progress: Progress | None,
    loader_context: Context = "turn",
    stages: Sequence[str] = ("ingest", "embed"),
) -> int:
    """Produce the dataset's envelopes and wait until every running write stage has drained them."""
    produced = 0
    async with EnvelopeProducer(settings.kafka_bootstrap_servers, topic=settings.topic("envelopes")) as prod:
        batch = []
        for env in iter_envelopes(dataset, workspace=workspace, limit=limit_events, context=loader_context):
            batch.append(env)
            if len(batch) == 1000:
                produced += len(await prod.send_many(batch))
                batch = []
        produced += len(await prod.send_many(batch))
    done = False
    while not done:
        await asyncio.sleep(1.0)
        done, committed = await _drained(settings, produced, stages)
        if progress:
            progress("ingest+embed", min(committed, produced), produced)
    return produced


async def _query_all(
    service: Any,
    dataset: Path,
    workspace: str,
    arms: Sequence[str],
    produced: int,
    ingest_seconds: float,
    limit_events: int | None,
    limit_queries: int | None,
    k: int,
    out_dir: Path | None,
    embedder: str,
    concurrency: int,
    progress: Progress | None,
    protocol: str = "connector",
) -> LiveResult:
    """Every gold query as its viewer, once per arm, scored with the leak check."""
    queries = list(iter_queries(dataset, limit=limit_queries))
    visibility = any_visible(event_visibility(dataset, limit=limit_events))
    sem = asyncio.Semaphore(concurrency)
    result = LiveResult({}, produced, len(queries), ingest_seconds, out_dir=out_dir, protocol=protocol)
    for arm in arms:
        finished = 0

        async def one(q: GoldQuery, arm: str = arm) -> Prediction:
            nonlocal finished
            async with sem:
                t0 = time.perf_counter()
                pred = await _predict(service, q, workspace, arm, k)
                result.latencies_ms.setdefault(arm, []).append((time.perf_counter() - t0) * 1000)
            finished += 1
            if progress:
                progress(f"queries [{arm}]", finished, len(queries))
            return pred

        t = time.perf_counter()
        preds = await asyncio.gather(*(one(q) for q in queries))
        result.query_seconds[arm] = time.perf_counter() - t
        result.reports[arm] = score(queries, preds, visibility=visibility, ks=(1, 5, 10))
        if out_dir:
            out_dir.mkdir(parents=True, exist_ok=True)  # noqa: ASYNC240 - once per arm
            write_predictions(out_dir / f"predictions.{arm}.jsonl", preds)
            (out_dir / f"report.{arm}.json").write_text(result.reports[arm].to_json())
    if out_dir:
        (out_dir / "summary.txt").write_text(result.table() + "\n")
        run = {
            "dataset": str(dataset),
            "events": produced,
            "queries": len(queries),
            "embedder": embedder,
            "protocol": protocol,
            "ingest_seconds": ingest_seconds,
            "query_seconds": result.query_seconds,
        }
        (out_dir / "run.json").write_text(json.dumps(run, indent=2))
    return result


async def _cleanup(settings: Settings) -> None:
    from services.ops.teardown import drop_namespace

    await drop_namespace(
        settings.database_url,
        settings.kafka_bootstrap_servers,
        schema=settings.db_schema,
        namespace=settings.topic_namespace,
    )


async def _consolidation_arms(
    rt: Any,
    result: LiveResult,
    dataset: Path,
    workspace: str,
    limit_events: int | None,
    limit_queries: int | None,
    k: int,
    concurrency: int,
) -> None:
    """``--flags consolidation``: consolidate the loaded workspace, query ``full`` again, undo every merge of the
    run, query ``full`` once more (equal to ``full`` when undo restores the ranking exactly)."""
    from retriever.wiring import get_service
    from services.consolidation.run import consolidate, undo_consolidation

    report = await consolidate(rt.pool, workspace, sim=rt.settings.consolidation_sim, apply=True, actor="eval")
    print(f"consolidation: {report.memories} memories, {len(report.merges)} merges", flush=True)
    for arm in (flags.CONSOLIDATED, flags.UNDONE):
        if arm == flags.UNDONE:
            for m in report.merges:
                if m.consolidation_id is not None:
                    await undo_consolidation(
                        rt.pool, m.consolidation_id, principal_id=None, principals=[], is_admin=True
                    )
        more = await _query_all(
            get_service(rt),
            dataset,
            workspace,
            [arm],
            result.events,
            result.ingest_seconds,
            limit_events,
            limit_queries,
            k,
            result.out_dir,
            "",
            concurrency,
            None,
        )
        result.reports |= more.reports
        result.query_seconds |= more.query_seconds
        result.latencies_ms |= more.latencies_ms
