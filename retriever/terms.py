"""Query and passage terms for ranking (pure): tokens, stopwords, chat fillers, content terms."""

from __future__ import annotations

import re

STOPWORDS: frozenset[str] = frozenset(
    """a about above after again against all am an and any are as at be because been before being
    below between both but by can could did do does doing down during each few for from further had
    has have having he her here hers him his how i if in into is it its itself just me more most my
    no nor not of off on once only or other our ours out over own same she should so some such than
    that the their theirs them then there these they this those through to too under until up very
    was we were what when where which while who whom why will with would you your yours
    tell show give find know get got me us did does latest recent recently current currently""".split()  # noqa: SIM905
)

_TOKEN_RE = re.compile(r"[a-z0-9]+")

FILLERS: frozenset[str] = frozenset(
    """haha hahaha lol lmao yes yeah yep yup no nope ok okay oh ohh hmm wow omg cool great nice sure hey hi
    hello thanks thank awesome amazing totally really definitely absolutely true right good glad love""".split()  # noqa: SIM905
)
"""Chat fillers: not information when counting a passage's content terms (the low-information prior)."""


def tokens(text: str) -> list[str]:
    """Lower-cased alphanumeric tokens of ``text`` (apostrophes and punctuation split tokens)."""
    return _TOKEN_RE.findall(text.lower())


def content_terms(text: str) -> list[str]:
    """Query terms worth matching: tokens of length ≥ 2 that are not stopwords, first occurrence order."""
    seen: dict[str, None] = {}
    for tok in tokens(text):
        if len(tok) >= 2 and tok not in STOPWORDS:
            seen.setdefault(tok, None)
    return list(seen)
