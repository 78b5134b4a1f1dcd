"""Pack passages, facts and paths into a token budget, in priority order (no I/O).

Token estimate: ``ceil(len(text) / 4)`` — roughly four characters per token for English text with a
BPE tokenizer; cheap, deterministic and slightly conservative for prose.

Rules, applied to items in the order given (highest priority first):

* an empty (whitespace-only) item is dropped (``empty``);
* an item that fits the remaining budget is kept whole;
* otherwise a ``passage`` is truncated at the last word boundary that fits, with ``…`` appended,
  if at least ``min_truncated_tokens`` (default 8) remain and the cut keeps at least one word;
* otherwise the item is dropped (``over_budget``, or ``no_word_boundary`` for a passage whose first
  word alone does not fit). Facts and paths are atomic: never truncated.

Packing continues after a drop, so a later, smaller item may still fit. The sum of the estimates of
the kept texts never exceeds ``max_tokens``. ``max_tokens=None`` keeps everything.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Literal

CHARS_PER_TOKEN = 4
ELLIPSIS = "…"

ItemKind = Literal["passage", "fact", "path"]
Action = Literal["kept", "truncated", "dropped"]


def estimate_tokens(text: str) -> int:
    """``ceil(len(text) / 4)``; 0 for the empty string."""
    return math.ceil(len(text) / CHARS_PER_TOKEN)


@dataclass(frozen=True, slots=True)
class PackItem:
    """One candidate for the context window; ``key`` identifies it in diagnostics."""

    key: str
    kind: ItemKind
    text: str


@dataclass(frozen=True, slots=True)
class PackDecision:
    """What happened to one item; ``reason`` is set for truncations and drops."""

    key: str
    kind: ItemKind
    action: Action
    tokens: int
    reason: str | None = None


@dataclass(frozen=True, slots=True)
class PackResult:
    """Kept items (possibly truncated), one decision per input item, and tokens used."""

    kept: tuple[PackItem, ...]
    decisions: tuple[PackDecision, ...]
    used_tokens: int


def truncate_to_tokens(text: str, max_tokens: int) -> str | None:
    """Longest word-boundary prefix of ``text`` that, with ``…`` appended, fits ``max_tokens``.

    Returns None when not even the first word fits. Whitespace at the cut is removed.
    """
    limit = max_tokens * CHARS_PER_TOKEN - len(ELLIPSIS)
    if limit <= 0:
        return None
    stripped = text.strip()
    if len(stripped) <= limit:
        return stripped
    if stripped[limit].isspace():
        prefix = stripped[:limit]
    else:
        cut = next((i for i in range(limit - 1, 0, -1) if stripped[i].isspace()), 0)
        if cut <= 0:
            return None
        prefix = stripped[:cut]
    prefix = prefix.rstrip()
    return prefix + ELLIPSIS if prefix else None


def pack(items: Sequence[PackItem], max_tokens: int | None, *, min_truncated_tokens: int = 8) -> PackResult:
    """Pack ``items`` (priority order) into ``max_tokens`` following the module rules."""
    if max_tokens is not None and max_tokens < 0:
        raise ValueError(f"max_tokens must be >= 0 or None, got {max_tokens}")
    kept: list[PackItem] = []
    decisions: list[PackDecision] = []
    used = 0
    for item in items:
        cost = estimate_tokens(item.text)
        if not item.text.strip():
            decisions.append(PackDecision(item.key, item.kind, "dropped", 0, "empty"))
            continue
        if max_tokens is None or used + cost <= max_tokens:
            kept.append(item)
            used += cost
            decisions.append(PackDecision(item.key, item.kind, "kept", cost))
            continue
        remaining = max_tokens - used
        if item.kind != "passage":
            decisions.append(PackDecision(item.key, item.kind, "dropped", 0, "over_budget"))
            continue
        if remaining < min_truncated_tokens:
            decisions.append(PackDecision(item.key, item.kind, "dropped", 0, "over_budget"))
            continue
        short = truncate_to_tokens(item.text, remaining)
        if short is None:
            decisions.append(PackDecision(item.key, item.kind, "dropped", 0, "no_word_boundary"))
            continue
        short_cost = estimate_tokens(short)
        kept.append(replace(item, text=short))
        used += short_cost
        reason = f"truncated from {cost} to {short_cost} tokens"
        decisions.append(PackDecision(item.key, item.kind, "truncated", short_cost, reason))
    return PackResult(kept=tuple(kept), decisions=tuple(decisions), used_tokens=used)
