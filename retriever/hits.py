"""What ranking works on and with (pure, no I/O): the arms' weights, a hit, fused scores, the ranking
configuration and its presets, a ranked hit and the result. The pipeline is :mod:`retriever.ranking`."""

from __future__ import annotations

from collections.abc import Mapping
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
