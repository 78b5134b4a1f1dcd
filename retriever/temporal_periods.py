"""The period grammar of the temporal planner (pure): the date, month, quarter, year and relative expressions it
understands, parsed into half-open periods (exclusive ends) or an ambiguity; see :mod:`retriever.temporal_plan`
for the forms that use them."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, datetime, timedelta


@dataclass(frozen=True, slots=True)
class Period:
    start: datetime
    end: datetime
    grain: str


@dataclass(frozen=True, slots=True)
class Ambiguous:
    """A numeric date whose day / month order cannot be told (``10/01/2024``): the candidate days."""

    grain: str
    candidates: tuple[Period, ...]


@dataclass(frozen=True, slots=True)
class Partial:
    grain: str
    make: Callable[[int], Period | None]


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


P_ANY = "(?:" + "|".join([*_NUMERIC, _MDY, _DMY, _MY, _QY, _MD, _Q, _MON, _Y, _REL]) + ")"


P_BARE = "(?:" + "|".join([*_NUMERIC, _MDY, _DMY, _MY, _QY, _Q, _REL]) + ")"


FLAGS = re.IGNORECASE


TO = "(?:and|to|until|till|through|thru)"


def _fm(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern, FLAGS)


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


def _day(y: int, m: int, d: int, now: datetime) -> Period | None:
    try:
        start = _dt(date(y, m, d), now)
    except ValueError:
        return None
    return Period(start, start + timedelta(days=1), "day")


def _months(y: int, m: int, n: int, grain: str, now: datetime) -> Period | None:
    if not 1 <= m <= 12 or not 1 <= y <= 9998:
        return None
    ey, em = _add_months(y, m, n)
    return Period(_dt(date(y, m, 1), now), _dt(date(ey, em, 1), now), grain)


def _month(y: int, m: int, now: datetime) -> Period | None:
    return _months(y, m, 1, "month", now)


def _quarter(y: int, q: int, now: datetime) -> Period | None:
    return _months(y, 3 * q - 2, 3, "quarter", now)


def _relative(word: str, now: datetime) -> Period:
    """``today`` / ``yesterday`` / ``this|last|previous week|month|quarter|year`` as calendar periods."""
    today = _dt(now.date(), now)
    if word == "today":
        return Period(today, today + timedelta(days=1), "day")
    if word == "yesterday":
        return Period(today - timedelta(days=1), today, "day")
    which, unit = word.split(" ")
    back = 0 if which == "this" else 1
    if unit == "week":
        monday = today - timedelta(days=today.weekday(), weeks=back)
        return Period(monday, monday + timedelta(weeks=1), "day")
    if unit == "month":
        y, m = _add_months(today.year, today.month, -back)
        return Period(_dt(date(y, m, 1), now), _dt(date(*_add_months(y, m, 1), 1), now), "month")
    if unit == "quarter":
        y, m = _add_months(today.year, 3 * ((today.month - 1) // 3) + 1, -3 * back)
        return Period(_dt(date(y, m, 1), now), _dt(date(*_add_months(y, m, 3), 1), now), "quarter")
    y = today.year - back
    return Period(_dt(date(y, 1, 1), now), _dt(date(y + 1, 1, 1), now), "year")


def _slashed(a: int, b: int, y: int, now: datetime) -> Period | Ambiguous | None:
    """``a/b/y``: day/month or month/day, told apart only by a part above 12."""
    dm, md = _day(y, b, a, now), _day(y, a, b, now)
    if dm is not None and md is not None and a != b:
        return Ambiguous("day", (md, dm))
    return dm or md


def parse_period(text: str, now: datetime) -> Period | Partial | Ambiguous | None:
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
        return Partial("quarter", lambda y: _quarter(y, q, now))
    if m := _R_MD.fullmatch(text):
        mon, d = _MONTHS[m[1].lower()], int(m[2])
        return Partial("day", lambda y: _day(y, mon, d, now))
    if m := _R_M.fullmatch(text):
        mon = _MONTHS[m[1].lower()]
        return Partial("month", lambda y: _month(y, mon, now))
    if m := _R_Y.fullmatch(text):
        y = int(m[1])
        return Period(_dt(date(y, 1, 1), now), _dt(date(y + 1, 1, 1), now), "year")
    if m := _R_REL.fullmatch(text):
        return _relative(m[0].lower(), now)
    return None


def label(p: Period) -> str:
    if p.grain == "day":
        return p.start.strftime("%Y-%m-%d")
    if p.grain == "month":
        return p.start.strftime("%Y-%m")
    if p.grain == "quarter":
        return f"{p.start.year}-Q{(p.start.month - 1) // 3 + 1}"
    return str(p.start.year)
