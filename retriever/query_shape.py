"""Query understanding without an LLM (pure): what the question's wording says about the answer's shape.

- **Quoted phrases** (``"The Four Seasons"``, straight or curly quotes, 2–80 characters): a passage that carries
  the phrase verbatim (case-insensitive) is the one meant; it is boosted.
- **Names**: capitalised words that are not the sentence's first word, not stopwords, not a month or weekday
  (those are the temporal planner's). Two or more distinct names make a **join question** ("What have Jon and
  Gina both …?"): the answer needs evidence around each name (:mod:`retriever.multihop`).
- **Order**: "first", "earliest" ask for the oldest of the matching passages; "last", "latest", "most recent"
  for the newest. The matching passages are re-ordered by time among the close contenders, never the whole list.
- **Aggregate**: a question that asks for several things spread over a conversation ("What activities does
  Melanie partake in?", "Where has Melanie camped?", "How many times …", "… both …"): one thread's repeats are
  discounted so the top ranks span threads (LoCoMo's multi-hop gold spans sessions).
- **Dates** are not parsed here: :func:`retriever.temporal_plan.plan_temporal` owns them (filters, boosts,
  relaxation); :attr:`QueryShape.dated` only records that the planner found one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from retriever.terms import STOPWORDS

Order = Literal["first", "last"]

_QUOTED = re.compile(r"[\"“”„«»]([^\"“”„«»]{2,80})[\"“”„«»]")
_WORD = re.compile(r"[A-Za-z][A-Za-z'’-]*")
_SENTENCE_START = re.compile(r"(?:^|[.?!]\s+)([A-Za-z][A-Za-z'’-]*)")
_CALENDAR = frozenset(
    """january february march april may june july august september october november december
    monday tuesday wednesday thursday friday saturday sunday""".split()  # noqa: SIM905
)
_FIRST = re.compile(r"\b(?:first(?! place)|earliest|initially|originally)\b", re.IGNORECASE)
_LAST = re.compile(r"\b(?:last|latest|most recent(?:ly)?|newest|final)\b", re.IGNORECASE)
_RELATIVE_LAST = re.compile(r"\blast (?:week|month|year|quarter|night|weekend|time)\b", re.IGNORECASE)
_AGGREGATE = re.compile(
    r"\b(?:both|how many|in what ways|what (?:kinds?|types?|sorts?) of|"
    r"(?:what|which) [a-z]+s (?:has|have|does|do|did|is|are|were)\b|"
    r"(?:what|where|which) (?:has|have) \w+(?:'s)? (?:\w+ )?\w+ed\b|"
    r"(?:what|which) (?:activities|events|things|items|books|places|cities|countries|hobbies|pets|ways))",
    re.IGNORECASE,
)


@dataclass(frozen=True, slots=True)
class QueryShape:
    phrases: tuple[str, ...] = ()
    names: tuple[str, ...] = ()
    order: Order | None = None
    aggregate: bool = False
    dated: bool = False

    @property
    def join(self) -> bool:
        """Two or more distinct names: evidence around each is needed."""
        return len(self.names) >= 2


def quoted_phrases(query: str) -> tuple[str, ...]:
    """Phrases between quotes, stripped, distinct (case-insensitive), in order."""
    seen: dict[str, str] = {}
    for m in _QUOTED.finditer(query):
        phrase = " ".join(m.group(1).split())
        if len(phrase) >= 2:
            seen.setdefault(phrase.lower(), phrase)
    return tuple(seen.values())


def names(query: str) -> tuple[str, ...]:
    """Capitalised words that can name a person or thing: not a sentence's first word, not a stopword, not a
    month or weekday; ``Melanie's`` counts as ``Melanie``. Distinct, in order."""
    starts = {m.start(1) for m in _SENTENCE_START.finditer(query)}
    out: dict[str, None] = {}
    for m in _WORD.finditer(query):
        word = re.sub(r"['’]s$", "", m.group(0)).strip("'’-")
        if m.start() in starts or len(word) < 2 or not word[0].isupper():
            continue
        if word.lower() in STOPWORDS or word.lower() in _CALENDAR:
            continue
        out.setdefault(word, None)
    return tuple(out)


def order_of(query: str) -> Order | None:
    """``first`` / ``last`` when the question asks for the earliest / newest; "last week" is a period (the
    planner's), not an order; both words together are no order."""
    first = bool(_FIRST.search(query))
    last = bool(_LAST.search(_RELATIVE_LAST.sub(" ", query)))
    if first == last:
        return None
    return "first" if first else "last"


def parse_query(query: str, *, dated: bool = False) -> QueryShape:
    """The shape of ``query`` (first 2,000 characters); ``dated`` = the temporal planner read a date in it."""
    text = query[:2000]
    return QueryShape(
        phrases=quoted_phrases(text),
        names=names(_QUOTED.sub(" ", text)),
        order=order_of(text),
        aggregate=bool(_AGGREGATE.search(text)),
        dated=dated,
    )
