"""Pure conflict-resolution rules: entity normalization, fact identity, exclusive slots, identity merges.

Rules:
- Entity dedup key: ``(workspace, type, normalize_name(name))``. Normalization casefolds, drops
  punctuation and collapses blanks; organizations also drop a trailing legal suffix ("Acme Inc."
  = "acme"). The entity id is derived from that key, so replays and parallel consumers agree.
- A fact's identity is ``(subject, predicate, object-or-value, valid_from, generation)``; the
  generation counts earlier retracted facts with the same key, so a re-added fact never resurrects
  a retracted row (belief history stays intact).
- Re-evidence: a new assertion matching an active fact of the same target (non-exclusive: any
  time; exclusive: the fact's validity contains the assertion time, or it is the same state
  asserted earlier) adds evidence only; stored bounds are never moved ("fills open ends only").
- Exclusive slots (registry): among the active facts of ``(subject, predicate)`` two with the same
  ``valid_from`` and different targets are a correction: the older belief is invalidated
  (``invalidated_at``, status ``corrected``). Then the slot is re-chained: sorted by valid_from,
  each fact is closed (``valid_to``) at the next fact's valid_from and the last one stays
  open, so "current" reads see one winner and superseded facts remain for as-of reads.
  An end set by a source (``closed_by`` NULL and ``valid_to`` set) is never touched. Re-chaining
  also reopens a fact whose closer was retracted.
- Identity merge: only strong keys merge people — verified keys, e-mails and ``platform_user``
  aliases — when one envelope person carries keys that resolve to different people. Names never
  merge; equal or token-equal display names only file a proposal (``name_similarity``).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime

from services.names import normalize_name

STRONG_NAMESPACES = frozenset({"email", "platform_user"})
PROPOSAL_THRESHOLD = 0.85


def target_key(object_id: uuid.UUID | None, value: str | None) -> str:
    """What a fact points at: the object entity id, or the case-folded literal value."""
    if object_id is not None:
        return f"e:{object_id}"
    return "v:" + " ".join((value or "").split()).casefold()


@dataclass(frozen=True, slots=True)
class SlotFact:
    """An active (not invalidated) fact of one ``(subject, predicate)`` slot."""

    id: uuid.UUID
    target: str
    valid_from: datetime
    valid_to: datetime | None
    closed_by: uuid.UUID | None
    recorded_at: datetime


def find_reusable(facts: Iterable[SlotFact], target: str, at: datetime, *, exclusive: bool) -> SlotFact | None:
    """The active fact a new assertion of ``target`` at ``at`` re-evidences, or None (insert a new fact)."""
    same = sorted((f for f in facts if f.target == target), key=lambda f: f.valid_from)
    if not exclusive:
        return same[0] if same else None
    ordered = sorted(facts, key=lambda f: (f.valid_from, f.recorded_at))
    for f in same:
        if f.valid_from <= at and (f.valid_to is None or at < f.valid_to):
            return f
    # the same state asserted earlier than we knew it: reuse when no other target lies in between
    later = [f for f in same if f.valid_from > at]
    if later:
        first = later[0]
        between = [g for g in ordered if at <= g.valid_from < first.valid_from and g.target != target]
        if not between:
            return first
    return None


@dataclass(frozen=True, slots=True)
class SlotUpdate:
    """Set ``valid_to``/``closed_by``/``status`` of a fact, or invalidate it (a correction)."""

    fact_id: uuid.UUID
    valid_to: datetime | None
    closed_by: uuid.UUID | None
    status: str
    invalidate: bool = False


def resolve_exclusive(facts: Sequence[SlotFact]) -> list[SlotUpdate]:
    """Corrections then re-chaining of one exclusive slot (see the module docstring). Only changes."""
    by_time: dict[datetime, list[SlotFact]] = {}
    for f in facts:
        by_time.setdefault(f.valid_from, []).append(f)
    updates: list[SlotUpdate] = []
    alive: list[SlotFact] = []
    for group in by_time.values():
        group.sort(key=lambda f: (f.recorded_at, str(f.id)))
        winner = group[-1]
        for f in group[:-1]:
            if f.target != winner.target:
                updates.append(SlotUpdate(f.id, f.valid_to, f.closed_by, "corrected", invalidate=True))
            else:
                alive.append(f)
        alive.append(winner)
    alive.sort(key=lambda f: (f.valid_from, f.recorded_at))
    for i, f in enumerate(alive):
        if f.closed_by is None and f.valid_to is not None:
            continue  # an end the source stated
        nxt = next((g for g in alive[i + 1 :] if g.valid_from > f.valid_from), None)
        want_to, want_by = (nxt.valid_from, nxt.id) if nxt is not None else (None, None)
        status = "superseded" if want_to is not None else "active"
        if (f.valid_to, f.closed_by) != (want_to, want_by):
            updates.append(SlotUpdate(f.id, want_to, want_by, status))
    return updates


# --- identity ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class KeyOwner:
    """One identity key of an envelope person and the person it currently resolves to."""

    namespace: str
    value: str
    verified: bool
    person_id: uuid.UUID | None


def is_strong(namespace: str, verified: bool) -> bool:
    return verified or namespace in STRONG_NAMESPACES


@dataclass(frozen=True, slots=True)
class Merge:
    source: uuid.UUID
    target: uuid.UUID
    reason: str


def plan_merges(groups: Iterable[tuple[uuid.UUID | None, Sequence[KeyOwner]]]) -> list[Merge]:
    """Merges implied by envelope people whose strong keys resolve to different people.

    ``groups``: (the person ingest resolved, that person's keys). The target is the resolved person
    when a strong key points at it, else the smallest id; chains collapse (A->B, B->C gives A->C).
    """
    parent: dict[uuid.UUID, uuid.UUID] = {}
    reasons: dict[uuid.UUID, str] = {}

    def find(x: uuid.UUID) -> uuid.UUID:
        while parent.get(x, x) != x:
            x = parent[x]
        return x

    for resolved, keys in groups:
        strong = [k for k in keys if k.person_id is not None and is_strong(k.namespace, k.verified)]
        people = list(dict.fromkeys(k.person_id for k in strong if k.person_id is not None))
        if len(people) < 2:
            continue
        target = resolved if resolved in people else min(people)
        root = find(target)
        for k in strong:
            assert k.person_id is not None
            other = find(k.person_id)
            if other != root:
                parent[other] = root
                reasons.setdefault(other, f"{k.namespace}:{k.value}")
    return [Merge(p, find(p), reasons.get(p, "identity")) for p in parent if find(p) != p]


def name_similarity(a: str, b: str) -> float:
    """1.0 equal names, 0.9 same tokens in another order, 0.7 same last name and first initial, else 0."""
    na, nb = normalize_name(a), normalize_name(b)
    if not na or not nb:
        return 0.0
    if na == nb:
        return 1.0
    ta, tb = na.split(), nb.split()
    if sorted(ta) == sorted(tb):
        return 0.9
    if len(ta) >= 2 and len(tb) >= 2 and ta[-1] == tb[-1] and ta[0][0] == tb[0][0]:
        return 0.7
    return 0.0
