"""Deterministic relationship-question parser: "who founded Acme?" → (founded, "Acme", incoming).

Edges are stored ``subject --predicate--> object``. ``direction="incoming"`` means the seed is the
edge's object and the answer is its subjects ("who founded Acme": ? founded Acme);
``"outgoing"`` means the seed is the subject ("what does Dana work on": Dana works_on ?).
``partner_of`` and ``competitor_of`` are symmetric (see :data:`SYMMETRIC_PREDICATES`); the parser
returns ``outgoing`` for them and callers should walk both directions.

Safety (ReDoS): the query is whitespace-collapsed and any query longer than 200 characters is not a
relationship question (None) — linear work only. Patterns are anchored full matches with a single
bounded seed capture ``.{1,80}?`` and no nested quantifiers. Trailing ``?.!`` and quotes are stripped;
a seed that is only a pronoun ("who founded it") yields None.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

PREDICATES: tuple[str, ...] = (
    "founded", "invested_in", "advises", "partner_of", "competitor_of", "attended",
    "works_at", "reports_to", "manages", "member_of", "works_on",
)  # fmt: skip
SYMMETRIC_PREDICATES: frozenset[str] = frozenset({"partner_of", "competitor_of"})
MAX_QUERY_CHARS = 200
MAX_SEED_CHARS = 80

Direction = Literal["incoming", "outgoing"]


@dataclass(frozen=True, slots=True)
class RelationalQuery:
    """A parsed relationship question. ``role`` qualifies ``works_at`` ("ceo" for "the CEO of X")."""

    predicate: str
    seed: str
    direction: Direction
    role: str | None = None


_S = r"(?P<seed>.{1,80}?)"
_POSS = r"(?:'s|’s|'|’)"
_BE = r"(?:is|are|was|were)"
_ROLES = r"(?P<role>ceo|cto|cfo|coo|cmo|cio|ciso|cpo|president|chairman|chairwoman|chair)"

_RULES: tuple[tuple[str, str, Direction], ...] = (
    # works_at with a role first: "who is the CEO of Acme", "Acme's CTO"
    (rf"who {_BE} (?:the )?{_ROLES} (?:of|at) {_S}", "works_at", "incoming"),
    (rf"(?:who {_BE} )?{_S}{_POSS} {_ROLES}", "works_at", "incoming"),
    # manages
    (rf"who (?:manages|managed|leads|led|runs|heads) {_S}", "manages", "incoming"),
    (rf"who {_BE} {_S}{_POSS} (?:manager|boss|supervisor|lead)", "manages", "incoming"),
    (rf"who {_BE} (?:the )?(?:manager|boss|supervisor|lead) (?:of|for) {_S}", "manages", "incoming"),
    (rf"{_S}{_POSS} (?:manager|boss|supervisor)", "manages", "incoming"),
    (rf"who (?:does|did) {_S} manage", "manages", "outgoing"),
    (rf"who {_BE} managed by {_S}", "manages", "outgoing"),
    # reports_to
    (rf"who (?:reports|reported) to {_S}", "reports_to", "incoming"),
    (rf"(?:who {_BE} )?{_S}{_POSS} (?:direct )?reports", "reports_to", "incoming"),
    (rf"(?:who {_BE} )?(?:the )?(?:direct )?reports of {_S}", "reports_to", "incoming"),
    (rf"who (?:does|did) {_S} report to", "reports_to", "outgoing"),
    # founded
    (rf"who (?:co-?)?founded {_S}", "founded", "incoming"),
    (rf"(?:who {_BE} )?(?:the )?(?:co-?)?founders? of {_S}", "founded", "incoming"),
    (rf"(?:who {_BE} )?{_S}{_POSS} (?:co-?)?founders?", "founded", "incoming"),
    (
        rf"what (?:companies |company |startups? )?(?:did|has|have) {_S} (?:co-?)?found(?:ed)?",
        "founded",
        "outgoing",
    ),
    # invested_in
    (rf"who (?:has |have )?(?:invested|invests) in {_S}", "invested_in", "incoming"),
    (rf"(?:who {_BE} )?(?:the )?investors (?:in|of) {_S}", "invested_in", "incoming"),
    (rf"(?:who {_BE} )?{_S}{_POSS} investors", "invested_in", "incoming"),
    (rf"what (?:companies |startups )?(?:did|has|does) {_S} invest(?:ed)? in", "invested_in", "outgoing"),
    # advises
    (rf"who (?:advises|advised) {_S}", "advises", "incoming"),
    (rf"(?:who {_BE} )?(?:the )?advis[eo]rs? (?:to|of|for) {_S}", "advises", "incoming"),
    (rf"(?:who {_BE} )?{_S}{_POSS} advis[eo]rs?", "advises", "incoming"),
    (rf"(?:who|what|which companies) (?:does|did) {_S} advise", "advises", "outgoing"),
    # partner_of / competitor_of (symmetric)
    (rf"(?:who {_BE} )?(?:the )?partners? of {_S}", "partner_of", "outgoing"),
    (rf"who (?:partners|partnered) with {_S}", "partner_of", "outgoing"),
    (rf"(?:who {_BE} )?{_S}{_POSS} partners?", "partner_of", "outgoing"),
    (rf"(?:who {_BE} )?(?:the )?competitors of {_S}", "competitor_of", "outgoing"),
    (rf"who (?:competes|competed) with {_S}", "competitor_of", "outgoing"),
    (rf"(?:who {_BE} )?{_S}{_POSS} competitors", "competitor_of", "outgoing"),
    # attended
    (rf"who (?:attended|went to) {_S}", "attended", "incoming"),
    (rf"where did {_S} (?:go to school|study|go to college)", "attended", "outgoing"),
    (
        rf"what (?:schools?|universit(?:y|ies)|colleges?|events?|conferences?) did {_S} attend",
        "attended",
        "outgoing",
    ),
    # works_on (before works_at: "works on" vs "works at")
    (rf"who (?:works|is working|are working|worked|was working) on {_S}", "works_on", "incoming"),
    (rf"what (?:projects? )?(?:does|did) {_S} work on", "works_on", "outgoing"),
    (rf"what {_BE} {_S} working on", "works_on", "outgoing"),
    # works_at
    (rf"who (?:works|worked) (?:at|for) {_S}", "works_at", "incoming"),
    (rf"who {_BE} (?:employed|working) (?:at|by|for) {_S}", "works_at", "incoming"),
    (rf"(?:who {_BE} )?(?:the )?employees (?:of|at) {_S}", "works_at", "incoming"),
    (rf"where (?:does|did) {_S} work", "works_at", "outgoing"),
    (rf"who (?:does|did) {_S} work for", "works_at", "outgoing"),
    # member_of
    (rf"who {_BE} (?:on|in) (?:the )?{_S} team", "member_of", "incoming"),
    (rf"(?:who {_BE} )?(?:the )?members of (?:the )?{_S}(?: team)?", "member_of", "incoming"),
    (rf"who (?:belongs|belonged) to (?:the )?{_S}(?: team)?", "member_of", "incoming"),
    (rf"(?:what|which) teams? {_BE} {_S} (?:on|in|a member of|part of)", "member_of", "outgoing"),
)
_COMPILED: tuple[tuple[re.Pattern[str], str, Direction], ...] = tuple(
    (re.compile(p, re.IGNORECASE), pred, direction) for p, pred, direction in _RULES
)
_PRONOUNS = frozenset(
    "it him her them this that they he she you me us someone anyone everyone who whom what".split()  # noqa: SIM905
)
_TRAILING = "?.!,;: \"'“”‘’"


def _clean_seed(raw: str) -> str | None:
    seed = raw.strip(_TRAILING + "([{)]}")
    if seed.lower().startswith("the "):
        seed = seed[4:].lstrip()
    if not seed or len(seed) > MAX_SEED_CHARS or seed.lower() in _PRONOUNS:
        return None
    if not any(ch.isalnum() for ch in seed):
        return None
    return seed


def parse_relational_query(query: str) -> RelationalQuery | None:
    """Parse a relationship question, or None when the query is not one (first matching rule wins)."""
    if len(query) > 4 * MAX_QUERY_CHARS:  # cheap early exit before even splitting huge inputs
        return None
    text = " ".join(query.split()).rstrip(_TRAILING)
    if not text or len(text) > MAX_QUERY_CHARS:
        return None
    for pattern, predicate, direction in _COMPILED:
        m = pattern.fullmatch(text)
        if m is None:
            continue
        seed = _clean_seed(m["seed"])
        if seed is None:
            continue
        role = m.groupdict().get("role")
        return RelationalQuery(predicate, seed, direction, role.lower() if role else None)
    return None
