"""Deterministic temporal planner: query text + ``now`` → a :class:`TemporalPlan` (no I/O, no LLM).

Periods understood (case-insensitive; whitespace is collapsed first; input capped at 2,000 chars):
ISO dates ``2024-03-15`` (day), ISO months ``2024-03`` (month), ``March 15, 2024`` / ``15 March 2024`` /
``15th of March 2024`` (day), numeric dates ``15.03.2024`` (dotted: day first), ``2024/03/15`` (year first)
and ``15/03/2024`` or ``03/15/2024`` (slashed: the part above 12 is the day; with both parts up to 12 the order
is an ambiguity, ``day_month_order``, never a guess), ``March 2024`` (month), ``Q2 2024`` / ``2024 Q2`` /
``second quarter of 2024`` (quarter), years ``2023`` (only after a preposition), ``today``, ``yesterday``
(day), ``this|last|previous week`` (Monday-based, grain day), ``this|last|previous month|quarter|year``
(calendar periods).
``March``, ``March 15``, ``Q1`` without a year are *partial*.

Forms, by priority (the highest-priority, then leftmost, expression wins):

1. ``between A and B`` / ``from A to|until|through B`` → ``range`` [start(A), end(B)); a missing year
   on one side is taken from the other (A moves a year back if it would start after B). ``between`` may be
   separated from A, and A from ``and B``, by a short phrase (:data:`SPAN_GAP`, no sentence break):
   "between the design review on 2024-03-04 and the launch note on 2024-03-18" spans both days.
2. ``since A`` / ``after A`` (also across a short phrase: "after the outage on May 3, 2024") → ``since``:
   ``range_start = start(A)``, ``range_end = now``.
3. ``as of|as at A`` → ``point``: ``as_of = min(end(A) - 1 µs, now)`` (last instant of the period).
   ``before|prior to A`` → ``before`` with ``range_end = start(A)``; ``until|till A`` → ``before`` with
   ``range_end = end(A)`` (A's last day included); ``range_start`` stays None.
4. ``in|during|throughout|for|on|over|from A`` → ``range`` [start(A), end(A)).
5. a bare unambiguous period (ISO date, month + year, quarter, relative word) → ``range``.

All period ends are exclusive. ``TemporalPlan.form`` names the expression; only the window forms
(:data:`WINDOW_FORMS`) are meant to filter — a single ``on|in A`` may just say *which* document is meant
(see ``retriever.compose.resolve_time``). Datetimes use ``now``'s tzinfo (``now`` must be tz-aware).

Ambiguity is returned, never guessed: a partial period is resolved only when exactly one of
{this year, last year} has already started at ``now`` (``in December`` asked in March → last
December). When both have started (``in March`` asked in June, ``between Q1 and Q3``), the plan keeps
its kind and grain but leaves the datetimes None and lists ``missing_year: …`` with the candidates.
Other entries: ``range_end_before_start: …``, ``multiple_expressions: …`` (the first one still wins).
"""

from __future__ import annotations

import re
from bisect import bisect_left
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Literal

from retriever.temporal_periods import (
    FLAGS,
    P_ANY,
    P_BARE,
    TO,
    Ambiguous,
    Partial,
    Period,
    label,
    parse_period,
)

GRAINS: tuple[str, ...] = ("day", "month", "quarter", "year", "unknown")


"""Valid world-time grains, finest first (``unknown`` = no precision known)."""


MAX_QUERY_CHARS = 2_000


PlanKind = Literal["point", "range", "since", "before", "none"]


PlanForm = Literal["", "between", "since", "after", "before", "until", "as_of", "in", "bare"]


"""Which expression produced a plan: explicit window operators (``between``, ``since``, ``after``, ``before``,
``until``), a point (``as_of``), or a single period that may only say *which* document is meant (``in``, ``bare``)."""


WINDOW_FORMS: frozenset[str] = frozenset({"between", "since", "after", "before", "until"})


SPAN_GAP = 60


"""At most this many characters (no sentence break) between a window word and its period, and between the two
periods of ``between A … and B``: "between the design review on 2024-03-04 and the launch note on 2024-03-18"."""


_ONE_US = timedelta(microseconds=1)


def valid_grain(value: str) -> bool:
    """True iff ``value`` is one of :data:`GRAINS` (exact, lower-case)."""
    return value in GRAINS


@dataclass(frozen=True, slots=True)
class TemporalPlan:
    """What the query says about time. ``range_end`` is exclusive; ``as_of`` is inclusive."""

    kind: PlanKind = "none"
    grain: str = "unknown"
    as_of: datetime | None = None
    range_start: datetime | None = None
    range_end: datetime | None = None
    matched_text: str | None = None
    ambiguities: list[str] = field(default_factory=list)
    form: str = field(default="", compare=False)
    anchor: tuple[datetime, datetime] | None = field(default=None, compare=False)
    """``before|until A``: the period A itself [start, end) (what the question is anchored on)."""
    """The :data:`PlanForm` that produced the plan (not part of equality: two plans with the same window are equal)."""

    @property
    def is_window(self) -> bool:
        """True when the query states an explicit window (between / since / after / before / until)."""
        return self.form in WINDOW_FORMS


_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("between", re.compile(rf"\b(?:between|from) ({P_ANY}) {TO} ({P_ANY})\b", FLAGS)),
    ("since", re.compile(rf"\bsince ({P_ANY})\b", FLAGS)),
    ("as_of", re.compile(rf"\bas (?:of|at) ({P_ANY})\b", FLAGS)),
    ("in", re.compile(rf"\b(?:in|during|throughout|for|on|over|from) (?:the )?({P_ANY})\b", FLAGS)),
    ("bare", re.compile(rf"\b({P_BARE})\b", FLAGS)),
)


_KINDS: dict[str, PlanKind] = {
    "between": "range",
    "since": "since",
    "after": "since",
    "as_of": "point",
    "before": "before",
    "until": "before",
}


_PRIORITY = {name: i for i, (name, _) in enumerate(_PATTERNS)}


_Span = tuple[datetime, datetime, str]


_Resolved = _Span | list[str] | None  # a span, the candidate labels of an ambiguity, or not temporal


def _resolve_single(p: Period | Partial | Ambiguous | None, now: datetime) -> _Resolved:
    if p is None:
        return None
    if isinstance(p, Ambiguous):
        return [label(c) for c in p.candidates]
    if isinstance(p, Period):
        return (p.start, p.end, p.grain)
    cands = [c for y in (now.year, now.year - 1) if (c := p.make(y)) is not None and c.start <= now]
    if len(cands) == 1:
        return (cands[0].start, cands[0].end, cands[0].grain)
    return [label(c) for c in cands] or None


def _resolve_between(
    a: Period | Partial | Ambiguous | None, b: Period | Partial | Ambiguous | None, now: datetime
) -> _Resolved:
    if a is None or b is None or isinstance(a, Ambiguous) or isinstance(b, Ambiguous):
        return None
    if isinstance(a, Period) and isinstance(b, Period):
        return (a.start, b.end, _finest(a.grain, b.grain))

    def pair(y_a: int, y_b: int) -> tuple[Period, Period] | None:
        pa = a if isinstance(a, Period) else a.make(y_a)
        pb = b if isinstance(b, Period) else b.make(y_b)
        return (pa, pb) if pa is not None and pb is not None else None

    if isinstance(a, Period):  # "between March 2024 and June": B takes A's year (or the next)
        p = pair(0, a.start.year)
        if p is not None and p[1].end <= p[0].start:
            p = pair(0, a.start.year + 1)
    elif isinstance(b, Period):  # "between March and June 2024": A takes B's year (or the one before)
        p = pair(b.start.year, 0)
        if p is not None and p[0].start >= p[1].end:
            p = pair(b.start.year - 1, 0)
    else:
        cands: list[tuple[Period, Period]] = []
        for y in (now.year, now.year - 1):
            p = pair(y, y)
            if p is not None and p[1].end <= p[0].start:
                p = pair(y, y + 1)
            if p is not None and p[0].start <= now:
                cands.append(p)
        if len(cands) != 1:
            return [f"{label(x)}..{label(z)}" for x, z in cands] or None
        p = cands[0]
    if p is None:
        return None
    return (p[0].start, p[1].end, _finest(p[0].grain, p[1].grain))


def _grain_of(p: Period | Partial | Ambiguous | None) -> str:
    return "unknown" if p is None else p.grain


@dataclass(frozen=True, slots=True)
class _Found:
    priority: int
    start: int
    end: int
    name: str
    periods: tuple[str, ...]
    text: str


_PERIOD = re.compile(rf"\b({P_ANY})\b", FLAGS)


_SPAN_WORDS = re.compile(r"\b(between|after|since|before|until|till|prior to)\b", FLAGS)


_CONNECTOR = re.compile(rf"\b{TO}\b", FLAGS)


_BREAK = re.compile(r"[.?!;]")


_SPAN_NAME = {"between": "between", "after": "after", "since": "since", "before": "before", "prior to": "before"}


_SPAN_PRIORITY = {"between": 0, "after": 1, "since": 1, "before": 2, "until": 2}


def _gap_ok(text: str, start: int, end: int) -> bool:
    return 0 <= end - start <= SPAN_GAP and not _BREAK.search(text, start, end)


def _span_forms(text: str) -> list[_Found]:
    """Window words separated from their period(s) by a short phrase, found without backtracking regexes:
    ``between <phrase> A <phrase> and <phrase> B``, ``after|since <phrase> A``, ``before|until <phrase> A``."""
    periods = [(m.start(), m.end(), m[1]) for m in _PERIOD.finditer(text)]
    starts = [p[0] for p in periods]
    out: list[_Found] = []
    for w in _SPAN_WORDS.finditer(text):
        word = " ".join(w[1].lower().split())
        name = _SPAN_NAME.get(word, "until")
        j = bisect_left(starts, w.end())
        if j >= len(periods) or not _gap_ok(text, w.end(), periods[j][0]):
            continue
        a = periods[j]
        if name != "between":
            out.append(_Found(_SPAN_PRIORITY[name], w.start(), a[1], name, (a[2],), text[w.start() : a[1]]))
            continue
        for b in periods[j + 1 : j + 4]:
            if not _gap_ok(text, a[1], b[0]):
                break
            if _CONNECTOR.search(text, a[1], b[0]):
                out.append(_Found(0, w.start(), b[1], name, (a[2], b[2]), text[w.start() : b[1]]))
                break
    return out


def plan_temporal(query: str, now: datetime) -> TemporalPlan:
    """Plan the temporal intent of ``query`` at ``now`` (tz-aware); ``kind="none"`` when there is none."""
    if now.tzinfo is None:
        raise ValueError("now must be timezone-aware")
    text = " ".join(query[:MAX_QUERY_CHARS].split())
    found: list[_Found] = []
    for name, pattern in _PATTERNS:
        for m in pattern.finditer(text):
            found.append(_Found(_PRIORITY[name], m.start(), m.end(), name, tuple(m.groups()), m[0]))
    found += _span_forms(text)
    found.sort(key=lambda f: (f.priority, f.start, -f.end))
    for i, f in enumerate(found):
        plan = _plan_for(f, now)
        if plan is None:
            continue
        others = [o.text for o in found[i + 1 :] if (o.end <= f.start or o.start >= f.end) and _plan_for(o, now)]
        extra = [f"multiple_expressions: also found {o!r}" for o in dict.fromkeys(others)]
        plan.ambiguities.extend(extra)
        return plan
    return TemporalPlan()


def _form(name: str) -> str:
    return name if name in ("between", "since", "after", "before", "until", "as_of", "bare") else "in"


def _plan_for(f: _Found, now: datetime) -> TemporalPlan | None:
    """Turn one outer match into a plan, or None when its period text is not a real date."""
    matched, name = f.text, f.name
    form = _form(name)
    if name == "between":
        a, b = parse_period(f.periods[0], now), parse_period(f.periods[1], now)
        resolved = _resolve_between(a, b, now)
        grain = _finest(_grain_of(a), _grain_of(b))
    else:
        p = parse_period(f.periods[0], now)
        resolved = _resolve_single(p, now)
        grain = _grain_of(p)
    if resolved is None:
        return None
    kind: PlanKind = _KINDS.get(name, "range")
    if isinstance(resolved, list):
        if name != "between" and isinstance(p, Ambiguous):
            note = f"day_month_order: {f.periods[0]!r} could mean " + " or ".join(resolved)
        else:
            note = f"missing_year: {matched!r} could mean " + " or ".join(resolved)
        return TemporalPlan(kind=kind, grain=grain, matched_text=matched, ambiguities=[note], form=form)
    start, end, grain = resolved
    if end <= start:
        note = f"range_end_before_start: {matched!r}"
        return TemporalPlan(kind=kind, grain=grain, matched_text=matched, ambiguities=[note], form=form)
    if kind == "point":
        return TemporalPlan(kind=kind, grain=grain, as_of=min(end - _ONE_US, now), matched_text=matched, form=form)
    if kind == "since":
        if start >= now:
            note = f"range_end_before_start: {matched!r}"
            return TemporalPlan(kind=kind, grain=grain, matched_text=matched, ambiguities=[note], form=form)
        return TemporalPlan(kind=kind, grain=grain, range_start=start, range_end=now, matched_text=matched, form=form)
    if kind == "before":
        # "before A" closes at A's start; "until A" keeps A (inclusive of its last day)
        close = start if name == "before" else end
        return TemporalPlan(
            kind=kind, grain=grain, range_end=close, matched_text=matched, form=form, anchor=(start, end)
        )
    return TemporalPlan(kind=kind, grain=grain, range_start=start, range_end=end, matched_text=matched, form=form)


def _finest(a: str, b: str) -> str:
    return a if GRAINS.index(a) <= GRAINS.index(b) else b
