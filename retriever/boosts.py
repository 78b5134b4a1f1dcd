"""Priors, boosts and the later steps of ranking (pure): scope tier, recency, access, title, content priors
(boilerplate, low information), the floor, content dedup, per-document diversity, the bounded usage boost,
autocut and recency decay. Their order is :func:`retriever.ranking.fuse_and_rank`'s."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from types import MappingProxyType

from retriever.hits import DEFAULT, SECONDS_PER_DAY, Hit, RankConfig, RankedHit
from retriever.terms import FILLERS, content_terms, tokens


def tier_multiplier(scope: str, tiers: Mapping[str, float] | None = None) -> float:
    """Scope-tier factor; an unknown scope falls back to the ``other`` tier (0.6 by default)."""
    t = DEFAULT.tier_boost if tiers is None else tiers
    return t.get(scope, t.get("other", 0.6))


def age_days(event_time: datetime, now: datetime) -> float:
    """Age in days, never negative (future event times count as age 0)."""
    return max(0.0, (now - event_time).total_seconds() / SECONDS_PER_DAY)


def recency_multiplier(age: float, half_life_days: float = 30.0, max_factor: float = 1.4) -> float:
    """``1 + (max - 1) × 0.5 ** (age / half_life)``: 1.4 at age 0, 1.2 at one half-life, → 1.0.

    Always within [1.0, max_factor]; negative ages are treated as 0.
    """
    bonus = (max_factor - 1.0) * float(0.5 ** (max(0.0, age) / half_life_days))
    return min(max_factor, max(1.0, 1.0 + bonus))


def access_multiplier(access_count: float, saturation: int = 100, max_factor: float = 1.6) -> float:
    """``1 + (max - 1) × min(1, ln(1 + n) / ln(1 + saturation))``: 1.0 at n ≤ 0, 1.6 at n ≥ 100.

    Example: n = 9 → 1 + 0.6 × ln 10 / ln 101 ≈ 1.2993.
    """
    if access_count <= 0:
        return 1.0
    frac = min(1.0, math.log1p(access_count) / math.log1p(saturation))
    return 1.0 + (max_factor - 1.0) * frac


def title_matches(query_terms: Iterable[str], title: str | None) -> bool:
    """True when any query content term equals a token of the title (case-insensitive)."""
    if not title:
        return False
    title_tokens = set(tokens(title))
    return any(term in title_tokens for term in query_terms)


def recency_decay(age: float, half_life_days: float, min_decay: float = 0.0) -> float:
    """``max(min_decay, 0.5 ** (age / half_life_days))``: 1.0 at age 0, 0.5 at one half-life."""
    if half_life_days <= 0:
        raise ValueError(f"half_life_days must be > 0, got {half_life_days}")
    return max(min_decay, float(0.5 ** (max(0.0, age) / half_life_days)))


def floor_threshold(scores: Iterable[float], ratio: float = 0.6) -> float | None:
    """``ratio × max(scores)``, or None for no scores."""
    values = list(scores)
    return ratio * max(values) if values else None


def cascade_factors(hit: Hit, query_terms: Sequence[str], now: datetime, config: RankConfig) -> dict[str, float]:
    """The bounded multipliers an above-floor hit gets; factors equal to 1.0 are omitted."""
    factors = {
        "recency": recency_multiplier(age_days(hit.event_time, now), config.recency_half_life_days, config.recency_max),
        "access": access_multiplier(hit.access_count, config.access_saturation, config.access_max),
        "title": config.title_boost if title_matches(query_terms, hit.title) else 1.0,
    }
    return {name: f for name, f in factors.items() if f != 1.0}


def dedup_by_content(ranked: Sequence[RankedHit]) -> tuple[list[RankedHit], list[tuple[str, str]]]:
    """Keep the best hit per ``content_hash``; ``ranked`` must already be sorted best first.

    Returns (kept, dropped) where dropped holds ``(dropped_chunk_id, kept_chunk_id)`` pairs.
    """
    kept: list[RankedHit] = []
    winner: dict[str, str] = {}
    dropped: list[tuple[str, str]] = []
    for rh in ranked:
        h = rh.hit.content_hash
        if h in winner:
            dropped.append((rh.hit.chunk_id, winner[h]))
        else:
            winner[h] = rh.hit.chunk_id
            kept.append(rh)
    return kept, dropped


def autocut_index(scores: Sequence[float], min_keep: int = 3, min_gap: float = 0.2) -> int | None:
    """Where to cut a descending score list, as the number of items to keep, or None.

    Rule: among the gaps ``scores[i-1] - scores[i]`` for ``i`` in ``[min_keep, len)`` take the
    largest (the first one on ties). Cut there only if that gap is at least ``min_gap × scores[0]``
    (a drop of 20 % of the top score by default); otherwise keep everything (None). Lists not
    longer than ``min_keep`` or with a non-positive top score are never cut.
    """
    n = len(scores)
    if n <= min_keep or scores[0] <= 0:
        return None
    best_i, best_gap = -1, -math.inf
    for i in range(min_keep, n):
        gap = scores[i - 1] - scores[i]
        if gap > best_gap:
            best_i, best_gap = i, gap
    return best_i if best_gap >= min_gap * scores[0] else None


def sort_ranked(ranked: Iterable[RankedHit]) -> list[RankedHit]:
    return sorted(ranked, key=lambda rh: (-rh.score, rh.hit.chunk_id))


def rescored(rh: RankedHit, score: float, boosts: Mapping[str, float]) -> RankedHit:
    return RankedHit(rh.hit, score, rh.fused, rh.arm_ranks, MappingProxyType(dict(boosts)))


def content_priors(hits: Mapping[str, Hit], config: RankConfig) -> dict[str, dict[str, float]]:
    """The near-duplicate (``boilerplate``) and ``low_info`` factors of every candidate, factors of 1.0 omitted."""
    out: dict[str, dict[str, float]] = {cid: {} for cid in hits}
    if config.boilerplate_weight > 0:
        docs: dict[str, set[str]] = {}
        keys = {cid: " ".join(tokens(h.text)) for cid, h in hits.items()}
        for cid, key in keys.items():
            docs.setdefault(key, set()).add(hits[cid].document_id)
        for cid, key in keys.items():
            n = len(docs[key])
            if n >= 2 and key:
                out[cid]["boilerplate"] = max(config.boilerplate_min, 1.0 - config.boilerplate_weight * math.log(n))
    if config.low_info_terms > 0:
        for cid, h in hits.items():
            n = sum(1 for t in content_terms(h.text) if t not in FILLERS)
            if n < config.low_info_terms:
                out[cid]["low_info"] = config.low_info_min + (1.0 - config.low_info_min) * n / config.low_info_terms
    return out


def diversify(
    ranked: Sequence[RankedHit],
    factor: float,
    key: Callable[[RankedHit], str | None] = lambda rh: rh.hit.document_id,
    label: str = "doc_repeat",
) -> list[RankedHit]:
    """Each further passage of a group (by default its document; a None key is no group) already ranked above it
    times ``factor`` per earlier one, re-sorted; ``label`` names the factor among the boosts."""
    if factor >= 1.0:
        return list(ranked)
    seen: dict[str, int] = {}
    out: list[RankedHit] = []
    for rh in ranked:
        group = key(rh)
        n = 0 if group is None else seen.get(group, 0)
        if group is not None:
            seen[group] = n + 1
        if n:
            f = factor**n
            rh = rescored(rh, rh.score * f, {**rh.boosts, label: f})
        out.append(rh)
    return sort_ranked(out)


def with_usage(ranked: Sequence[RankedHit], usage: Mapping[str, float]) -> list[RankedHit]:
    """The access boost, bounded by the better matches: ``ranked`` (best first, without it) keeps its order
    except among equal scores, where the more used hit goes first; a used hit's score is lifted by its factor
    but never above the hit ranked before it. Usage alone never moves a passage past a better-matching one
    (issue 26: one viewer's queries must not reorder the next viewer's results)."""
    if not usage:
        return list(ranked)
    order = sorted(ranked, key=lambda rh: (-rh.score, -usage.get(rh.hit.chunk_id, 1.0), rh.hit.chunk_id))
    out: list[RankedHit] = []
    prev_match, prev_score = math.inf, math.inf
    for rh in order:
        # strictly below a better match (a later re-sort by score cannot swap them), at most equal to an equal one
        cap = prev_score if rh.score >= prev_match else math.nextafter(prev_score, -math.inf)
        score = max(rh.score, min(rh.score * usage.get(rh.hit.chunk_id, 1.0), cap))
        prev_match, prev_score = rh.score, score
        if score > rh.score:
            rh = rescored(rh, score, {**rh.boosts, "access": score / rh.score})
        out.append(rh)
    return out
