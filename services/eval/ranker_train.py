"""``orgmem ranker train``: build the learned ranker's model file from kept eval runs (``retriever/learned_rank.py``).

Each ``--run TAG:PATH:SPLIT[:GROUP]`` names a kept ``orgmem eval live --keep`` run, its dataset folder, the split
of its queries to learn from (never ``test``: refused) and optionally one viewer group (LoCoMo: one conversation,
so the other stays held out). Every query is asked on the ``full`` arm as its viewer with access counting frozen;
the ranker's hook records each candidate's feature row; a candidate is relevant when its document is in the
query's gold. LightGBM LambdaRank is trained seeded, on one thread, deterministically, so the same runs give the
same file; the file is ``ranker-<hash>.txt`` (the hash of its text is its version) with ``.json`` metadata.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from retriever.hits import RankedHit
from retriever.learned_rank import FEATURES, Candidate, features, model_hash
from services.settings import Settings

SEED = 26
PARAMS: dict[str, Any] = {
    "objective": "lambdarank",
    "metric": "ndcg",
    "ndcg_eval_at": [10],
    "learning_rate": 0.05,
    "num_leaves": 15,
    "min_data_in_leaf": 20,
    "feature_fraction": 0.9,
    "lambdarank_truncation_level": 20,
    "num_threads": 1,
    "deterministic": True,
    "force_row_wise": True,
    "verbose": -1,
}
ROUNDS = 150


@dataclass(frozen=True, slots=True)
class RunSpec:
    tag: str
    dataset: Path
    split: str
    group: str | None = None


def parse_run(raw: str) -> RunSpec:
    """``TAG:PATH:SPLIT[:GROUP]``; a ``test`` split is refused (the model must never see a test split)."""
    parts = raw.split(":")
    if len(parts) < 3:
        raise ValueError(f"--run {raw!r}: expected TAG:PATH:SPLIT[:GROUP]")
    tag, path, split, *rest = parts
    if split == "test":
        raise ValueError(f"--run {raw!r}: the ranker never trains on a test split")
    return RunSpec(tag, Path(path), split, ":".join(rest) or None)


@dataclass
class Recorder:
    """Stands in for the learned ranker during collection: records the last query's rows, changes nothing."""

    version: str = "recording"
    last: tuple[list[list[float]], list[str]] = field(default_factory=lambda: ([], []))

    def rerank(
        self,
        query: str,
        ranked: Sequence[RankedHit],
        candidates: Mapping[str, Candidate],
        arm_scores: Mapping[str, Mapping[str, float]],
    ) -> list[RankedHit]:
        ids = [candidates[rh.hit.chunk_id].external_id if rh.hit.chunk_id in candidates else "" for rh in ranked]
        self.last = (features(query, ranked, candidates, arm_scores), ids)
        return list(ranked)


@dataclass
class TrainingSet:
    rows: list[list[float]] = field(default_factory=list)
    labels: list[int] = field(default_factory=list)
    groups: list[int] = field(default_factory=list)
    skipped: int = 0
    """Queries whose gold is not among the candidates (nothing to learn from)."""

    def add(self, rows: list[list[float]], ids: list[str], gold: set[str]) -> None:
        labels = [1 if i in gold else 0 for i in ids]
        if not rows or not any(labels):
            self.skipped += 1
            return
        self.rows += rows
        self.labels += labels
        self.groups.append(len(rows))


async def collect(spec: RunSpec, embedder: str, out: TrainingSet) -> int:
    """Ask every query of ``spec`` on ``full`` and add its recorded candidates to ``out``; returns the count."""
    from retriever.wiring import get_service
    from schemas.tools import RetrieveContextRequest
    from services.eval.dataset_queries import iter_queries
    from services.eval.live import eval_settings
    from services.serve import start_runtime, stop_runtime

    raw = [json.loads(line) for line in (spec.dataset / "queries.jsonl").read_text().splitlines() if line.strip()]
    split = {r["qid"]: r.get("split") for r in raw}
    groups = {r["qid"]: r.get("groups", []) for r in raw}
    queries = [
        q
        for q in iter_queries(spec.dataset)
        if split.get(q.qid) == spec.split and q.expected_doc_ids and (spec.group is None or spec.group in groups[q.qid])
    ]
    settings = eval_settings(Settings(), tag=spec.tag, embedder=embedder, dataset=spec.dataset)
    rt = await start_runtime(settings, [])
    try:
        service = get_service(rt)
        service.access.record = lambda chunk_ids: None  # type: ignore[method-assign]
        recorder = Recorder()
        service.passages.learned = recorder  # type: ignore[assignment]
        for q in queries:
            req = RetrieveContextRequest(query=q.query[:2000], workspace=f"eval-{spec.tag}", limit=10, arms="full")
            recorder.last = ([], [])
            await service.retrieve_context(req, q.viewer.viewer())
            out.add(*recorder.last, set(q.expected_doc_ids))
    finally:
        await stop_runtime(rt)
    return len(queries)


def train(data: TrainingSet, seed: int = SEED, rounds: int = ROUNDS) -> str:
    """The LightGBM LambdaRank model's text (deterministic for the same data and seed)."""
    import lightgbm
    import numpy as np

    ds = lightgbm.Dataset(
        np.asarray(data.rows, dtype=np.float64),
        label=np.asarray(data.labels),
        group=data.groups,
        feature_name=list(FEATURES),
    )
    booster = lightgbm.train({**PARAMS, "seed": seed}, ds, num_boost_round=rounds)
    return str(booster.model_to_string())


def write_model(text: str, out_dir: Path, meta: dict[str, Any]) -> Path:
    """``out_dir/ranker-<hash>.txt`` and its ``.json`` metadata (version, features, how it was trained)."""
    version = model_hash(text)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"ranker-{version}.txt"
    path.write_text(text, encoding="utf-8")
    full = {"version": version, "features": list(FEATURES), **meta}
    path.with_suffix(".txt.json").write_text(json.dumps(full, indent=2, sort_keys=True), encoding="utf-8")
    return path


async def cmd_ranker(settings: Settings, args: argparse.Namespace) -> int:
    specs = [parse_run(r) for r in args.run or []]
    if not specs:
        raise SystemExit("ranker train needs at least one --run TAG:PATH:SPLIT[:GROUP]")
    data, asked = TrainingSet(), 0
    for spec in specs:
        asked += await collect(spec, args.embedder, data)
    text = train(data, seed=args.seed)
    runs = [{"tag": s.tag, "dataset": s.dataset.name, "split": s.split, "group": s.group} for s in specs]
    meta = {"seed": args.seed, "rounds": ROUNDS, "params": PARAMS, "runs": runs, "queries": len(data.groups)}
    path = write_model(text, Path(args.out), {**meta, "candidates": len(data.rows), "skipped": data.skipped})
    print(f"{path}: {len(data.groups)} of {asked} queries ({data.skipped} without gold among the candidates)")
    return 0


def add_ranker_commands(sub: Any) -> None:
    r = sub.add_parser("ranker", help="build the learned ranker's model file from kept eval runs")
    r.add_argument("action", choices=["train"])
    r.add_argument("--run", action="append", help="TAG:PATH:SPLIT[:GROUP] of a kept eval run (repeatable)")
    r.add_argument("--embedder", default="local", choices=["local", "bge", "hash", "openai"])
    r.add_argument("--seed", type=int, default=SEED)
    r.add_argument("--out", default="bench/results/ranker", help="folder for ranker-<hash>.txt and its .json")
    r.set_defaults(handler=cmd_ranker)
