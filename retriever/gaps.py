"""Deterministic gap analysis over already-ranked results, and the no-LLM synthesis fallback.

:func:`analyze_gaps` never re-ranks; it reports three things:

* **stale entities** — entities whose last evidence is older than ``stale_after_days`` (default 30);
* **unmatched terms** — query content terms (stopwords and 1-char tokens excluded) that no ranked
  text contains; a trailing ``s`` is ignored on both sides so "prices" matches "price";
* **contradictions** — a negated sentence next to its affirmative twin. A sentence is negated when
  it contains not / never / no longer / n't; its *claim key* is its lower-cased tokens with
  negators, the auxiliaries do/does/did and the articles a/an/the removed, and each token with a
  trailing ``s``/``es``/``ed`` folded. "Acme does not use Kafka" and "Acme uses Kafka" share the key
  (acme, use, kafka). Sentences longer than 400 characters are skipped.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from retriever.boosts import age_days
from retriever.hits import Hit
from retriever.terms import content_terms, tokens

MAX_SENTENCE_CHARS = 400
SNIPPET_CHARS = 200

_NEGATORS = frozenset({"not", "never", "no", "longer", "nt"})
_DROPPED = frozenset({"do", "does", "did", "a", "an", "the"})
_SENTENCE_RE = re.compile(r"[^.!?\n]+")
_NT_RE = re.compile(r"(?:n't|n’t)\b", re.IGNORECASE)
_IRREGULAR_NT = {"won't": "will not", "won’t": "will not", "can't": "can not", "can’t": "can not"}


@dataclass(frozen=True, slots=True)
class StaleEntity:
    """An entity whose newest evidence is older than the staleness window."""

    name: str
    last_seen: datetime
    age_days: float


@dataclass(frozen=True, slots=True)
class Contradiction:
    """A negated sentence and its affirmative twin; indexes point into the ranked texts."""

    negated: str
    affirmative: str
    negated_index: int
    affirmative_index: int


@dataclass(frozen=True, slots=True)
class GapReport:
    """What the ranked results do not cover or disagree on."""

    stale_entities: tuple[StaleEntity, ...]
    unmatched_terms: tuple[str, ...]
    contradictions: tuple[Contradiction, ...]


def _fold(token: str) -> str:
    for suffix in ("es", "ed", "s"):
        if len(token) > len(suffix) + 2 and token.endswith(suffix):
            return token[: -len(suffix)]
    return token


def _claim(sentence: str) -> tuple[bool, tuple[str, ...]]:
    """(is_negated, claim key) for one sentence."""
    text = sentence.lower()
    for contraction, expanded in _IRREGULAR_NT.items():
        text = text.replace(contraction, expanded)
    text = _NT_RE.sub(" not", text)
    toks = tokens(text)
    negated = any(t in _NEGATORS for t in toks)
    key = tuple(_fold(t) for t in toks if t not in _NEGATORS and t not in _DROPPED)
    return negated, key


def _sentences(text: str) -> list[str]:
    out = []
    for m in _SENTENCE_RE.finditer(text):
        s = m[0].strip()
        if s and len(s) <= MAX_SENTENCE_CHARS:
            out.append(s)
    return out


def find_contradictions(texts: Sequence[str]) -> list[Contradiction]:
    """Pairs (negated, affirmative) with equal claim keys, in order of first appearance, one per key pair."""
    affirmative: dict[tuple[str, ...], tuple[str, int]] = {}
    negated: dict[tuple[str, ...], tuple[str, int]] = {}
    for idx, text in enumerate(texts):
        for sentence in _sentences(text):
            is_neg, key = _claim(sentence)
            if len(key) < 2:
                continue
            (negated if is_neg else affirmative).setdefault(key, (sentence, idx))
    found = [
        Contradiction(neg_s, affirmative[key][0], neg_i, affirmative[key][1])
        for key, (neg_s, neg_i) in negated.items()
        if key in affirmative
    ]
    return sorted(found, key=lambda c: (min(c.negated_index, c.affirmative_index), c.negated))


def unmatched_terms(query: str, texts: Sequence[str]) -> list[str]:
    """Query content terms that appear (modulo a trailing ``s``) in none of ``texts``."""
    present = {t.removesuffix("s") for text in texts for t in tokens(text)}
    return [term for term in content_terms(query) if term.removesuffix("s") not in present]


def stale_entities(
    entity_last_seen: Mapping[str, datetime], now: datetime, stale_after_days: float = 30.0
) -> list[StaleEntity]:
    """Entities last seen more than ``stale_after_days`` ago, oldest first (then by name)."""
    out = [
        StaleEntity(name, seen, age_days(seen, now))
        for name, seen in entity_last_seen.items()
        if age_days(seen, now) > stale_after_days
    ]
    return sorted(out, key=lambda s: (-s.age_days, s.name))


def analyze_gaps(
    query: str,
    ranked_texts_with_times: Sequence[tuple[str, datetime]],
    entity_last_seen: Mapping[str, datetime],
    now: datetime,
    stale_after_days: float = 30.0,
) -> GapReport:
    """Stale entities, unmatched query terms and contradictions for one ranked result list."""
    if now.tzinfo is None:
        raise ValueError("now must be timezone-aware")
    texts = [text for text, _ in ranked_texts_with_times]
    return GapReport(
        stale_entities=tuple(stale_entities(entity_last_seen, now, stale_after_days)),
        unmatched_terms=tuple(unmatched_terms(query, texts)),
        contradictions=tuple(find_contradictions(texts)),
    )


def gap_report_dict(report: GapReport) -> dict[str, Any]:
    """The report as the response's ``gaps`` object (times as ``str(datetime)``, as it always was)."""
    return {
        "stale_entities": [
            {"name": s.name, "last_seen": str(s.last_seen), "age_days": s.age_days} for s in report.stale_entities
        ],
        "unmatched_terms": list(report.unmatched_terms),
        "contradictions": [dataclasses.asdict(c) for c in report.contradictions],
    }


def _snippet(text: str, limit: int = SNIPPET_CHARS) -> str:
    flat = " ".join(text.split())
    if len(flat) <= limit:
        return flat
    cut = flat.rfind(" ", 0, limit)
    return (flat[:cut] if cut > 0 else flat[:limit]).rstrip() + "…"


def numbered_citation_list(hits: Sequence[Hit]) -> str:
    """Synthesis fallback: one line per hit, best first, ``"1. Title: snippet [doc:<document_id>]"``.

    The snippet is the whitespace-collapsed text cut at a word boundary within 200 characters; the
    title prefix is omitted when the hit has none. No hits → the empty string.
    """
    lines = []
    for i, hit in enumerate(hits, start=1):
        prefix = f"{hit.title.strip()}: " if hit.title and hit.title.strip() else ""
        lines.append(f"{i}. {prefix}{_snippet(hit.text)} [doc:{hit.document_id}]")
    return "\n".join(lines)
