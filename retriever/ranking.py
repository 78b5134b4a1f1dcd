"""Pure fusion and ranking of hybrid search hits (no I/O).

Pipeline of :func:`fuse_and_rank`, in order:

1. **Fusion**, one of
   - **CC** (convex combination of normalised arm scores; the default): each arm's raw scores are
     min-max normalised, ``(s - lo) / (hi - lo)`` with ``lo`` the arm's natural floor when it has
     one (BM25: 0) and its lowest score otherwise, then ``fused(id) = Σ_arm weight_arm × norm_arm(id)``
     (0 for an arm that did not return the id). Default weights lexical 0.7, dense 0.3,
     relational 0.5. Arms without raw scores are scored by rank, ``(n - rank + 1) / n``.
   - **RRF** (Cormack et al. 2009): ``fused(id) = Σ_arm weight_arm / (k + rank_arm(id))`` with
     ``k = 60`` and 1-based ranks (the ``hybrid`` evaluation baseline).
   Arms missing from the weights (or weighted 0) are ignored.

   Why CC by default: RRF throws the score gaps away and gives a weak arm's rank 1 the same credit
   as a strong arm's rank 1. On LoCoMo (1,982 questions, local MiniLM) RRF 1:1 scored recall@10
   0.64 against BM25 alone 0.72, while CC 0.7/0.3 over complete scores scored 0.75 — chosen on
   conversations 1–5, held on 6–10 (0.73 vs 0.69). Bruch et al., *An Analysis of Fusion Functions
   for Hybrid Retrieval* (TOIS 2023) report the same ordering.
2. **Scope-tier boost**: ``score = fused × tier_boost[hit.scope]`` (default user 1.0, team 0.9,
   division 0.75, org 0.6, other 0.6); times ``date_boost`` (1.3) for a hit whose ``event_time`` lies in the
   query's ``boost_range`` (a date that says which document is meant: a soft boost, never a filter).
3. **Floor-gated bounded cascade**: ``floor = 0.6 × max(post-tier score)``, computed once. Only
   hits with ``score >= floor`` are multiplied by recency ∈ [1.0, 1.4] and a flat 1.25 title match; hits below
   the floor keep their post-tier score. The access boost ∈ [1.0, 1.6] (of decayed usage, ``retriever/access.py``)
   comes last and is bounded by the better matches: it lifts a hit at most to the score of the hit ranked before
   it and only reorders equal scores (:func:`_with_usage`), so usage never beats a better match.
4. **Content dedup**: one hit per ``content_hash``, the highest-scoring one survives.
5. **Autocut** at the largest score gap (see :func:`autocut_index`), never below ``keep_at_least`` (the
   caller's requested limit: a multi-evidence question keeps its later hits; the token budget trims them).
6. **Recency decay** (optional): ``score × max(min_decay, 0.5 ** (age_days / half_life_days))``.
7. **Limit**.

Ties are always broken deterministically: score descending, then ``chunk_id`` ascending.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from types import MappingProxyType

RRF_K = 60
SECONDS_PER_DAY = 86_400.0
FUSIONS = ("cc", "rrf")

CC_WEIGHTS: Mapping[str, float] = MappingProxyType({"lexical": 0.7, "dense": 0.3, "relational": 0.5})
"""Convex-combination weights: BM25 leads, the dense model re-orders; a resolved typed edge adds at
most 0.5, so a relational-only hit never leapfrogs a strong hit of both text arms."""
RRF_WEIGHTS: Mapping[str, float] = MappingProxyType({"dense": 1.0, "lexical": 1.0, "semantic": 1.0, "relational": 0.5})
SCORE_FLOORS: Mapping[str, float] = MappingProxyType({"lexical": 0.0})
"""Natural lower bounds of raw arm scores used by CC normalisation (BM25 of a non-match is 0)."""

STOPWORDS: frozenset[str] = frozenset(
    """a about above after again against all am an and any are as at be because been before being
    below between both but by can could did do does doing down during each few for from further had
    has have having he her here hers him his how i if in into is it its itself just me more most my
    no nor not of off on once only or other our ours out over own same she should so some such than
    that the their theirs them then there these they this those through to too under until up very
    was we were what when where which while who whom why will with would you your yours
    tell show give find know get got me us did does latest recent recently current currently""".split()  # noqa: SIM905
)

_TOKEN_RE = re.compile(r"[a-z0-9]+")

FILLERS: frozenset[str] = frozenset(
    """haha hahaha lol lmao yes yeah yep yup no nope ok okay oh ohh hmm wow omg cool great nice sure hey hi
    hello thanks thank awesome amazing totally really definitely absolutely true right good glad love""".split()  # noqa: SIM905
)
"""Chat fillers: not information when counting a passage's content terms (the low-information prior)."""


def tokens(text: str) -> list[str]:
    """Lower-cased alphanumeric tokens of ``text`` (apostrophes and punctuation split tokens)."""
    return _TOKEN_RE.findall(text.lower())


def content_terms(text: str) -> list[str]:
    """Query terms worth matching: tokens of length ≥ 2 that are not stopwords, first occurrence order."""
    seen: dict[str, None] = {}
    for tok in tokens(text):
        if len(tok) >= 2 and tok not in STOPWORDS:
            seen.setdefault(tok, None)
    return list(seen)


@dataclass(frozen=True, slots=True)
class Hit:
    """One candidate chunk as returned by the search arms (already ACL-filtered by the caller)."""

    chunk_id: str
    document_id: str
    content_hash: str
    title: str | None
    text: str
    event_time: datetime
    scope: str
    access_count: float = 0
    """Decayed usage: accesses, each halved every ``ACCESS_HALF_LIFE_DAYS`` since (``retriever/access.py``)."""


@dataclass(frozen=True, slots=True)
class Fused:
    """Fusion output: fused score and 1-based per-arm rank for every id seen in a weighted arm."""

    scores: Mapping[str, float]
    arm_ranks: Mapping[str, Mapping[str, int]]
    order: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class RankConfig:
    """Ranking knobs. Frozen; derive variants with ``dataclasses.replace``.

    ``fusion`` is ``"cc"`` or ``"rrf"`` (``rrf_k`` only matters for RRF; ``score_floors`` only for CC).
    ``decay_half_life_days = None`` disables the final recency decay (step 6).
    ``autocut_min_gap`` is relative to the top score (0.3 = a drop of 30 % of the top score).
    """

    fusion: str = "cc"
    rrf_k: int = RRF_K
    arm_weights: Mapping[str, float] = field(default_factory=lambda: CC_WEIGHTS)
    score_floors: Mapping[str, float] = field(default_factory=lambda: SCORE_FLOORS)
    tier_boost: Mapping[str, float] = field(
        default_factory=lambda: MappingProxyType({"user": 1.0, "team": 0.9, "division": 0.75, "org": 0.6, "other": 0.6})
    )
    cascade: bool = True
    floor_ratio: float = 0.6
    recency_max: float = 1.4
    recency_half_life_days: float = 30.0
    access_max: float = 1.6
    access_saturation: int = 100
    title_boost: float = 1.25
    dedup: bool = True
    autocut: bool = True
    autocut_min_keep: int = 3
    autocut_min_gap: float = 0.3
    decay_half_life_days: float | None = None
    decay_min: float = 0.5
    date_boost: float = 1.3
    doc_repeat: float = 1.0
    """Per-document diversity: each further passage of a document already ranked is multiplied by this (1.0 =
    off). Passages of one long abstract took 3 of 10 slots on a document corpus (issue 26)."""
    boilerplate_weight: float = 0.0
    """Near-duplicate prior: a passage whose text (normalised tokens) appears in ``n >= 2`` documents among the
    candidates is multiplied by ``max(boilerplate_min, 1 - weight × ln n)`` (0 = off): a footer or template line
    repeated across documents matched many questions first."""
    boilerplate_min: float = 0.5
    low_info_terms: int = 0
    """Low-information prior: a passage with ``n`` < this many distinct content terms (:func:`content_terms`, chat
    :data:`FILLERS` not counted) is
    multiplied by ``low_info_min + (1 - low_info_min) × n / low_info_terms`` (0 = off): "haha yes!"."""
    low_info_min: float = 0.7

    def __post_init__(self) -> None:
        if self.fusion not in FUSIONS:
            raise ValueError(f"fusion must be one of {', '.join(FUSIONS)}, got {self.fusion!r}")
        if self.rrf_k < 0:
            raise ValueError(f"rrf_k must be >= 0, got {self.rrf_k}")
        if any(w < 0 for w in self.arm_weights.values()):
            raise ValueError("arm weights must be >= 0")
        if any(b < 0 for b in self.tier_boost.values()):
            raise ValueError("tier boosts must be >= 0")
        if not 0.0 <= self.floor_ratio <= 1.0:
            raise ValueError(f"floor_ratio must be in [0, 1], got {self.floor_ratio}")
        if self.recency_max < 1.0 or self.access_max < 1.0 or self.title_boost < 1.0:
            raise ValueError("cascade multipliers must be >= 1.0")
        if self.recency_half_life_days <= 0 or self.access_saturation < 1:
            raise ValueError("recency_half_life_days must be > 0 and access_saturation >= 1")
        if self.autocut_min_keep < 1 or self.autocut_min_gap < 0:
            raise ValueError("autocut_min_keep must be >= 1 and autocut_min_gap >= 0")
        if self.decay_half_life_days is not None and self.decay_half_life_days <= 0:
            raise ValueError("decay_half_life_days must be > 0 or None")
        if self.date_boost < 1.0:
            raise ValueError(f"date_boost must be >= 1.0, got {self.date_boost}")
        if not 0.0 <= self.decay_min <= 1.0:
            raise ValueError(f"decay_min must be in [0, 1], got {self.decay_min}")
        if not 0.0 < self.doc_repeat <= 1.0 or self.boilerplate_weight < 0 or self.low_info_terms < 0:
            raise ValueError("doc_repeat must be in (0, 1], boilerplate_weight and low_info_terms >= 0")
        if not 0.0 < self.boilerplate_min <= 1.0 or not 0.0 < self.low_info_min <= 1.0:
            raise ValueError("boilerplate_min and low_info_min must be in (0, 1]")


DEFAULT = RankConfig(doc_repeat=0.75, boilerplate_weight=0.15, low_info_terms=3)
"""The product: CC of lexical 0.7 / dense 0.3 / relational 0.5, content priors (boilerplate, low information),
full cascade, dedup, per-document diversity, autocut, no decay."""
LEXICAL_ONLY = RankConfig(fusion="rrf", arm_weights=MappingProxyType({"lexical": 1.0}))
"""BM25-style baseline: only the lexical arm, in its own order; the rest of the pipeline is unchanged."""
DENSE_ONLY = RankConfig(fusion="rrf", arm_weights=MappingProxyType({"dense": 1.0}))
"""Vector baseline: only the dense arm, in its own order."""
RRF_ONLY = RankConfig(fusion="rrf", arm_weights=RRF_WEIGHTS, cascade=False, autocut=False)
"""Plain weighted RRF 1:1 (the seed's fusion) + tier boost + dedup; no cascade, no autocut (evaluation)."""


@dataclass(frozen=True, slots=True)
class RankedHit:
    """A hit with its final score and how it got there."""

    hit: Hit
    score: float
    fused: float
    arm_ranks: Mapping[str, int]
    boosts: Mapping[str, float]


@dataclass(frozen=True, slots=True)
class RankResult:
    """Ordered hits (best first) plus a JSON-friendly diagnostics dict.

    Diagnostics keys: ``fusion`` ("cc" | "rrf"), ``arm_ranks`` {id: {arm: rank}}, ``fused`` {id: score}, ``boosts``
    {id: {name: factor}} (``tier`` always; ``recency``/``access``/``title`` only above the floor and
    only when ≠ 1.0; ``decay`` when enabled), ``floor`` (float | None), ``below_floor`` [id],
    ``autocut_index`` (int | None: number of hits
    kept by autocut), ``dropped_duplicates`` [{"chunk_id", "kept"}], ``missing_hits`` [id],
    ``ignored_arms`` [name], ``channels`` {arm: number of returned hits it ranked}.
    """

    hits: tuple[RankedHit, ...]
    diagnostics: dict[str, object]


def rrf_fuse(arms: Mapping[str, Sequence[str]], weights: Mapping[str, float] | None = None, k: int = RRF_K) -> Fused:
    """Weighted reciprocal rank fusion: ``Σ w_arm / (k + rank)`` with 1-based ranks.

    A repeated id inside one arm keeps its first (best) rank. Arms without a positive weight
    are ignored. ``order`` sorts by fused score descending, then id ascending.
    """
    w = RRF_WEIGHTS if weights is None else weights
    scores: dict[str, float] = {}
    ranks: dict[str, dict[str, int]] = {}
    for arm in sorted(arms):
        weight = w.get(arm, 0.0)
        if weight <= 0:
            continue
        for rank, cid in enumerate(arms[arm], start=1):
            per_id = ranks.setdefault(cid, {})
            if arm in per_id:
                continue
            per_id[arm] = rank
            scores[cid] = scores.get(cid, 0.0) + weight / (k + rank)
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
    scores: dict[str, float] = {}
    ranks: dict[str, dict[str, int]] = {}
    for arm in sorted(arms):
        weight = w.get(arm, 0.0)
        if weight <= 0:
            continue
        first = _first_ranks(arms[arm])
        n = len(first)
        if arm in given:
            known = {cid: float(given[arm][cid]) for cid in first if cid in given[arm]}
            lowest = min(known.values(), default=0.0)
            raw = {cid: known.get(cid, lowest) for cid in first}
            floor = bounds.get(arm)
        else:
            raw = {cid: (n - rank + 1) / n for cid, rank in first.items()}
            floor = 0.0
        for cid, value in normalise(raw, floor).items():
            ranks.setdefault(cid, {})[arm] = first[cid]
            scores[cid] = scores.get(cid, 0.0) + weight * value
    order = tuple(sorted(scores, key=lambda cid: (-scores[cid], cid)))
    return Fused(scores=scores, arm_ranks=ranks, order=order)


def fuse(
    arms: Mapping[str, Sequence[str]], arm_scores: Mapping[str, Mapping[str, float]] | None, config: RankConfig
) -> Fused:
    """Step 1 of the pipeline with ``config``'s fusion."""
    if config.fusion == "cc":
        return cc_fuse(arms, arm_scores, config.arm_weights, config.score_floors)
    return rrf_fuse(arms, config.arm_weights, config.rrf_k)


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


def _sort(ranked: Iterable[RankedHit]) -> list[RankedHit]:
    return sorted(ranked, key=lambda rh: (-rh.score, rh.hit.chunk_id))


def _rescored(rh: RankedHit, score: float, boosts: Mapping[str, float]) -> RankedHit:
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


def diversify(ranked: Sequence[RankedHit], factor: float) -> list[RankedHit]:
    """Each further passage of a document already ranked above it times ``factor`` per earlier one, re-sorted."""
    if factor >= 1.0:
        return list(ranked)
    seen: dict[str, int] = {}
    out: list[RankedHit] = []
    for rh in ranked:
        n = seen.get(rh.hit.document_id, 0)
        seen[rh.hit.document_id] = n + 1
        if n:
            f = factor**n
            rh = _rescored(rh, rh.score * f, {**rh.boosts, "doc_repeat": f})
        out.append(rh)
    return _sort(out)


def _with_usage(ranked: Sequence[RankedHit], usage: Mapping[str, float]) -> list[RankedHit]:
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
            rh = _rescored(rh, score, {**rh.boosts, "access": score / rh.score})
        out.append(rh)
    return out


def fuse_and_rank(
    arms: Mapping[str, Sequence[str]],
    hits_by_id: Mapping[str, Hit],
    query: str,
    now: datetime,
    config: RankConfig = DEFAULT,
    *,
    limit: int | None = None,
    arm_scores: Mapping[str, Mapping[str, float]] | None = None,
    boost_range: tuple[datetime, datetime] | None = None,
    keep_at_least: int = 0,
) -> RankResult:
    """Run the whole pipeline (see module docstring) and return ranked hits plus diagnostics.

    ``arms`` maps arm name → chunk ids best first; ``arm_scores`` optionally maps arm name → raw
    score per id (CC fusion uses them). Ids absent from ``hits_by_id`` are skipped and listed under
    ``missing_hits``. ``now`` must be timezone-aware. ``limit`` caps the output. ``boost_range`` [start, end)
    multiplies hits of that period by ``config.date_boost``; autocut never keeps fewer than ``keep_at_least``.
    """
    if now.tzinfo is None:
        raise ValueError("now must be timezone-aware")
    fused = fuse(arms, arm_scores, config)
    missing = [cid for cid in fused.order if cid not in hits_by_id]
    priors = content_priors({cid: hits_by_id[cid] for cid in fused.order if cid in hits_by_id}, config)
    ranked: list[RankedHit] = []
    for cid in fused.order:
        hit = hits_by_id.get(cid)
        if hit is None:
            continue
        tier = tier_multiplier(hit.scope, config.tier_boost)
        boosts = {"tier": tier, **priors[cid]}
        if boost_range is not None and boost_range[0] <= hit.event_time < boost_range[1]:
            boosts["date"] = config.date_boost
        ranked.append(
            RankedHit(
                hit=hit,
                score=fused.scores[cid] * math.prod(boosts.values()),
                fused=fused.scores[cid],
                arm_ranks=MappingProxyType(dict(fused.arm_ranks[cid])),
                boosts=MappingProxyType(boosts),
            )
        )

    floor = floor_threshold((rh.score for rh in ranked), config.floor_ratio) if config.cascade else None
    below_floor: list[str] = []
    usage: dict[str, float] = {}
    if floor is not None:
        terms = content_terms(query)
        boosted: list[RankedHit] = []
        for rh in ranked:
            if rh.score < floor:
                below_floor.append(rh.hit.chunk_id)
            else:
                factors = cascade_factors(rh.hit, terms, now, config)
                if "access" in factors:
                    usage[rh.hit.chunk_id] = factors.pop("access")
                score = rh.score * math.prod(factors.values())
                rh = _rescored(rh, score, {**rh.boosts, **factors})
            boosted.append(rh)
        ranked = boosted
    ranked = _with_usage(_sort(ranked), usage)

    dropped: list[tuple[str, str]] = []
    if config.dedup:
        ranked, dropped = dedup_by_content(ranked)
    ranked = diversify(ranked, config.doc_repeat)

    cut: int | None = None
    if config.autocut:
        min_keep = max(config.autocut_min_keep, keep_at_least)
        cut = autocut_index([rh.score for rh in ranked], min_keep, config.autocut_min_gap)
        if cut is not None:
            ranked = ranked[:cut]

    if config.decay_half_life_days is not None:
        decays = {
            rh.hit.chunk_id: recency_decay(
                age_days(rh.hit.event_time, now), config.decay_half_life_days, config.decay_min
            )
            for rh in ranked
        }
        ranked = _sort(
            _rescored(rh, rh.score * decays[rh.hit.chunk_id], {**rh.boosts, "decay": decays[rh.hit.chunk_id]})
            for rh in ranked
        )

    if limit is not None:
        ranked = ranked[: max(0, limit)]

    channels = {arm: sum(1 for rh in ranked if arm in rh.arm_ranks) for arm in sorted(arms)}
    diagnostics: dict[str, object] = {
        "fusion": config.fusion,
        "arm_ranks": {rh.hit.chunk_id: dict(rh.arm_ranks) for rh in ranked},
        "fused": {rh.hit.chunk_id: rh.fused for rh in ranked},
        "boosts": {rh.hit.chunk_id: dict(rh.boosts) for rh in ranked},
        "floor": floor,
        "below_floor": sorted(below_floor),
        "autocut_index": cut,
        "dropped_duplicates": [{"chunk_id": d, "kept": k} for d, k in dropped],
        "missing_hits": missing,
        "ignored_arms": sorted(a for a in arms if config.arm_weights.get(a, 0.0) <= 0),
        "channels": channels,
    }
    return RankResult(hits=tuple(ranked), diagnostics=diagnostics)
