"""Lever-by-lever ablation of the full arm on a kept ``orgmem eval live --keep`` run (no re-ingest).

Queries are asked the way ``../shared/tools/connector_eval.py`` asks them: the query text only (no host
``as_of``), as a viewer holding the query's groups, ``split`` test by default. Scored separately on the first
five conversations (tune) and the last five (report), as the README's LoCoMo tables are.

    python -m bench.quality_ablation --reuse TAG --dataset ../shared/data/locomo --embedder bge \
        --variants base,nosecond,noauthor,noneighbour,nowhen,lexical,dense,hybrid [--dump DIR]

(As a module from the checkout, so the checkout's ``retriever`` is imported, not an installed one.)
Variants patch module-level knobs for the duration of one pass (documented in the README's ablation table).
Access counting is frozen unless ``--record-access``: every retrieval raises the access boost of what it
returned, so without it pass after pass would drift.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from retriever import kind_rank, lexical_math, multihop, query_levers, windows
from retriever import passages as passages_mod
from schemas.tools import RetrieveContextRequest
from services.api.auth import Viewer
from services.eval.dataset_queries import any_visible, event_visibility, iter_queries
from services.eval.gold import GoldQuery, Prediction
from services.eval.live import eval_settings
from services.eval.metrics import score
from services.serve import start_runtime, stop_runtime
from services.settings import Settings


@contextlib.contextmanager
def patched(obj: Any, name: str, value: Any) -> Iterator[None]:
    old = getattr(obj, name)
    setattr(obj, name, value)
    try:
        yield
    finally:
        setattr(obj, name, old)


def _no_keep(fn: Callable[..., Any]) -> Callable[..., Any]:
    def wrapped(*a: Any, **kw: Any) -> Any:
        kw["keep_at_least"] = 0
        return fn(*a, **kw)

    return wrapped


@contextlib.contextmanager
def _stack(*managers: contextlib.AbstractContextManager[None]) -> Iterator[None]:
    with contextlib.ExitStack() as stack:
        for m in managers:
            stack.enter_context(m)
        yield


def _weights(lexical: float, dense: float) -> contextlib.AbstractContextManager[None]:
    from types import MappingProxyType

    from retriever import compose

    names, cfg = compose.ARM_PRESETS["full"]
    w = MappingProxyType({**cfg.arm_weights, "lexical": lexical, "dense": dense})
    presets = {**compose.ARM_PRESETS, "full": (names, dataclasses.replace(cfg, arm_weights=w))}
    return patched(passages_mod, "ARM_PRESETS", presets)


def _full(**changes: Any) -> contextlib.AbstractContextManager[None]:
    """The full arm with ``changes`` to its RankConfig (issue 26's priors off one by one)."""
    from retriever import compose

    names, cfg = compose.ARM_PRESETS["full"]
    presets = {**compose.ARM_PRESETS, "full": (names, dataclasses.replace(cfg, **changes))}
    return patched(passages_mod, "ARM_PRESETS", presets)


def _no_query_levers() -> contextlib.AbstractContextManager[None]:
    """Every query-understanding lever of the second round off (issue 26's before)."""
    return _stack(
        patched(query_levers, "PHRASE_BOOST", 1.0),
        patched(query_levers, "JOIN_FACTOR", 0.0),
        patched(query_levers, "THREAD_REPEAT", 1.0),
        patched(query_levers, "ORDER_BAND", 1.0),
    )


@contextlib.contextmanager
def _doc(**changes: Any) -> Iterator[None]:
    """The ``documents`` profile of :mod:`retriever.kind_rank` with ``changes`` (``prf``, ``second_round`` or any
    RankConfig field; ``lexical``/``dense`` set the CC weights)."""
    old = kind_rank.PROFILES["documents"]
    own = {k: changes.pop(k) for k in ("prf", "second_round") if k in changes}
    weights = {k: changes.pop(k) for k in ("lexical", "dense") if k in changes}
    if weights:
        from types import MappingProxyType

        changes["arm_weights"] = MappingProxyType({**old.config.arm_weights, **weights})
    kind_rank.PROFILES["documents"] = dataclasses.replace(old, config=dataclasses.replace(old.config, **changes), **own)
    try:
        yield
    finally:
        kind_rank.PROFILES["documents"] = old


VARIANTS: dict[str, tuple[str, Callable[[], contextlib.AbstractContextManager[None]]]] = {
    "nodiversity": ("full", lambda: _full(doc_repeat=1.0)),
    "noboilerplate": ("full", lambda: _full(boilerplate_weight=0.0)),
    "nolowinfo": ("full", lambda: _full(low_info_terms=0)),
    "nopriors": ("full", lambda: _full(doc_repeat=1.0, boilerplate_weight=0.0, low_info_terms=0)),
    "w55": ("full", lambda: _weights(0.5, 0.5)),
    "w64": ("full", lambda: _weights(0.6, 0.4)),
    "w46": ("full", lambda: _weights(0.4, 0.6)),
    "base": ("full", contextlib.nullcontext),
    "prf": ("full", lambda: patched(lexical_math, "PRF_ENABLED", True)),
    "noprf": ("full", lambda: patched(lexical_math, "PRF_ENABLED", False)),
    "prf02": ("full", lambda: patched(lexical_math, "PRF_WEIGHT", 0.2)),
    "prf02w55": ("full", lambda: _stack(patched(lexical_math, "PRF_WEIGHT", 0.2), _weights(0.5, 0.5))),
    "autocut": ("full", lambda: patched(passages_mod, "fuse_and_rank", _no_keep(passages_mod.fuse_and_rank))),
    "nosecond": ("full", lambda: patched(multihop, "ENABLED", False)),
    "noauthor": ("full", lambda: patched(multihop, "AUTHOR_BOOST", 1.0)),
    "noneighbour": ("full", lambda: patched(multihop, "NEIGHBOUR_SEEDS", 0)),
    "nowhen": ("full", lambda: patched(multihop, "WHEN_BOOST", 1.0)),
    "author13": ("full", lambda: patched(multihop, "AUTHOR_BOOST", 1.3)),
    "nb07": ("full", lambda: patched(multihop, "NEIGHBOUR_FACTOR", 0.7)),
    "nophrase": ("full", lambda: patched(query_levers, "PHRASE_BOOST", 1.0)),
    "nojoin": ("full", lambda: patched(query_levers, "JOIN_FACTOR", 0.0)),
    "nospread": ("full", lambda: patched(query_levers, "THREAD_REPEAT", 1.0)),
    "noorder": ("full", lambda: patched(query_levers, "ORDER_BAND", 1.0)),
    "noquery": ("full", lambda: _no_query_levers()),
    "spread08": ("full", lambda: patched(query_levers, "THREAD_REPEAT", 0.8)),
    "join05": ("full", lambda: patched(query_levers, "JOIN_FACTOR", 0.5)),
    "join11": ("full", lambda: patched(query_levers, "JOIN_FACTOR", 1.1)),
    "join09": ("full", lambda: patched(query_levers, "JOIN_FACTOR", 0.9)),
    "join1": (
        "full",
        lambda: _stack(patched(query_levers, "JOIN_MIN_NAMES", 1), patched(query_levers, "JOIN_FACTOR", 0.9)),
    ),
    "author20": ("full", lambda: patched(multihop, "AUTHOR_BOOST", 2.0)),
    "nowindows": ("full", lambda: patched(windows, "ENABLED", False)),
    "join07": ("full", lambda: patched(query_levers, "JOIN_FACTOR", 0.7)),
    "kindoff": ("full", lambda: patched(kind_rank, "ENABLED", False)),
    "docprf": ("full", lambda: _doc(prf=True)),
    "docsecond": ("full", lambda: _doc(second_round=True)),
    "docw73": ("full", lambda: _doc(lexical=0.7, dense=0.3)),
    "docw64": ("full", lambda: _doc(lexical=0.6, dense=0.4)),
    "docw46": ("full", lambda: _doc(lexical=0.4, dense=0.6)),
    "docw37": ("full", lambda: _doc(lexical=0.3, dense=0.7)),
    "docnodiv": ("full", lambda: _doc(doc_repeat=1.0)),
    "docdiv05": ("full", lambda: _doc(doc_repeat=0.5)),
    "docdiv03": ("full", lambda: _doc(doc_repeat=0.3)),
    "docnotitle": ("full", lambda: _doc(title_boost=1.0)),
    "docnocascade": ("full", lambda: _doc(cascade=False)),
    "docnopriors": ("full", lambda: _doc(boilerplate_weight=0.0, low_info_terms=0)),
    "learned": ("full", contextlib.nullcontext),  # the model of --ranker on the full arm
    "learnedkindoff": ("full", lambda: patched(kind_rank, "ENABLED", False)),
    "lexical": ("lexical", contextlib.nullcontext),
    "dense": ("dense", contextlib.nullcontext),
    "hybrid": ("hybrid", contextlib.nullcontext),
}


async def run(a: argparse.Namespace) -> None:
    dataset = Path(a.dataset)
    raw = [json.loads(line) for line in open(dataset / "queries.jsonl")]  # noqa: ASYNC230, SIM115
    split = {r["qid"]: r.get("split") for r in raw}
    conv = {r["qid"]: r["groups"][0] for r in raw}
    order = list(dict.fromkeys(conv.values()))
    tune = set(a.tune_groups.split(",")) if a.tune_groups else set(order[:5])
    queries = [
        q.model_copy(update={"as_of": None})
        for q in iter_queries(dataset)
        if (a.split == "all" or split[q.qid] == a.split) and q.expected_doc_ids
    ]
    visibility = any_visible(event_visibility(dataset))
    settings = eval_settings(Settings(), tag=a.reuse, embedder=a.embedder, dataset=dataset)
    rt = await start_runtime(settings, [])
    from retriever.wiring import get_service

    service = get_service(rt)
    if not a.record_access:
        # every pass sees the same access counts (the access boost would otherwise drift pass after pass)
        service.access.record = lambda chunk_ids: None  # type: ignore[method-assign]
    from retriever import learned_rank

    model = learned_rank.load(a.ranker)
    sem = asyncio.Semaphore(a.concurrency)
    out: dict[str, Any] = {}
    try:
        for name in a.variants.split(","):
            arm, ctx = VARIANTS[name]
            service.passages.learned = model if name.startswith("learned") else None
            lat: list[float] = []

            async def one(q: GoldQuery, arm: str = arm, lat: list[float] = lat) -> Prediction:
                req = RetrieveContextRequest(query=q.query[:2000], workspace=f"eval-{a.reuse}", limit=a.limit, arms=arm)
                viewer = Viewer(principal_id=None, groups=tuple(q.viewer.groups), roles=frozenset())
                async with sem:
                    t = time.perf_counter()
                    resp = await service.retrieve_context(req, viewer)
                    lat.append(time.perf_counter() - t)
                ids = list(dict.fromkeys(p.external_id for p in resp.passages))
                return Prediction(qid=q.qid, doc_ids=ids, doc_scores=[1.0 / (i + 1) for i in range(len(ids))])

            with ctx():
                preds = await asyncio.gather(*(one(q) for q in queries))
            row: dict[str, Any] = {"p50_ms": round(sorted(lat)[len(lat) // 2] * 1000, 1)}
            for part, keep in (("all", None), ("conv1-5", True), ("conv6-10", False)):
                qs = [q for q in queries if keep is None or (conv[q.qid] in tune) == keep]
                ps = [p for p in preds if p.qid in {q.qid for q in qs}]
                rep = score(qs, ps, visibility=visibility, ks=(10,))
                m = rep.all_with_gold.as_dict() if rep.all_with_gold else {}
                row[part] = {k: round(v, 3) for k, v in m.items() if k in ("recall@10", "ndcg@10")}
                row[part]["leak_rate"] = rep.leak_rate
                if part == "all":
                    row["by_category"] = {
                        c.category: round(c.metrics.as_dict().get("recall@10", 0.0), 3)
                        for c in rep.categories
                        if c.metrics
                    }
                    row["ndcg_by_category"] = {
                        c.category: round(c.metrics.as_dict().get("ndcg@10", 0.0), 3)
                        for c in rep.categories
                        if c.metrics
                    }
            out[name] = row
            if a.dump:
                Path(a.dump).mkdir(parents=True, exist_ok=True)
                ranked = {p.qid: p.doc_ids for p in preds}
                (Path(a.dump) / f"{name}.json").write_text(json.dumps(ranked))
            print(name, json.dumps(row), flush=True)
    finally:
        await stop_runtime(rt)
    if a.out:
        Path(a.out).write_text(json.dumps(out, indent=2))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reuse", required=True)
    ap.add_argument("--dataset", default="../shared/data/locomo")
    ap.add_argument("--embedder", default="bge")
    ap.add_argument("--split", default="test", help="test (the connector protocol's), dev, or all")
    ap.add_argument("--variants", default="base,prf,autocut,lexical,dense,hybrid")
    ap.add_argument("--concurrency", type=int, default=4)
    ap.add_argument("--out")
    ap.add_argument("--record-access", action="store_true", help="count accesses as the product does")
    ap.add_argument("--limit", type=int, default=10, help="passages asked per query (scored at 10)")
    ap.add_argument("--tune-groups", help="comma list of groups scored as the tune half (default: first five)")
    ap.add_argument("--ranker", help="a model file of `orgmem ranker train` for the learned* variants")
    ap.add_argument("--dump", help="folder: one <variant>.json of ranked external ids per query")
    asyncio.run(run(ap.parse_args()))


if __name__ == "__main__":
    main()
