"""``orgmem eval score|live`` and ``orgmem demo load``."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from services.settings import Settings


async def cmd_eval(settings: Settings, args: argparse.Namespace) -> int:
    if args.action == "score":
        from services.eval.dataset_queries import score_files

        if not args.gold or not args.predictions:
            raise SystemExit("eval score needs --gold and --predictions")
        report = score_files(args.gold, args.predictions, events=args.events)
        print(report.to_json() if args.json else report.to_table())
        return 0 if (report.leak_rate or 0) == 0 else 3

    if args.action == "convert":
        return _convert(args)

    from rich.progress import Progress

    from services.eval import flags
    from services.eval.live import run_live

    arms = [a.strip() for a in args.arms.split(",") if a.strip()]
    with Progress() as bar:
        tasks: dict[str, Any] = {}

        def progress(what: str, done: int, total: int) -> None:
            if what not in tasks:
                tasks[what] = bar.add_task(what, total=total)
            bar.update(tasks[what], completed=done, total=total)

        result = await run_live(
            settings,
            Path(args.dataset),
            arms=arms,
            embedder=args.embedder,
            limit_events=args.limit_events,
            limit_queries=args.limit_queries,
            out_dir=Path(args.out) if args.out else None,
            keep=args.keep,
            reuse=args.reuse,
            progress=progress,
            loader_context=args.loader_context,
            eval_flags=flags.parse_flags(args.flags),
        )
    print(result.table())
    failures = []
    for arm, report in result.reports.items():
        if report.leak_rate:
            failures.append(f"{arm}: leak rate {report.leak_rate:.3f} (must be 0)")
    if args.min_recall is not None and "full" in result.reports:
        overall = result.reports["full"].overall
        recall = overall.as_dict().get("recall@10", 0.0) if overall else 0.0
        if recall < args.min_recall:
            failures.append(f"full: recall@10 {recall:.3f} below the threshold {args.min_recall}")
    if args.beat_baselines and "full" in result.reports:
        full = _metric(result.reports["full"], "recall@10")
        for arm in ("lexical", "dense"):
            if arm in result.reports and _metric(result.reports[arm], "recall@10") >= full:
                failures.append(f"full recall@10 {full:.3f} does not beat {arm}")
    for f in failures:
        print(f"THRESHOLD FAILED: {f}", file=sys.stderr)
    return 1 if failures else 0


def _convert(args: argparse.Namespace) -> int:
    """``orgmem eval convert --source BEIR_DIR --out OUT``: a BEIR folder into the common layout."""
    from services.eval.loaders.beir import convert

    if not args.source or not args.out:
        raise SystemExit("eval convert needs --source (a BEIR folder) and --out")
    stats = convert(args.source, args.out, dataset=args.name)
    print(
        f"{stats.documents} documents; queries per split {stats.queries}; dropped (gold outside corpus) {stats.dropped}"
    )
    return 0


def _metric(report: Any, name: str) -> float:
    overall = report.overall
    return float(overall.as_dict().get(name, 0.0)) if overall else 0.0


async def cmd_demo(settings: Settings, args: argparse.Namespace) -> int:
    from services.eval.datasets import iter_envelopes
    from services.eval.directory_data import directory_people, iter_memberships
    from services.kafka.topics import ensure_topics
    from services.producer import EnvelopeProducer

    await ensure_topics(settings)
    folder = Path(args.dataset)
    # the directory first: the doors that send only a user id (MCP's default config, ADK, bearer tokens)
    # expand it through these memberships
    members = list(iter_memberships(folder, workspace=args.workspace))
    async with EnvelopeProducer(settings.kafka_bootstrap_servers, topic=settings.topic("envelopes")) as p:
        recs = await p.send_many(members + list(iter_envelopes(folder, workspace=args.workspace)))
    summary = {
        "produced": len(recs),
        "memberships": len(members),
        "workspace": args.workspace,
        "topic": settings.topic("envelopes"),
        "users": directory_people(folder),
    }
    print(json.dumps(summary))
    return 0


def add_eval_commands(sub: Any) -> None:
    e = sub.add_parser("eval", help="score predictions, or run a live evaluation through the pipeline")
    e.add_argument("action", choices=["score", "live", "convert"])
    e.add_argument("--source", help="convert: the public set's folder (BEIR: corpus.jsonl, queries.jsonl, qrels/)")
    e.add_argument("--name", default="scifact", help="convert: the dataset name written into events and queries")
    e.add_argument("--gold")
    e.add_argument("--predictions")
    e.add_argument("--events", help="events.jsonl (or its folder) for the leak check")
    e.add_argument("--json", action="store_true")
    e.add_argument("--dataset", default="deploy/demo", help="folder with events.jsonl + queries.jsonl")
    e.add_argument("--arms", default="lexical,dense,hybrid,full")
    e.add_argument("--embedder", default="local", choices=["local", "bge", "hash", "openai"])
    e.add_argument("--limit-events", type=int)
    e.add_argument("--limit-queries", type=int)
    e.add_argument("--out", help="folder for predictions and reports")
    e.add_argument("--keep", action="store_true", help="keep the isolated schema and topics (prints the run tag)")
    e.add_argument("--reuse", help="query a kept run (its tag) again without re-ingesting")
    e.add_argument(
        "--loader-context",
        default="turn",
        choices=["turn", "speaker", "speaker_prev"],
        help="turn (default) = the connector protocol, each message alone; speaker / speaker_prev = the loader "
        "rewrites chat text itself: an UPPER BOUND, not what a connector sends",
    )
    e.add_argument(
        "--flags",
        help="comma list of preload, consolidation, fabric: each on and off on the same data, deltas against full",
    )
    e.add_argument("--min-recall", type=float, help="fail unless the full arm's recall@10 reaches this")
    e.add_argument(
        "--beat-baselines", action="store_true", help="fail unless full's recall@10 beats the lexical and dense arms"
    )
    e.set_defaults(handler=cmd_eval)
    d = sub.add_parser("demo", help="load the demo corpus into the running deployment")
    d.add_argument("action", choices=["load"])
    d.add_argument("--dataset", default="deploy/demo")
    d.add_argument("--workspace", default="default")
    d.set_defaults(handler=cmd_demo)
