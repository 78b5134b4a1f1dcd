"""Pure planning core of consolidation: no I/O. Given one owner's memories (same workspace, same author, same
ACL — so a merge can never widen who sees what), decide which memories a survivor absorbs and why.

Order (seed 002): exact-text duplicates, then near-duplicates (cosine of the memories' vectors ≥ ``sim``, the
longer — more specific — text survives, the newer on a tie), then contradiction reconciliation: of statements
about the same subject and predicate (``statement_key``; for non-exclusive predicates also the same head of the
object — the seed's bare subject+verb rule would let "prefers tea" supersede "prefers dark mode"), the newest
wins and the older ones are superseded.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

import numpy as np
import numpy.typing as npt

Reason = Literal["exact", "similar", "contradiction"]

_SPACE = re.compile(r"\s+")
_PUNCT = re.compile(r"[^\w\s]")
# "<subject> <predicate> <object>": a small closed verb list, so only plainly stated facts reconcile.
_STATEMENT = re.compile(
    r"^(?:(?:note|fact|preference|decision)\s*:\s*)?(?P<subject>[\w' .-]{1,60}?)\s+"
    r"(?P<predicate>prefers|likes|dislikes|wants|uses|owns|leads|manages|lives in|works on|works at|works for|"
    r"reports to|is based in|is|are|decided)\s+(?P<object>.+)$",
    re.IGNORECASE,
)
_NEGATED_OR_HEDGED = re.compile(r"\b(not|never|no longer|maybe|might|perhaps|sometimes)\b", re.IGNORECASE)
# Predicates with one value at a time: a newer statement replaces the older whatever its object.
EXCLUSIVE = frozenset({"works at", "works for", "reports to", "lives in", "is based in"})
# "<the / our / Alice's> <attribute> is <value>": an attribute has one value at a time ("the deploy day is Friday").
_ATTRIBUTE = re.compile(r"^(?:the|our|my|their|his|her|its|[\w.-]+(?:'s|’s))\s+\w", re.IGNORECASE)
# Trailing words that do not name the thing a statement is about ("... light mode now", "... instead").
_TRAILING = frozenset({"now", "instead", "again", "too", "also", "anymore", "today", "lately", "nowadays"})


@dataclass(frozen=True, slots=True)
class Memory:
    document_id: str
    text: str
    event_time: datetime
    vector: npt.NDArray[np.float32] | None


@dataclass(frozen=True, slots=True)
class Merge:
    survivor: str
    absorbed: tuple[str, ...]
    reason: Reason
    similarity: float | None


def normalise(text: str) -> str:
    return _SPACE.sub(" ", _PUNCT.sub(" ", text.lower())).strip()


def cosine(a: npt.NDArray[np.float32], b: npt.NDArray[np.float32]) -> float:
    na, nb = float(np.linalg.norm(a)), float(np.linalg.norm(b))
    return 0.0 if na == 0.0 or nb == 0.0 else float(np.dot(a, b) / (na * nb))


def statement_key(text: str) -> tuple[str, ...] | None:
    """What a plainly stated fact is about, or None (hedged or negated statements never reconcile).

    For an exclusive predicate (``EXCLUSIVE``, or "is" after an attribute such as "the deploy day" or
    "Alice's editor") the key is (subject, predicate); for any other the head of the
    object joins it — "prefers dark mode" and "prefers light mode" contradict, "prefers tea" does not — so two
    compatible statements sharing only a verb are never merged.
    """
    m = _STATEMENT.match(_SPACE.sub(" ", text.strip()))
    if m is None or _NEGATED_OR_HEDGED.search(text):
        return None
    subject, predicate = normalise(m["subject"]), m["predicate"].lower()
    if predicate in EXCLUSIVE or (predicate in ("is", "are") and _ATTRIBUTE.match(m["subject"])):
        return subject, predicate
    words = [w for w in normalise(m["object"]).split() if w not in _TRAILING]
    return (subject, predicate, words[-1]) if words else None


def _ranked(memories: Sequence[Memory]) -> list[Memory]:
    """Survivor preference: longer text first, then newer, then the id (deterministic)."""
    return sorted(memories, key=lambda m: (-len(m.text.strip()), -m.event_time.timestamp(), m.document_id))


def plan(memories: Sequence[Memory], *, sim: float) -> list[Merge]:
    merges: list[Merge] = []
    alive = list(memories)

    by_text: dict[str, list[Memory]] = {}
    for m in alive:
        by_text.setdefault(normalise(m.text), []).append(m)
    absorbed: set[str] = set()
    for group in by_text.values():
        if len(group) > 1:
            best, *rest = _ranked(group)
            merges.append(Merge(best.document_id, tuple(r.document_id for r in rest), "exact", 1.0))
            absorbed |= {r.document_id for r in rest}
    alive = [m for m in alive if m.document_id not in absorbed]

    for m in _ranked(alive):  # greedy: each survivor, longest first, absorbs the near-duplicates still alive
        if m.document_id in absorbed or m.vector is None:
            continue
        close = [
            (o, cosine(m.vector, o.vector))
            for o in alive
            if o.document_id != m.document_id and o.document_id not in absorbed and o.vector is not None
        ]
        close = [(o, s) for o, s in close if s >= sim]
        if close:
            merges.append(
                Merge(m.document_id, tuple(o.document_id for o, _ in close), "similar", min(s for _, s in close))
            )
            absorbed |= {o.document_id for o, _ in close}
    alive = [m for m in alive if m.document_id not in absorbed]

    by_key: dict[tuple[str, ...], list[Memory]] = {}
    for m in alive:
        key = statement_key(m.text)
        if key is not None:
            by_key.setdefault(key, []).append(m)
    for group in by_key.values():
        if len(group) > 1:
            newest, *older = sorted(group, key=lambda m: (-m.event_time.timestamp(), m.document_id))
            merges.append(Merge(newest.document_id, tuple(o.document_id for o in older), "contradiction", None))
    return merges
