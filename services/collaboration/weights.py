"""Pure collaboration rules: which pairs one document contributes, and exponential decay.

Rules:
- Co-authorship / co-participation: every pair of distinct people on one document (author and
  participants) contributes weight 1.0 (reason ``co_participant``); documents with more than
  ``MAX_PEOPLE`` people contribute nothing of that kind (an all-hands is not collaboration).
- Thread co-participation: the document's author and the authors of up to ``THREAD_WINDOW`` earlier
  documents of the same thread within ``THREAD_HORIZON`` contribute 0.5 each (reason ``thread``).
- Person ↔ project/product: the author and participants with every project/product the document names
  (from the graph) contribute 1.0 (reason ``works_on``) — available once the graph has the document.
- Pairs are unordered: stored as (min, max) so A↔B and B↔A are one edge.
- Decay (``services.decay``): a contribution made at ``t`` is worth ``w * 0.5 ** ((now - t) / half_life)``.
  Edges store the decayed weight AT ``last_seen``; ``services.decay.decayed`` brings it to any later instant.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta
from itertools import combinations

from services.decay import HALF_LIFE_DAYS, decay_factor

MAX_PEOPLE = 50
THREAD_WINDOW = 10
THREAD_HORIZON = timedelta(days=7)
THREAD_WEIGHT = 0.5


def aggregate(
    contributions: Iterable[tuple[float, datetime]], half_life_days: float = HALF_LIFE_DAYS
) -> tuple[int, datetime, float]:
    """(count, last_seen, decayed weight at last_seen) of one edge's contributions."""
    items = list(contributions)
    if not items:
        raise ValueError("an edge needs at least one contribution")
    last = max(t for _, t in items)
    weight = sum(w * decay_factor(last - t, half_life_days) for w, t in items)
    return len(items), last, weight


def pair(a: uuid.UUID, b: uuid.UUID) -> tuple[uuid.UUID, uuid.UUID]:
    return (a, b) if str(a) < str(b) else (b, a)


def document_pairs(
    author: uuid.UUID | None, participants: Sequence[uuid.UUID], thread_authors: Sequence[uuid.UUID]
) -> list[tuple[uuid.UUID, uuid.UUID, str, float]]:
    """(a, b, reason, weight) person pairs one document contributes (see the module docstring)."""
    people = list(dict.fromkeys([*([author] if author else []), *participants]))
    out: dict[tuple[uuid.UUID, uuid.UUID, str], float] = {}
    if 2 <= len(people) <= MAX_PEOPLE:
        for a, b in combinations(people, 2):
            out[(*pair(a, b), "co_participant")] = 1.0
    if author is not None:
        for other in list(dict.fromkeys(thread_authors))[:THREAD_WINDOW]:
            if other != author and (*pair(author, other), "co_participant") not in out:
                out[(*pair(author, other), "thread")] = THREAD_WEIGHT
    return [(a, b, reason, w) for (a, b, reason), w in out.items()]
