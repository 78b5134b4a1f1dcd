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
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from typing import Literal

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


@dataclass(frozen=True, slots=True)
class _Period:
    start: datetime
    end: datetime
    grain: str


@dataclass(frozen=True, slots=True)
class _Ambiguous:
    """A numeric date whose day / month order cannot be told (``10/01/2024``): the candidate days."""

    grain: str
    candidates: tuple[_Period, ...]


@dataclass(frozen=True, slots=True)
class _Partial:
    grain: str
    make: Callable[[int], _Period | None]


_MONTHS = {
    "january": 1, "february": 2, "march": 3, "april": 4, "may": 5, "june": 6, "july": 7,
    "august": 8, "september": 9, "october": 10, "november": 11, "december": 12, "jan": 1, "feb": 2,
    "mar": 3, "apr": 4, "jun": 6, "jul": 7, "aug": 8, "sept": 9, "sep": 9, "oct": 10, "nov": 11,
    "dec": 12,
}  # fmt: skip
_ORDINALS = {"first": 1, "second": 2, "third": 3, "fourth": 4, "1st": 1, "2nd": 2, "3rd": 3, "4th": 4}

_MON = "(?:" + "|".join(sorted(_MONTHS, key=len, reverse=True)) + ")"
_ORD = "(?:first|second|third|fourth|1st|2nd|3rd|4th)"
_Y = r"(?:19|20)\d\d"
_D = r"\d{1,2}(?:st|nd|rd|th)?"
_ISO_DATE = rf"{_Y}-\d\d-\d\d"
_ISO_MONTH = rf"{_Y}-\d\d"
_MDY = rf"{_MON} {_D},? {_Y}"
_DMY = rf"{_D} (?:of )?{_MON},? {_Y}"
_NUM_DOT = rf"\d{{1,2}}\.\d{{1,2}}\.{_Y}"
_NUM_SLASH = rf"\d{{1,2}}/\d{{1,2}}/{_Y}"
_YMD_SLASH = rf"{_Y}/\d{{1,2}}/\d{{1,2}}"
_MY = rf"{_MON},? (?:of )?{_Y}"
_QY = rf"(?:q[1-4](?: |-|/){_Y}|{_Y}(?: |-)q[1-4]|{_ORD} quarter(?: of)? {_Y})"
_Q = rf"(?:q[1-4]|{_ORD} quarter)"
_MD = rf"{_MON} {_D}"
_REL = r"(?:today|yesterday|(?:this|last|previous) (?:week|month|quarter|year))"
# Alternation order matters: longer forms first. No nested quantifiers anywhere (ReDoS-safe).
_NUMERIC = [_ISO_DATE, _YMD_SLASH, _NUM_DOT, _NUM_SLASH, _ISO_MONTH]
_P_ANY = "(?:" + "|".join([*_NUMERIC, _MDY, _DMY, _MY, _QY, _MD, _Q, _MON, _Y, _REL]) + ")"
_P_BARE = "(?:" + "|".join([*_NUMERIC, _MDY, _DMY, _MY, _QY, _Q, _REL]) + ")"

_FLAGS = re.IGNORECASE
_TO = "(?:and|to|until|till|through|thru)"
_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("between", re.compile(rf"\b(?:between|from) ({_P_ANY}) {_TO} ({_P_ANY})\b", _FLAGS)),
    ("since", re.compile(rf"\bsince ({_P_ANY})\b", _FLAGS)),
    ("as_of", re.compile(rf"\bas (?:of|at) ({_P_ANY})\b", _FLAGS)),
    ("in", re.compile(rf"\b(?:in|during|throughout|for|on|over|from) (?:the )?({_P_ANY})\b", _FLAGS)),
    ("bare", re.compile(rf"\b({_P_BARE})\b", _FLAGS)),
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


def _fm(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern, _FLAGS)


_R_ISO_DATE = _fm(r"(\d{4})-(\d\d)-(\d\d)")
_R_ISO_MONTH = _fm(r"(\d{4})-(\d\d)")
_R_MDY = _fm(rf"({_MON}) (\d{{1,2}})(?:st|nd|rd|th)?,? (\d{{4}})")
_R_DMY = _fm(rf"(\d{{1,2}})(?:st|nd|rd|th)? (?:of )?({_MON}),? (\d{{4}})")
_R_NUM_DOT = _fm(r"(\d{1,2})\.(\d{1,2})\.(\d{4})")
_R_NUM_SLASH = _fm(r"(\d{1,2})/(\d{1,2})/(\d{4})")
_R_YMD_SLASH = _fm(r"(\d{4})/(\d{1,2})/(\d{1,2})")
_R_MY = _fm(rf"({_MON}),? (?:of )?(\d{{4}})")
_R_QY = _fm(rf"q([1-4])(?: |-|/)(\d{{4}})|(\d{{4}})(?: |-)q([1-4])|({_ORD}) quarter(?: of)? (\d{{4}})")
_R_Q = _fm(rf"q([1-4])|(?:the )?({_ORD}) quarter")
_R_MD = _fm(rf"({_MON}) (\d{{1,2}})(?:st|nd|rd|th)?")
_R_M = _fm(rf"({_MON})")
_R_Y = _fm(r"(\d{4})")
_R_REL = _fm(r"today|yesterday|(?:this|last|previous) (?:week|month|quarter|year)")


def _dt(d: date, now: datetime) -> datetime:
    return datetime(d.year, d.month, d.day, tzinfo=now.tzinfo)


def _add_months(year: int, month: int, n: int) -> tuple[int, int]:
    idx = year * 12 + (month - 1) + n
    return idx // 12, idx % 12 + 1


def _day(y: int, m: int, d: int, now: datetime) -> _Period | None:
    try:
        start = _dt(date(y, m, d), now)
    except ValueError:
        return None
    return _Period(start, start + timedelta(days=1), "day")


def _months(y: int, m: int, n: int, grain: str, now: datetime) -> _Period | None:
    if not 1 <= m <= 12 or not 1 <= y <= 9998:
        return None
    ey, em = _add_months(y, m, n)
    return _Period(_dt(date(y, m, 1), now), _dt(date(ey, em, 1), now), grain)


def _month(y: int, m: int, now: datetime) -> _Period | None:
    return _months(y, m, 1, "month", now)


def _quarter(y: int, q: int, now: datetime) -> _Period | None:
    return _months(y, 3 * q - 2, 3, "quarter", now)


def _relative(word: str, now: datetime) -> _Period:
    """``today`` / ``yesterday`` / ``this|last|previous week|month|quarter|year`` as calendar periods."""
    today = _dt(now.date(), now)
    if word == "today":
        return _Period(today, today + timedelta(days=1), "day")
    if word == "yesterday":
        return _Period(today - timedelta(days=1), today, "day")
    which, unit = word.split(" ")
    back = 0 if which == "this" else 1
    if unit == "week":
        monday = today - timedelta(days=today.weekday(), weeks=back)
        return _Period(monday, monday + timedelta(weeks=1), "day")
    if unit == "month":
        y, m = _add_months(today.year, today.month, -back)
        return _Period(_dt(date(y, m, 1), now), _dt(date(*_add_months(y, m, 1), 1), now), "month")
    if unit == "quarter":
        y, m = _add_months(today.year, 3 * ((today.month - 1) // 3) + 1, -3 * back)
        return _Period(_dt(date(y, m, 1), now), _dt(date(*_add_months(y, m, 3), 1), now), "quarter")
    y = today.year - back
    return _Period(_dt(date(y, 1, 1), now), _dt(date(y + 1, 1, 1), now), "year")


def _slashed(a: int, b: int, y: int, now: datetime) -> _Period | _Ambiguous | None:
    """``a/b/y``: day/month or month/day, told apart only by a part above 12."""
    dm, md = _day(y, b, a, now), _day(y, a, b, now)
    if dm is not None and md is not None and a != b:
        return _Ambiguous("day", (md, dm))
    return dm or md


def _parse_period(text: str, now: datetime) -> _Period | _Partial | _Ambiguous | None:
    """Resolve one period expression (already matched by the outer pattern)."""
    if m := _R_ISO_DATE.fullmatch(text):
        return _day(int(m[1]), int(m[2]), int(m[3]), now)
    if m := _R_YMD_SLASH.fullmatch(text):
        return _day(int(m[1]), int(m[2]), int(m[3]), now)
    if m := _R_NUM_DOT.fullmatch(text):
        return _day(int(m[3]), int(m[2]), int(m[1]), now)
    if m := _R_NUM_SLASH.fullmatch(text):
        return _slashed(int(m[1]), int(m[2]), int(m[3]), now)
    if m := _R_ISO_MONTH.fullmatch(text):
        return _month(int(m[1]), int(m[2]), now)
    if m := _R_MDY.fullmatch(text):
        return _day(int(m[3]), _MONTHS[m[1].lower()], int(m[2]), now)
    if m := _R_DMY.fullmatch(text):
        return _day(int(m[3]), _MONTHS[m[2].lower()], int(m[1]), now)
    if m := _R_MY.fullmatch(text):
        return _month(int(m[2]), _MONTHS[m[1].lower()], now)
    if m := _R_QY.fullmatch(text):
        if m[1]:
            return _quarter(int(m[2]), int(m[1]), now)
        if m[3]:
            return _quarter(int(m[3]), int(m[4]), now)
        return _quarter(int(m[6]), _ORDINALS[m[5].lower()], now)
    if m := _R_Q.fullmatch(text):
        q = int(m[1]) if m[1] else _ORDINALS[m[2].lower()]
        return _Partial("quarter", lambda y: _quarter(y, q, now))
    if m := _R_MD.fullmatch(text):
        mon, d = _MONTHS[m[1].lower()], int(m[2])
        return _Partial("day", lambda y: _day(y, mon, d, now))
    if m := _R_M.fullmatch(text):
        mon = _MONTHS[m[1].lower()]
        return _Partial("month", lambda y: _month(y, mon, now))
    if m := _R_Y.fullmatch(text):
        y = int(m[1])
        return _Period(_dt(date(y, 1, 1), now), _dt(date(y + 1, 1, 1), now), "year")
    if m := _R_REL.fullmatch(text):
        return _relative(m[0].lower(), now)
    return None


def _label(p: _Period) -> str:
    if p.grain == "day":
        return p.start.strftime("%Y-%m-%d")
    if p.grain == "month":
        return p.start.strftime("%Y-%m")
    if p.grain == "quarter":
        return f"{p.start.year}-Q{(p.start.month - 1) // 3 + 1}"
    return str(p.start.year)


def _finest(a: str, b: str) -> str:
    return a if GRAINS.index(a) <= GRAINS.index(b) else b


_Span = tuple[datetime, datetime, str]
_Resolved = _Span | list[str] | None  # a span, the candidate labels of an ambiguity, or not temporal


def _resolve_single(p: _Period | _Partial | _Ambiguous | None, now: datetime) -> _Resolved:
    if p is None:
        return None
    if isinstance(p, _Ambiguous):
        return [_label(c) for c in p.candidates]
    if isinstance(p, _Period):
        return (p.start, p.end, p.grain)
    cands = [c for y in (now.year, now.year - 1) if (c := p.make(y)) is not None and c.start <= now]
    if len(cands) == 1:
        return (cands[0].start, cands[0].end, cands[0].grain)
    return [_label(c) for c in cands] or None


def _resolve_between(
    a: _Period | _Partial | _Ambiguous | None, b: _Period | _Partial | _Ambiguous | None, now: datetime
) -> _Resolved:
    if a is None or b is None or isinstance(a, _Ambiguous) or isinstance(b, _Ambiguous):
        return None
    if isinstance(a, _Period) and isinstance(b, _Period):
        return (a.start, b.end, _finest(a.grain, b.grain))

    def pair(y_a: int, y_b: int) -> tuple[_Period, _Period] | None:
        pa = a if isinstance(a, _Period) else a.make(y_a)
        pb = b if isinstance(b, _Period) else b.make(y_b)
        return (pa, pb) if pa is not None and pb is not None else None

    if isinstance(a, _Period):  # "between March 2024 and June": B takes A's year (or the next)
        p = pair(0, a.start.year)
        if p is not None and p[1].end <= p[0].start:
            p = pair(0, a.start.year + 1)
    elif isinstance(b, _Period):  # "between March and June 2024": A takes B's year (or the one before)
        p = pair(b.start.year, 0)
        if p is not None and p[0].start >= p[1].end:
            p = pair(b.start.year - 1, 0)
    else:
        cands: list[tuple[_Period, _Period]] = []
        for y in (now.year, now.year - 1):
            p = pair(y, y)
            if p is not None and p[1].end <= p[0].start:
                p = pair(y, y + 1)
            if p is not None and p[0].start <= now:
                cands.append(p)
        if len(cands) != 1:
            return [f"{_label(x)}..{_label(z)}" for x, z in cands] or None
        p = cands[0]
    if p is None:
        return None
    return (p[0].start, p[1].end, _finest(p[0].grain, p[1].grain))


def _grain_of(p: _Period | _Partial | _Ambiguous | None) -> str:
    return "unknown" if p is None else p.grain


@dataclass(frozen=True, slots=True)
class _Found:
    priority: int
    start: int
    end: int
    name: str
    periods: tuple[str, ...]
    text: str


_PERIOD = re.compile(rf"\b({_P_ANY})\b", _FLAGS)
_SPAN_WORDS = re.compile(r"\b(between|after|since|before|until|till|prior to)\b", _FLAGS)
_CONNECTOR = re.compile(rf"\b{_TO}\b", _FLAGS)
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
        a, b = _parse_period(f.periods[0], now), _parse_period(f.periods[1], now)
        resolved = _resolve_between(a, b, now)
        grain = _finest(_grain_of(a), _grain_of(b))
    else:
        p = _parse_period(f.periods[0], now)
        resolved = _resolve_single(p, now)
        grain = _grain_of(p)
    if resolved is None:
        return None
    kind: PlanKind = _KINDS.get(name, "range")
    if isinstance(resolved, list):
        if name != "between" and isinstance(p, _Ambiguous):
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
