"""The learned ranker (optional): a LightGBM LambdaRank model re-orders the ``full`` arm's candidates by
features the pipeline already computes.

Why: the hand-set levers (CC weights, boosts, priors) are each tuned on one corpus; a small gradient-boosted model
over the same signals can weigh them per candidate (issue 26). It is trained only on the repository's eval runs of
train/dev splits by ``orgmem ranker train`` (``services/ranker_train.py``: seeded, one thread, the model file named
and stamped with its content hash) and is off unless ``RANKER_MODEL_PATH`` names a model file: without one the
ranking is today's fusion, unchanged. ``lightgbm`` is an optional dependency (extra ``ranker``); a configured
model without it is a boot error, never a silent fallback.

Features (:data:`FEATURES`, one row per candidate, all scale-free within a query): the arms' raw scores, their
share of the query's best and inverse ranks; the fused score; the boosts the cascade and the second round gave
(recency, title, tier, priors, author, when-expression, neighbour); the candidate's kind, its document's number
of candidates, its length, age against the newest candidate, and the share of the query's content terms it
contains (an entity-overlap proxy).
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from retriever.boosts import age_days
from retriever.hits import RankedHit
from retriever.terms import content_terms, tokens

FEATURES: tuple[str, ...] = (
    "lex_score",
    "lex_rel",
    "lex_inv_rank",
    "dense_score",
    "dense_gap",
    "dense_inv_rank",
    "rel_inv_rank",
    "fused",
    "fused_rel",
    "score_rel",
    "inv_position",
    "recency",
    "title",
    "tier",
    "boilerplate",
    "low_info",
    "author",
    "when",
    "neighbour",
    "is_document",
    "is_message",
    "doc_candidates",
    "log_len",
    "log_age_vs_newest",
    "query_terms",
    "term_overlap",
)
DOCUMENT_KINDS = frozenset({"document", "email", "ticket", "pull_request"})
BOOSTS = ("recency", "title", "tier", "boilerplate", "low_info", "author", "when", "neighbour")


class Booster(Protocol):
    def predict(self, data: Any) -> Any: ...


@dataclass(frozen=True, slots=True)
class Candidate:
    """What a feature row needs of a candidate beyond its :class:`RankedHit`."""

    kind: str
    text: str
    external_id: str = ""


def _inv(rank: int | None) -> float:
    return 1.0 / rank if rank else 0.0


def features(
    query: str,
    ranked: Sequence[RankedHit],
    candidates: Mapping[str, Candidate],
    arm_scores: Mapping[str, Mapping[str, float]],
) -> list[list[float]]:
    """One row of :data:`FEATURES` per hit of ``ranked`` (best first), in that order."""
    if not ranked:
        return []
    lex, dense = arm_scores.get("lexical", {}), arm_scores.get("dense", {})
    lex_max = max(lex.values(), default=0.0) or 1.0
    dense_max = max(dense.values(), default=0.0)
    fused_max = max(rh.fused for rh in ranked) or 1.0
    score_max = max(rh.score for rh in ranked) or 1.0
    newest = max(rh.hit.event_time for rh in ranked)
    per_doc: dict[str, int] = {}
    for rh in ranked:
        per_doc[rh.hit.document_id] = per_doc.get(rh.hit.document_id, 0) + 1
    terms = set(content_terms(query))
    rows: list[list[float]] = []
    for pos, rh in enumerate(ranked):
        cid = rh.hit.chunk_id
        cand = candidates.get(cid, Candidate("", rh.hit.text))
        words = set(tokens(cand.text))
        cos = dense.get(cid)
        rows.append(
            [
                lex.get(cid, 0.0),
                lex.get(cid, 0.0) / lex_max,
                _inv(rh.arm_ranks.get("lexical")),
                cos if cos is not None else 0.0,
                (cos - dense_max) if cos is not None else -1.0,
                _inv(rh.arm_ranks.get("dense")),
                _inv(rh.arm_ranks.get("relational")),
                rh.fused,
                rh.fused / fused_max,
                rh.score / score_max,
                1.0 / (pos + 1),
                *(float(rh.boosts.get(b, 1.0)) for b in BOOSTS),
                1.0 if cand.kind in DOCUMENT_KINDS else 0.0,
                1.0 if cand.kind == "message" else 0.0,
                float(per_doc[rh.hit.document_id]),
                math.log1p(len(cand.text)),
                math.log1p(age_days(rh.hit.event_time, newest)),
                float(len(terms)),
                len(terms & words) / len(terms) if terms else 0.0,
            ]
        )
    return rows


def model_hash(text: str) -> str:
    """The model's version: the first 12 hex digits of the SHA-256 of its file text."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]


class LearnedRanker:
    """A loaded model: re-orders a query's candidates; the scores stay those of the fusion, re-assigned in the new
    order (so the packer's and autocut's score scale is unchanged)."""

    def __init__(self, booster: Booster, version: str, features: Sequence[str] = FEATURES) -> None:
        if tuple(features) != FEATURES:
            raise ValueError(f"ranker model features {list(features)} differ from this code's {list(FEATURES)}")
        self.booster = booster
        self.version = version

    def rerank(
        self,
        query: str,
        ranked: Sequence[RankedHit],
        candidates: Mapping[str, Candidate],
        arm_scores: Mapping[str, Mapping[str, float]],
    ) -> list[RankedHit]:
        if len(ranked) < 2:
            return list(ranked)
        import numpy as np

        rows = np.asarray(features(query, ranked, candidates, arm_scores), dtype=np.float64)
        predicted = [float(p) for p in self.booster.predict(rows)]
        order = sorted(range(len(ranked)), key=lambda i: (-predicted[i], i))
        scores = sorted((rh.score for rh in ranked), reverse=True)
        return [
            RankedHit(ranked[i].hit, scores[n], ranked[i].fused, ranked[i].arm_ranks, ranked[i].boosts)
            for n, i in enumerate(order)
        ]


def load(path: Path | str | None) -> LearnedRanker | None:
    """The model at ``path`` (LightGBM text format, with ``<path>.json`` metadata beside it), or None for no path.

    A path that does not exist, a model whose features differ from :data:`FEATURES`, or a missing ``lightgbm``
    raises: an operator who configured a ranker must not silently get another ranking."""
    if path is None or str(path) == "":
        return None
    p = Path(path)
    text = p.read_text(encoding="utf-8")
    meta_path = p.with_suffix(p.suffix + ".json")
    meta: dict[str, Any] = json.loads(meta_path.read_text(encoding="utf-8")) if meta_path.exists() else {}
    version = model_hash(text)
    if meta.get("version") not in (None, version):
        raise ValueError(f"{p}: metadata version {meta.get('version')} does not match the model's hash {version}")
    import lightgbm

    return LearnedRanker(lightgbm.Booster(model_str=text), version, meta.get("features", FEATURES))
