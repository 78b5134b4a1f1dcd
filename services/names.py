"""Name rules: the shape of a captured name (pattern and mention extractors) and the normalized
name entities are deduplicated on (conflicts stage, graph reads).

Rules:
- A name is 1–5 capitalized tokens, each ``[A-Z]`` plus at most 40 of ``[\\w&'-]`` (a ``.`` only
  inside a token, "J.P", never at its end, so "Acme. Alice" is two names), joined by 1–3
  spaces/tabs (never a newline). Every quantifier is bounded, so a regex built from
  ``NAME`` cannot backtrack catastrophically (ReDoS-safe), and ``NAME_START`` forbids starting
  inside a word so a run of capitals is tried once, not at every position.
- ``clean_name`` trims quotes, a possessive ``'s``, trailing punctuation and leading/trailing
  stopword tokens ("The", "Yesterday", "Thanks" …); a name that reduces to nothing, to a single
  character, or to digits is rejected (precision first: better to miss an entity than to
  create "The" or "Monday").
- ``normalize_name`` casefolds, drops punctuation and collapses blanks; organizations also drop a
  trailing legal suffix ("Acme Inc." = "acme"). It is the entity dedup key.
"""

from __future__ import annotations

import re
from functools import lru_cache


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


TOKEN = r"[A-Z](?:[\w&'-]|\.(?=\w)){0,40}"
NAME = rf"{TOKEN}(?:[ \t]{{1,3}}{TOKEN}){{0,4}}"
NAME_START = r"(?<![\w&.'@-])"
EID = r"@?'?eid_[0-9a-f]{6,12}'?"
EID_RE = re.compile(r"@?'?(eid_[0-9a-f]{6,12})'?")

STOPWORDS: frozenset[str] = _words(
    """
    a about above after again against all also although always am an and another any anyone anything
    are around as at be because been before being below between both but by can could did do does
    doing done during each either else even ever every everyone everything few for from further
    had has have having he her here hers herself him himself his how however i if in into is it its
    itself just let lets like may me might mine more most much must my myself neither no nor not now
    of off on once one only or other our ours ourselves out over own per perhaps please quite rather
    really same shall she should since so some someone something soon still such than that the their
    theirs them themselves then there these they this those though through thus to today tomorrow
    too under until up upon us very via was we well were what whatever when where whether which while
    who whom whose why will with within without would yes yesterday yet you your yours yourself
    monday tuesday wednesday thursday friday saturday sunday january february march april june
    july august september october november december mon tue wed thu fri sat sun jan feb mar apr jun
    jul aug sep sept oct nov dec eod eow asap fyi btw tbd ok okay hi hello hey dear thanks thank
    cheers regards great good nice awesome cool sure agreed absolutely exactly indeed definitely
    totally sounds looks looking let's i'm i've i'll i'd we're we've we'll you're it's that's there's
    here's don't can't won't isn't aren't didn't doesn't next last additionally finally overall
    currently recently meanwhile moreover furthermore therefore instead otherwise anyway basically
    actually maybe mr mrs ms dr prof
    """
)
"""Function words, time words and interjections: trimmed from both ends of any captured name."""

GENERIC_NOUNS: frozenset[str] = _words(
    """
    meeting meetings team teams project projects product products document documents doc docs
    section sections agenda summary overview notes note update updates action item items attendees
    transcript question questions answer answers idea ideas point points feedback issue issues
    call sync standup everyone all folks guys people channel thread report
    """
)
"""Generic nouns: kept inside a name ("Platform Team"), but a name made only of these and
stopwords ("The Meeting", "Action Items") is rejected."""

ORG_SUFFIXES: frozenset[str] = _words(
    """
    inc inc. corp corp. corporation co co. company llc ltd ltd. plc gmbh ag sa bv labs lab
    technologies technology systems group holdings capital ventures partners fund bank university
    institute foundation networks software solutions studios
    """
)

DEPARTMENTS: frozenset[str] = _words(
    """
    engineering marketing sales product design finance operations research hr legal support security
    data platform infrastructure qa it people growth analytics
    """
)

_TRAILING_PUNCT = ".,;:!?'\"-&)"


GREETINGS: frozenset[str] = _words("thanks thank hi hello hey dear cheers congrats welcome")
"""A name right after one of these ("Thanks Alice") is a person."""


def is_stopword(token: str) -> bool:
    return token.casefold() in STOPWORDS


@lru_cache(maxsize=8192)
def clean_name(raw: str) -> str | None:
    """Normalize a captured name; None when nothing entity-like is left."""
    name = raw.strip().strip("\"'“”‘’`")
    tokens = name.split()
    if tokens and re.fullmatch(r"[\w&.-]+['’]s", tokens[-1]):
        tokens[-1] = tokens[-1][:-2]
    tokens = [t.rstrip(_TRAILING_PUNCT) if i == len(tokens) - 1 else t for i, t in enumerate(tokens)]
    while tokens and (not tokens[0] or is_stopword(tokens[0].rstrip(_TRAILING_PUNCT))):
        tokens.pop(0)
    while tokens and (not tokens[-1] or is_stopword(tokens[-1])):
        tokens.pop()
        if tokens:
            tokens[-1] = tokens[-1].rstrip(_TRAILING_PUNCT)
    cleaned = " ".join(tokens)
    if all(t.casefold() in GENERIC_NOUNS for t in tokens):
        return None
    if len(cleaned) < 2 or cleaned.replace(" ", "").isdigit() or not cleaned[0].isalnum():
        return None
    return cleaned


def has_org_suffix(name: str) -> bool:
    """True when the last token is a company-like suffix ("Acme Inc", "Sequoia Capital")."""
    tokens = name.split()
    return len(tokens) > 1 and tokens[-1].casefold() in ORG_SUFFIXES


def is_department(name: str) -> bool:
    return name.casefold() in DEPARTMENTS


def eid_of(raw: str) -> str | None:
    """The ``eid_…`` key inside ``@eid_…`` / ``@'eid_…'`` / ``eid_…``, lower-cased; else None."""
    match = EID_RE.fullmatch(raw.strip())
    return match.group(1).lower() if match else None


def sentence_initial(text: str, start: int) -> bool:
    """True when ``start`` opens a sentence: text start, or only blanks after ``.!?:;``/newline/bullet."""
    i = start - 1
    steps = 0
    while i >= 0 and text[i] in " \t" and steps < 8:
        i -= 1
        steps += 1
    return i < 0 or text[i] in '.!?:;\n"“(*•>-|]#'


_NORM_PUNCT = re.compile(r"[^\w\s@.:+-]|(?<!\w)[.:+-]|[.:+-](?!\w)")


def normalize_name(name: str, entity_type: str = "") -> str:
    """Case-folded, punctuation-free, single-spaced name; organizations lose a trailing suffix."""
    text = _NORM_PUNCT.sub(" ", name.casefold())
    tokens = text.split()
    if entity_type == "organization":
        while len(tokens) > 1 and tokens[-1] in ORG_SUFFIXES:
            tokens.pop()
    return " ".join(tokens)
