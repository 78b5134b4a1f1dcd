"""Fusion of the arms' hits (pure): CC (convex combination of normalised scores, the default) and weighted RRF;
see :mod:`retriever.ranking` for why CC."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from retriever.hits import CC_WEIGHTS, RRF_K, RRF_WEIGHTS, SCORE_FLOORS, Fused, RankConfig


def rrf_fuse(arms: Mapping[str, Sequence[str]], weights: Mapping[str, float] | None = None, k: int = RRF_K) -> Fused:
    """Weighted reciprocal rank fusion: ``Σ w_arm / (k + rank)`` with 1-based ranks.

    A repeated id inside one arm keeps its first (best) rank. Arms without a positive weight
    are ignored. ``order`` sorts by fused score descending, then id ascending.
    """
    w = RRF_WEIGHTS if weights is None else weights
    return _combine(arms, w, lambda _arm, first, weight: {cid: weight / (k + r) for cid, r in first.items()})


def _combine(
    arms: Mapping[str, Sequence[str]],
    weights: Mapping[str, float],
    weighted: Callable[[str, dict[str, int], float], Mapping[str, float]],
) -> Fused:
    """What both fusions share: arms without a positive weight ignored, each arm's ids at their first (best)
    rank, the ``weighted(arm, first ranks, weight)`` contributions summed per id in arm-name order, and the
    order by fused score descending, then id ascending."""
    scores: dict[str, float] = {}
    ranks: dict[str, dict[str, int]] = {}
    for arm in sorted(arms):
        weight = weights.get(arm, 0.0)
        if weight <= 0:
            continue
        first = _first_ranks(arms[arm])
        for cid, value in weighted(arm, first, weight).items():
            ranks.setdefault(cid, {})[arm] = first[cid]
            scores[cid] = scores.get(cid, 0.0) + value
    order = tuple(sorted(scores, key=lambda cid: (-scores[cid], cid)))
    return Fused(scores=scores, arm_ranks=ranks, order=order)


def _first_ranks(ids: Sequence[str]) -> dict[str, int]:
    ranks: dict[str, int] = {}
    for rank, cid in enumerate(ids, start=1):
        ranks.setdefault(cid, rank)
    return ranks


def normalise(raw: Mapping[str, float], floor: float | None = None) -> dict[str, float]:
    """Min-max normalise to [0, 1]: ``(s - lo) / (hi - lo)``, ``lo = floor`` when given (clamped to the
    observed minimum), else the lowest score. All-equal scores (or a single one) normalise to 1.0."""
    if not raw:
        return {}
    hi = max(raw.values())
    lo = min(raw.values()) if floor is None else min(floor, min(raw.values()))
    if hi <= lo:
        return {cid: 1.0 for cid in raw}
    return {cid: (s - lo) / (hi - lo) for cid, s in raw.items()}


def cc_fuse(
    arms: Mapping[str, Sequence[str]],
    arm_scores: Mapping[str, Mapping[str, float]] | None = None,
    weights: Mapping[str, float] | None = None,
    floors: Mapping[str, float] | None = None,
) -> Fused:
    """Convex combination of per-arm normalised scores (see module docstring).

    ``arms`` gives each arm's ids best first (ranks for diagnostics, and the scores of an arm that
    has no entry in ``arm_scores``: ``(n - rank + 1) / n`` with floor 0). Scores of ids not listed in the arm are
    ignored; an id listed without a score gets the arm's lowest score. Arms without a positive weight
    are ignored. ``order`` sorts by fused score descending, then id ascending.
    """
    w = CC_WEIGHTS if weights is None else weights
    given = arm_scores or {}
    bounds = SCORE_FLOORS if floors is None else floors

    def weighted(arm: str, first: dict[str, int], weight: float) -> dict[str, float]:
        n = len(first)
        if arm in given:
            known = {cid: float(given[arm][cid]) for cid in first if cid in given[arm]}
            lowest = min(known.values(), default=0.0)
            raw = {cid: known.get(cid, lowest) for cid in first}
            floor = bounds.get(arm)
        else:
            raw = {cid: (n - rank + 1) / n for cid, rank in first.items()}
            floor = 0.0
        return {cid: weight * value for cid, value in normalise(raw, floor).items()}

    return _combine(arms, w, weighted)


def fuse(
    arms: Mapping[str, Sequence[str]], arm_scores: Mapping[str, Mapping[str, float]] | None, config: RankConfig
) -> Fused:
    """Step 1 of the pipeline with ``config``'s fusion."""
    if config.fusion == "cc":
        return cc_fuse(arms, arm_scores, config.arm_weights, config.score_floors)
    return rrf_fuse(arms, config.arm_weights, config.rrf_k)
