"""Where the gold falls out: each missed gold turn of the ``full`` top 10, classified on a kept run.

    python -m bench.miss_profile --reuse TAG --dataset ../shared/data/locomo --embedder local --split dev

For every query with gold (asked as ``connector_eval.py`` asks: query text only, viewer = the query's groups), a
gold id not in full's top 10 is

- ``ranked 11-20`` / ``ranked 21-50``: full ranks it there (asked with limit 50);
- ``pool, not ranked``: the first round's candidate pool has it (lexical or dense top 40) but full's top 50 lost it;
- ``outside pool``: neither arm's top 40 returns it;

and, separately, ``thread neighbour``: it is within two turns of a top-10 hit in the same session (what a
window of the hit would catch). Printed per category as counts of missed gold ids.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import re
from pathlib import Path
from typing import Any

from schemas.tools import RetrieveContextRequest
from services.eval.dataset_queries import iter_queries
from services.eval.gold import GoldQuery
from services.eval.live import eval_settings
from services.serve import start_runtime, stop_runtime
from services.settings import Settings
from services.viewer import Viewer

_TURN = re.compile(r"^(?P<session>.+/D\d+):(?P<turn>\d+)$")
BUCKETS = ("ranked 11-20", "ranked 21-50", "pool, not ranked", "outside pool")


def near(gold: str, top: list[str], span: int = 2) -> bool:
    """``gold`` is within ``span`` turns of one of ``top`` in the same LoCoMo session (``conv/D3:7``)."""
    g = _TURN.match(gold)
    if g is None:
        return False
    for t in top:
        m = _TURN.match(t)
        if m and m["session"] == g["session"] and 0 < abs(int(m["turn"]) - int(g["turn"])) <= span:
            return True
    return False


def classify(gold: str, full50: list[str], pool: set[str]) -> str:
    if gold in full50[10:20]:
        return BUCKETS[0]
    if gold in full50[20:]:
        return BUCKETS[1]
    return BUCKETS[2] if gold in pool else BUCKETS[3]


async def _ids(service: Any, q: GoldQuery, workspace: str, arm: str, limit: int) -> list[str]:
    req = RetrieveContextRequest(query=q.query[:2000], workspace=workspace, limit=limit, arms=arm)
    viewer = Viewer(principal_id=None, groups=tuple(q.viewer.groups), roles=frozenset())
    resp = await service.retrieve_context(req, viewer)
    return list(dict.fromkeys(p.external_id for p in resp.passages))


async def run(a: argparse.Namespace) -> None:
    dataset = Path(a.dataset)
    raw = {r["qid"]: r for r in map(json.loads, open(dataset / "queries.jsonl"))}  # noqa: ASYNC230, SIM115
    queries = [q for q in iter_queries(dataset) if raw[q.qid].get("split") == a.split and q.expected_doc_ids]
    settings = eval_settings(Settings(), tag=a.reuse, embedder=a.embedder, dataset=dataset)
    rt = await start_runtime(settings, [])
    from retriever.wiring import get_service

    service = get_service(rt)
    service.access.record = lambda chunk_ids: None  # type: ignore[method-assign]
    sem = asyncio.Semaphore(4)
    counts: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    workspace = f"eval-{a.reuse}"

    async def one(q: GoldQuery) -> None:
        async with sem:
            full = await _ids(service, q, workspace, "full", 50)
            lex = await _ids(service, q, workspace, "lexical", 40)
            dense = await _ids(service, q, workspace, "dense", 40)
        cat = q.category or "-"
        for g in q.expected_doc_ids:
            counts[cat]["gold"] += 1
            if g in full[:10]:
                counts[cat]["found"] += 1
                continue
            counts[cat][classify(g, full, set(lex) | set(dense))] += 1
            counts[cat]["thread neighbour"] += near(g, full[:10])

    try:
        await asyncio.gather(*(one(q) for q in queries))
    finally:
        await stop_runtime(rt)
    cols = ["gold", "found", *BUCKETS, "thread neighbour"]
    print("category | " + " | ".join(cols))
    total: collections.Counter[str] = collections.Counter()
    for cat in sorted(counts):
        total.update(counts[cat])
        print(f"{cat} | " + " | ".join(str(counts[cat][c]) for c in cols))
    print("all | " + " | ".join(str(total[c]) for c in cols))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reuse", required=True)
    ap.add_argument("--dataset", default="../shared/data/locomo")
    ap.add_argument("--embedder", default="local")
    ap.add_argument("--split", default="dev")
    asyncio.run(run(ap.parse_args()))


if __name__ == "__main__":
    main()
