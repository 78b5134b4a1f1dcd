"""Zero-LLM link extraction: typed verb patterns, person mentions, then bare named phrases.

Rules and numbers:
- Typed patterns carry confidence 0.8 (``TYPED_CONFIDENCE``); the ``is <Title> at <Company>``
  form runs first and yields ``works_at`` + ``has_title``. Management sentences yield both
  directions (``reports_to`` and ``manages``) when both ends are people.
- Person mentions (``@eid_…`` 0.9, ``@First Last`` 0.6) and PR reviews come from
  ``extractor.mentions``.
- Every other named phrase becomes ``document -mentioned-> phrase`` at 0.3 (``BARE_CONFIDENCE``)
  unless it reduces to stopwords/generic nouns, lies inside a typed link's span, a mention or a
  markdown heading line,
  names an end of a typed link, or is a single sentence-initial word never seen mid-sentence
  (precision first). A phrase is a person when it opens a ``Name:`` speaker line, is on a
  meeting roster, follows a greeting ("Thanks, Alice"), is addressed ("Good point, Emma."), is
  typed person elsewhere, is the only longer name starting with an addressed first name, or is the
  first name of such a person (then named by the full name when exactly one matches); else
  glossary_term unless its shape says project ("Project X"), team ("X Team") or organization
  (org suffix).
- Types: a slot lists allowed types, first = default. A name typed unambiguously elsewhere in
  the same window keeps that type (a clash drops the link; between two such types person
  wins); an org suffix ("Inc", "Capital") makes an organization; a two-or-three-word
  "First Last" shape makes a person where a person is allowed but not the default. Projects
  drop a leading "Project", teams a trailing "Team".
- Dedup on (subject, predicate, object/value): strictly higher confidence wins.
- Every link is checked against the registry; anything it does not allow is dropped.
- ReDoS safety: every quantifier is bounded (names: 5 tokens × 41 chars, gaps 1–3 blanks),
  rules run only when their keyword occurs, text is scanned in windows of at most
  ``MAX_SCAN_CHARS`` (20,000, overlap 400) and at most ``MAX_TEXT_CHARS`` (1,000,000) per call.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Iterable
from dataclasses import dataclass

from extractor.links import (
    SOURCE_DOCUMENT,
    EntityRef,
    ExtractedLink,
    dedup_links,
    link_allowed,
)
from extractor.mentions import find_person_mentions, herb_person, mention_links, parse_meeting
from extractor.rules import RULES, RawLink, Rule, Slot
from extractor.windows import split_windows
from services.names import (
    GREETINGS,
    NAME,
    NAME_START,
    clean_name,
    eid_of,
    has_org_suffix,
    is_department,
    sentence_initial,
)
from services.taxonomy.registry import Registry

__all__ = [
    "BARE_CONFIDENCE",
    "TYPED_CONFIDENCE",
    "EntityRef",
    "ExtractedLink",
    "extract_links",
]

TYPED_CONFIDENCE = 0.8
BARE_CONFIDENCE = 0.3
MAX_SCAN_CHARS = 20_000
SCAN_OVERLAP = 400
MAX_TEXT_CHARS = 1_000_000

_BARE = re.compile(rf"{NAME_START}(?P<name>{NAME})")
_BARE_NOISE = re.compile(r"(?i)q[1-4]|h[12]|fy\d{2,4}|v?\d[\w.]*|[A-Z]")
_AFTER_GREETING = re.compile(r"(?i)\b(?:thanks|thank you|hi|hello|hey|dear|cheers|congrats)[,!]?[ \t]{1,3}$")
_HEADING = re.compile(r"(?m)^#{1,6}[ \t][^\n]{0,200}")
_PERSON_SHAPE = re.compile(
    r"[A-Z][a-z]{1,20}(?:['-][A-Za-z][a-z]{0,20})?(?: [A-Z][a-z]{1,20}(?:-[A-Z][a-z]{1,20})?){1,2}"
)


def extract_links(text: str, *, registry: Registry, document: EntityRef = SOURCE_DOCUMENT) -> list[ExtractedLink]:
    """All registry-allowed links in ``text``, deduplicated, spans in ``text`` coordinates.

    ``document`` is the subject of ``mentioned`` links (default: the ``SOURCE_DOCUMENT`` placeholder).
    """
    text = text[:MAX_TEXT_CHARS]
    links: list[ExtractedLink] = []
    for window in split_windows(text, size=MAX_SCAN_CHARS, overlap=SCAN_OVERLAP):
        found = _extract_window(window.text, registry, document)
        links.extend(link.shifted(window.start) for link in found)
    return dedup_links(links)


def _extract_window(text: str, registry: Registry, document: EntityRef) -> list[ExtractedLink]:
    lowered = text.lower()
    raws = [raw for rule in RULES if _may_match(rule, lowered) for raw in _run(rule, text)]
    known = _known_types(raws)
    typed: list[ExtractedLink] = []
    for raw in raws:
        link = _resolve_link(raw, known)
        if link is not None and link_allowed(link, registry):
            typed.append(link)
    mentions = mention_links(text, registry=registry, document=document)
    bare = _bare_mentions(text, typed, mentions, known, registry, document)
    return dedup_links([*typed, *mentions, *bare])


def _may_match(rule: Rule, lowered: str) -> bool:
    return any(keyword in lowered for keyword in rule.keywords)


def _run(rule: Rule, text: str) -> Iterable[RawLink]:
    for match in rule.pattern.finditer(text):
        yield from rule.emit(match)


def _known_types(raws: Iterable[RawLink]) -> dict[str, str]:
    """Names whose type is certain (single-type slots). Conflicts: person wins, else the first seen."""
    known: dict[str, str] = {}
    for raw in raws:
        for slot in (raw.subject, raw.object):
            if slot is None or len(slot.types) != 1:
                continue
            name = clean_name(slot.raw)
            if name is not None:
                key = _canonical(name, slot.types[0]).casefold()
                if key not in known or slot.types[0] == "person":
                    known[key] = slot.types[0]
    return known


def resolve_slot(slot: Slot, known: dict[str, str]) -> EntityRef | None:
    """Type a captured mention by the rules in the module docstring; None = not an entity."""
    eid = eid_of(slot.raw)
    if eid is not None:
        return herb_person(eid) if "person" in slot.types else None
    name = clean_name(slot.raw)
    if name is None:
        return None
    default = slot.types[0]
    known_type = known.get(_canonical(name, default).casefold()) or known.get(name.casefold())
    if known_type is not None:
        chosen = known_type if known_type in slot.types else None
    elif "organization" in slot.types and has_org_suffix(name):
        chosen = "organization"
    elif "person" in slot.types and default != "person" and _PERSON_SHAPE.fullmatch(name):
        chosen = "person"
    else:
        chosen = default
    if chosen is None:
        return None
    canonical = _canonical(name, chosen)
    return EntityRef(chosen, canonical) if len(canonical) >= 2 else None


def _canonical(name: str, entity_type: str) -> str:
    tokens = name.split()
    if entity_type == "project" and len(tokens) > 1 and tokens[0].casefold() == "project":
        tokens = tokens[1:]
    if entity_type == "team" and len(tokens) > 1 and tokens[-1].casefold() in {"team", "squad"}:
        tokens = tokens[:-1]
    return " ".join(tokens)


def _resolve_link(raw: RawLink, known: dict[str, str]) -> ExtractedLink | None:
    subject = resolve_slot(raw.subject, known)
    if subject is None:
        return None
    if raw.object is None:
        value = clean_value(raw.value)
        if value is None:
            return None
        return ExtractedLink(subject, raw.predicate, None, value, TYPED_CONFIDENCE, raw.span, raw.rule)
    obj = resolve_slot(raw.object, known)
    if obj is None or obj.key == subject.key:
        return None
    if obj.type == "organization" and is_department(obj.name):
        return None
    return ExtractedLink(subject, raw.predicate, obj, None, TYPED_CONFIDENCE, raw.span, raw.rule)


def clean_value(raw: str | None) -> str | None:
    """A literal value with collapsed whitespace and no trailing punctuation; None when empty."""
    if raw is None:
        return None
    value = " ".join(raw.split()).strip(" ,;:.!?\"'“”")
    return value if value else None


class _Intervals:
    """Merged, sorted half-open intervals answering "is this offset covered?" in O(log n)."""

    def __init__(self, spans: Iterable[tuple[int, int]]) -> None:
        merged: list[list[int]] = []
        for start, end in sorted(spans):
            if merged and start <= merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], end)
            else:
                merged.append([start, end])
        self._starts = [m[0] for m in merged]
        self._ends = [m[1] for m in merged]

    def contains(self, offset: int) -> bool:
        i = bisect_right(self._starts, offset) - 1
        return i >= 0 and offset < self._ends[i]


@dataclass(frozen=True, slots=True)
class _Candidate:
    """First occurrence of a bare name (first confirmed one once any occurrence is confirmed)."""

    name: str
    span: tuple[int, int]
    confirmed: bool


def _bare_mentions(
    text: str,
    typed: list[ExtractedLink],
    mentions: list[ExtractedLink],
    known: dict[str, str],
    registry: Registry,
    document: EntityRef,
) -> list[ExtractedLink]:
    taken = {ref.name.casefold() for link in typed for ref in (link.subject, link.object) if ref is not None}
    people = {ref.name.casefold(): ref.name for ref in (*_people(typed, mentions), *parse_meeting(text).people)}
    spans = [p.span for p in find_person_mentions(text)] + [link.span for link in (*typed, *mentions)]
    covered = _Intervals(spans + [m.span() for m in _HEADING.finditer(text)])
    candidates: dict[str, _Candidate] = {}
    for match in _BARE.finditer(text):
        start, end = match.span("name")
        if covered.contains(start):
            continue
        raw = match.group("name")
        name = clean_name(raw)
        if name is None or _BARE_NOISE.fullmatch(name):
            continue
        key, first = name.casefold(), raw.split()[0]
        if key not in people:
            speaker = text.startswith(":", end) and (start == 0 or text[start - 1] == "\n")
            greeted = (first.casefold() in GREETINGS and not name.startswith(first)) or bool(
                _AFTER_GREETING.search(text, max(0, start - 16), start)
            )
            if speaker or greeted or _vocative(text, start, end, name):
                people[key] = name
        confirmed = not (sentence_initial(text, start) and " " not in name and first.rstrip(".,'") == name)
        seen = candidates.get(key)
        if seen is None or (confirmed and not seen.confirmed):
            candidates[key] = _Candidate(name, (start, end), confirmed)
    for key in list(candidates):
        if key in people and " " not in key:
            fuller = [c.name for k, c in candidates.items() if k.startswith(key + " ")]
            if len(fuller) == 1:
                people.setdefault(fuller[0].casefold(), fuller[0])
    by_first: dict[str, set[str]] = {}
    for person in people.values():
        if " " in person:
            by_first.setdefault(person.split()[0].casefold(), set()).add(person)
    out: list[ExtractedLink] = []
    for key, candidate in candidates.items():
        if key in taken or not candidate.confirmed:
            continue
        full = by_first.get(key, set())
        if " " not in candidate.name and len(full) == 1:
            entity = EntityRef("person", next(iter(full)))
        else:
            entity = _bare_entity(candidate.name, known, key in people or bool(full))
        link = ExtractedLink(document, "mentioned", entity, None, BARE_CONFIDENCE, candidate.span, "bare")
        if link_allowed(link, registry):
            out.append(link)
    return out


def _vocative(text: str, start: int, end: int, name: str) -> bool:
    """``Good point, Emma.`` / ``Thanks for sharing, Charlie!`` / ``Julia, could you …``: a 1–2 word
    name set off by a comma at a clause edge is someone being addressed."""
    if name.count(" ") > 1:
        return False
    after = text[end : end + 2]
    closes = bool(after) and after[0] in "!?." and (len(after) == 1 or after[1].isspace())
    if text[max(0, start - 2) : start] == ", " and (closes or end == len(text)):
        return True
    return sentence_initial(text, start) and after.startswith(", ") and " " not in name


def _people(typed: list[ExtractedLink], mentions: list[ExtractedLink]) -> Iterable[EntityRef]:
    for link in (*typed, *mentions):
        for ref in (link.subject, link.object):
            if ref is not None and ref.type == "person":
                yield ref


def _bare_entity(name: str, known: dict[str, str], is_person: bool) -> EntityRef:
    tokens = name.split()
    if is_person:
        entity_type = "person"
    elif name.casefold() in known:
        entity_type = known[name.casefold()]
    elif len(tokens) > 1 and tokens[0].casefold() == "project":
        entity_type = "project"
    elif len(tokens) > 1 and tokens[-1].casefold() in {"team", "squad"}:
        entity_type = "team"
    elif has_org_suffix(name):
        entity_type = "organization"
    else:
        entity_type = "glossary_term"
    return EntityRef(entity_type, _canonical(name, entity_type))
