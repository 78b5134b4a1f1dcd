"""``orgmem eval live --flags preload,consolidation,fabric``: each self-improvement / fabric mechanism on and off on
the same loaded data, with the deltas against the product's ``full`` arm (seed 002's rule: nothing on by default
without eval coverage).

- ``fabric``: the arm ``fabric`` = ``full`` with ``mode: "fabric"`` (the graph stages run during the load);
- ``preload``: the arm ``preload`` = the items of ``POST /tools/preload`` (top-k memories + top-k passages);
- ``consolidation``: after the other arms, ``orgmem consolidate --apply`` on the loaded workspace, ``full`` again
  (arm ``full+consolidated``), then every merge undone and ``full`` once more (arm ``full+undone``, which must
  equal ``full``: undo restores the ranking exactly).
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from schemas.preload import PreloadRequest
from schemas.tools import RetrieveContextRequest
from services.eval.gold import GoldQuery, Prediction
from services.eval.metrics import Report

FLAGS = ("preload", "consolidation", "fabric")
CONSOLIDATED, UNDONE = "full+consolidated", "full+undone"


def parse_flags(raw: str | None) -> list[str]:
    flags = [f.strip() for f in (raw or "").split(",") if f.strip()]
    unknown = sorted(set(flags) - set(FLAGS))
    if unknown:
        raise ValueError(f"unknown --flags {unknown}; known: {', '.join(FLAGS)}")
    return flags


def flag_arms(flags: Sequence[str]) -> list[str]:
    return [a for a in ("fabric", "preload") if a in flags]


async def predict(service: Any, q: GoldQuery, workspace: str, arm: str, k: int) -> Prediction:
    """One query on a regular arm, on ``fabric`` or on ``preload``."""
    if arm == "preload":
        from retriever.preload import preload

        out = await preload(
            service, q.viewer.viewer(), PreloadRequest(text=q.query[:2000], workspace=workspace), default_top_k=k // 2
        )
        ids = list(dict.fromkeys(i.external_id for i in out.items))
        return Prediction(qid=q.qid, doc_ids=ids, doc_scores=[float(len(ids) - n) for n in range(len(ids))])
    names = [str(s) for s in (q.subjects or ())]
    req = RetrieveContextRequest(
        query=q.query[:2000],
        workspace=workspace,
        limit=k,
        arms="full" if arm in ("fabric", CONSOLIDATED, UNDONE) else arm,
        as_of=q.as_of,
        mode="fabric" if arm == "fabric" else (q.mode or "vector_first"),
        about=names[0] if names else None,
    )
    resp = await service.retrieve_context(req, q.viewer.viewer())
    ids = list(dict.fromkeys(p.external_id for p in resp.passages))
    scores: dict[str, float] = {}
    for p in resp.passages:
        scores.setdefault(p.external_id, p.score)
    windows = window_ids(resp)
    return Prediction(
        qid=q.qid,
        doc_ids=ids,
        doc_scores=[scores[i] for i in ids],
        doc_windows=None if windows is None else [windows.get(i, ()) for i in ids],
    )


def window_ids(resp: Any) -> dict[str, tuple[str, ...]] | None:
    """External id of each returned passage → the external ids of its window (``diagnostics.windows``, the full
    arm's); None when the response carries no windows (the baselines)."""
    raw = resp.diagnostics.get("windows")
    if not isinstance(raw, dict):
        return None
    out: dict[str, tuple[str, ...]] = {}
    for p in resp.passages:
        members = raw.get(str(p.chunk_id)) or []
        out.setdefault(p.external_id, tuple(m["external_id"] for m in members))
    return out


def _metric(report: Report, name: str) -> float | None:
    return None if report.overall is None else report.overall.as_dict().get(name)


def deltas_table(reports: Mapping[str, Report], latencies_ms: Mapping[str, Sequence[float]]) -> str:
    """Each flag's arm against ``full``: recall@10, nDCG@10, leak rate, p50 latency, and the deltas."""
    base = reports.get("full")
    if base is None:
        return ""
    rows = ["arm | recall@10 | Δ | nDCG@10 | Δ | leak | p50 ms | × full p50"]
    base_p50 = statistics.median(latencies_ms["full"]) if latencies_ms.get("full") else None
    for arm in ("full", "fabric", "preload", CONSOLIDATED, UNDONE):
        if arm not in reports:
            continue
        r, n = _metric(reports[arm], "recall@10"), _metric(reports[arm], "ndcg@10")
        br, bn = _metric(base, "recall@10"), _metric(base, "ndcg@10")
        p50 = statistics.median(latencies_ms[arm]) if latencies_ms.get(arm) else None

        def f(v: float | None) -> str:
            return "-" if v is None else f"{v:.3f}"

        dr = None if r is None or br is None else r - br
        dn = None if n is None or bn is None else n - bn
        ratio = "-" if p50 is None or not base_p50 else f"{p50 / base_p50:.2f}"
        leak = "-" if reports[arm].leak_rate is None else f"{reports[arm].leak_rate:.3f}"
        rows.append(
            f"{arm} | {f(r)} | {f(dr)} | {f(n)} | {f(dn)} | {leak} | {'-' if p50 is None else f'{p50:.1f}'} | {ratio}"
        )
    return "\n".join(rows)
