"""The typed verb-pattern table used by ``extractor.patterns`` (pure data + tiny emitters).

Each ``Rule`` is a compiled, bounded regex, the lower-case keywords that must occur in the
window before it runs, and an emitter turning a match into raw links with slot types (first
type = default). Order matters only for ties: the ``is <Title> at <Company>`` form is first.

Covered forms (``P`` = person or ``@eid_…``, ``E`` = any name):
- ``P is [the] <Title> at|of|for E`` → works_at + has_title (title must hold a job word);
  ``P is the <Title> of <Department>`` → has_title only
- ``P [co-]founded E`` · ``P is [a] [co-]founder of E`` · ``E was founded [in 2019] by P[, P and P]``
- ``P invested [$5M] in E`` · ``E is backed by P[, P]`` · ``P advises E`` · ``P is an advisor to E``
- ``E partnered with E`` · ``E is a [strategic] partner of E`` · ``E and E partnered``
- ``E competes with|against E`` · ``E is a [main] competitor of|to E`` · ``E and E are [fierce] rivals``
- ``P attended|presented at|spoke at [the] E``
- ``P joined E`` (works_at) · ``P joined the E team`` (member_of) · ``P joined the E meeting`` (attended)
- ``P works|worked at|for E`` · ``P is employed|hired at|by E``
- ``P reports to P`` · ``P's manager is P`` → reports_to + manages
- ``P manages P`` → manages + reports_to · ``P leads|manages|runs|heads the E team|division|project``
- ``P is on|in|part of the E team`` · ``P is a member of E``
- ``P works on [the] Project X`` · ``P works on E [project|product]``
- ``P owns [the] E [project|product|document]``
- ``E is based|headquartered|located in E`` (located_in literal)
- ``ACRONYM stands for <words>`` (has_definition literal)
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from services.names import EID, NAME, NAME_START, clean_name, is_department

S = r"[ \t]{1,3}"
P = rf"(?:{EID}|{NAME_START}{NAME})"
E = rf"{NAME_START}{NAME}"
ART = rf"(?:(?:the|an?|our|their){S})?"
SEP = rf"(?:,[ \t]{{0,3}}(?:(?:and|&){S})?|{S}(?:and|&){S})"
LIST = rf"{P}(?:{SEP}{P}){{0,3}}"
TITLE = rf"[A-Za-z][\w&/.-]{{0,30}}(?:{S}[A-Za-z&][\w&/.-]{{0,30}}){{0,6}}"
ADJ = rf"(?:[a-z]{{1,20}}{S})?"

TITLE_WORDS = frozenset(
    """
    ceo cto cfo coo cpo cmo cio ciso cso vp svp evp gm pm qa president chair chairman chairwoman
    founder co-founder cofounder director manager engineer lead head officer architect designer
    scientist analyst specialist consultant developer researcher recruiter intern advisor adviser
    administrator coordinator strategist executive accountant counsel editor writer marketer
    partner principal associate representative technician vice
    """.split()  # noqa: SIM905 - a word list reads better as prose
)
_RELATION_TITLES = frozenset({"partner", "advisor", "adviser", "investor"})
_MEETING_NOUNS = ("meeting", "call", "sync", "standup", "stand-up", "offsite", "kickoff", "workshop", "retro")


@dataclass(frozen=True, slots=True)
class Slot:
    """A captured entity mention and the types its position allows (first = default)."""

    raw: str
    types: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class RawLink:
    """A rule hit before typing and registry checks."""

    predicate: str
    subject: Slot
    object: Slot | None
    value: str | None
    span: tuple[int, int]
    rule: str


Emitter = Callable[[re.Match[str]], Iterable[RawLink]]


@dataclass(frozen=True, slots=True)
class Rule:
    name: str
    pattern: re.Pattern[str]
    keywords: tuple[str, ...]
    emit: Emitter


def _names(raw: str) -> list[str]:
    return [
        part for part in re.split(r",[ \t]{0,3}(?:(?:and|&)[ \t]{1,3})?|[ \t]{1,3}(?:and|&)[ \t]{1,3}", raw) if part
    ]


def _simple(name: str, predicate: str, subj: tuple[str, ...], obj: tuple[str, ...]) -> Emitter:
    """Emitter for groups ``subj``/``subjs`` (list) and ``obj``, or ``value`` for literal predicates."""

    def emit(m: re.Match[str]) -> Iterable[RawLink]:
        groups = m.groupdict()
        subjects = _names(groups["subjs"]) if groups.get("subjs") else [m.group("subj")]
        for raw in subjects:
            if groups.get("value") is not None:
                yield RawLink(predicate, Slot(raw, subj), None, groups["value"], m.span(), name)
            else:
                yield RawLink(predicate, Slot(raw, subj), Slot(m.group("obj"), obj), None, m.span(), name)

    return emit


def _title(m: re.Match[str]) -> Iterable[RawLink]:
    title = m.group("title")
    words = {w.casefold() for w in re.split(r"[ \t/]+", title)}
    obj = clean_name(m.group("obj"))
    if not words & TITLE_WORDS or obj is None or obj.startswith("Project "):
        return
    if m.group("prep") == "of" and title.split()[-1].casefold() in _RELATION_TITLES:
        return  # "Acme is a partner of Initech" is a relationship, not a job
    person = Slot(m.group("subj"), ("person",))
    if is_department(obj):
        if m.group("prep") == "of":
            yield RawLink("has_title", person, None, f"{title} of {obj}", m.span(), "title")
        return
    yield RawLink("works_at", person, Slot(m.group("obj"), ("organization",)), None, m.span(), "title")
    yield RawLink("has_title", person, None, title, m.span(), "title")


def _joined(m: re.Match[str]) -> Iterable[RawLink]:
    person = Slot(m.group("subj"), ("person",))
    obj, noun, the = m.group("obj"), (m.group("noun") or "").lower(), m.group("the")
    last = obj.split()[-1].casefold()
    if noun in ("team", "squad", "group") or last in ("team", "squad"):
        yield RawLink("member_of", person, Slot(obj, ("team",)), None, m.span(), "joined_team")
    elif noun in ("division", "org"):
        yield RawLink("member_of", person, Slot(obj, ("division",)), None, m.span(), "joined_division")
    elif noun in _MEETING_NOUNS:
        yield RawLink("attended", person, Slot(obj, ("meeting",)), None, m.span(), "joined_meeting")
    elif not the:
        yield RawLink("works_at", person, Slot(obj, ("organization",)), None, m.span(), "joined")


def _reports(m: re.Match[str]) -> Iterable[RawLink]:
    employee, manager = Slot(m.group("subj"), ("person",)), Slot(m.group("obj"), ("person",))
    yield RawLink("reports_to", employee, manager, None, m.span(), "reports_to")
    yield RawLink("manages", manager, employee, None, m.span(), "reports_to")


def _manages(m: re.Match[str]) -> Iterable[RawLink]:
    manager = Slot(m.group("subj"), ("person",))
    obj, noun, verb = m.group("obj"), (m.group("noun") or "").lower(), m.group("verb").lower()
    tokens = obj.split()
    if noun in ("team", "squad", "group") or tokens[-1].casefold() in ("team", "squad"):
        target: tuple[str, ...] | None = ("team",)
    elif noun in ("division", "org", "organization"):
        target = ("division",)
    elif noun in ("project", "initiative") or (len(tokens) > 1 and tokens[0] == "Project"):
        target = ("project",)
    elif verb.startswith("manag") and not m.group("the"):
        target = ("person",)
    else:
        target = None
    if target is None:
        return
    yield RawLink("manages", manager, Slot(obj, target), None, m.span(), "manages")
    if target == ("person",):
        yield RawLink("reports_to", Slot(obj, target), manager, None, m.span(), "manages")


def _member(m: re.Match[str]) -> Iterable[RawLink]:
    person = Slot(m.group("subj"), ("person",))
    noun, obj = (m.group("noun") or "").lower(), m.group("obj")
    if noun in ("team", "squad", "group") or obj.split()[-1].casefold() in ("team", "squad"):
        yield RawLink("member_of", person, Slot(obj, ("team",)), None, m.span(), "member_of")
    elif noun == "division":
        yield RawLink("member_of", person, Slot(obj, ("division",)), None, m.span(), "member_of")
    elif not m.group("the") and m.group("rel").lower() in ("a member of", "part of"):
        yield RawLink("member_of", person, Slot(obj, ("organization",)), None, m.span(), "member_of")


def _works_on(m: re.Match[str]) -> Iterable[RawLink]:
    person = Slot(m.group("subj"), ("person", "team"))
    if m.group("proj"):
        yield RawLink("works_on", person, Slot(m.group("proj"), ("project",)), None, m.span(), "works_on")
        return
    target = ("product",) if (m.group("noun") or "").lower() == "product" else ("project", "product")
    yield RawLink("works_on", person, Slot(m.group("obj"), target), None, m.span(), "works_on")


def _owns(m: re.Match[str]) -> Iterable[RawLink]:
    noun = (m.group("noun") or "").lower()
    target = {"product": ("product",), "document": ("document",), "doc": ("document",)}.get(
        noun, ("project", "product", "document", "glossary_term")
    )
    yield RawLink(
        "owns",
        Slot(m.group("subj"), ("person", "team")),
        Slot(m.group("obj"), target),
        None,
        m.span(),
        "owns",
    )


def _rule(name: str, regex: str, keywords: tuple[str, ...], emit: Emitter) -> Rule:
    return Rule(name, re.compile(regex), keywords, emit)


_ORG = ("organization", "product")
_FOUNDED = ("organization", "product", "project")
_INVESTOR = ("organization", "person")

RULES: tuple[Rule, ...] = (
    _rule(
        "title",
        rf"(?P<subj>{P}),?{S}(?:is|was|became|serves{S}as|served{S}as|is{S}now|has{S}been){S}{ART}"
        rf"(?P<title>{TITLE}){S}(?P<prep>at|of|for){S}(?P<obj>{E})",
        (" is ", " was ", "became", "serve"),
        _title,
    ),
    _rule(
        "founded",
        rf"(?P<subj>{P}){S}(?:(?:has|had){S})?(?:[Cc]o-?)?founded{S}(?P<obj>{E})",
        ("founded",),
        _simple("founded", "founded", ("person", "organization"), _FOUNDED),
    ),
    _rule(
        "founder_of",
        rf"(?P<subj>{P}){S}(?:is|was){S}(?:the|a|an|one{S}of{S}the){S}(?:co-?)?founders?{S}of{S}(?P<obj>{E})",
        ("founder",),
        _simple("founder_of", "founded", ("person", "organization"), _FOUNDED),
    ),
    _rule(
        "founded_by",
        rf"(?P<obj>{E}){S}(?:was|were){S}(?:co-?)?founded{S}(?:in{S}\d{{4}}{S})?by{S}(?P<subjs>{LIST})",
        ("founded",),
        _simple("founded_by", "founded", ("person", "organization"), _FOUNDED),
    ),
    _rule(
        "invested_in",
        rf"(?P<subj>{P}){S}(?:(?:has|had){S})?(?:invested|invests|is{S}investing)"
        rf"(?:{S}\$?[\d.,]{{1,12}}(?:(?:{S})?(?:[kKmMbB]|million|billion))?)?{S}in{S}(?P<obj>{E})",
        ("invest",),
        _simple("invested_in", "invested_in", _INVESTOR, _ORG),
    ),
    _rule(
        "backed_by",
        rf"(?P<obj>{E}){S}(?:is|was|are|were){S}backed{S}by{S}(?P<subjs>{LIST})",
        ("backed",),
        _simple("backed_by", "invested_in", _INVESTOR, _ORG),
    ),
    _rule(
        "advises",
        rf"(?P<subj>{P}){S}(?:advises|advised|is{S}advising|(?:is|was){S}(?:an?{S})?(?:advisor|adviser){S}(?:to|for|at))"
        rf"{S}(?P<obj>{E})",
        ("advis",),
        _simple("advises", "advises", ("person", "organization"), ("organization", "person", "project")),
    ),
    _rule(
        "partnered",
        rf"(?P<subj>{E}){S}(?:(?:has|have|had){S})?(?:partnered|partners|is{S}partnering|teamed{S}up){S}with"
        rf"{S}(?P<obj>{E})",
        ("partner", "teamed"),
        _simple("partnered", "partner_of", _ORG, _ORG),
    ),
    _rule(
        "partner_of",
        rf"(?P<subj>{E}){S}(?:is|was){S}(?:an?{S})?{ADJ}partner{S}(?:of|to){S}(?P<obj>{E})",
        ("partner",),
        _simple("partner_of", "partner_of", _ORG, _ORG),
    ),
    _rule(
        "and_partnered",
        rf"(?P<subj>{E}){S}and{S}(?P<obj>{E}){S}(?:(?:have|had){S})?(?:partnered|announced{S}a{S}partnership)",
        ("partner",),
        _simple("and_partnered", "partner_of", _ORG, _ORG),
    ),
    _rule(
        "competes",
        rf"(?P<subj>{E}){S}(?:competes|competed|compete|is{S}competing){S}(?:with|against){S}(?P<obj>{E})",
        ("compet",),
        _simple("competes", "competitor_of", _ORG, _ORG),
    ),
    _rule(
        "competitor_of",
        rf"(?P<subj>{E}){S}(?:is|was){S}(?:an?{S})?{ADJ}(?:competitor|rival){S}(?:of|to){S}(?P<obj>{E})",
        ("competitor", "rival"),
        _simple("competitor_of", "competitor_of", _ORG, _ORG),
    ),
    _rule(
        "and_rivals",
        rf"(?P<subj>{E}){S}and{S}(?P<obj>{E}){S}are{S}{ADJ}(?:competitors|rivals)",
        ("competitors", "rivals"),
        _simple("and_rivals", "competitor_of", _ORG, _ORG),
    ),
    _rule(
        "attended",
        rf"(?P<subj>{P}){S}(?:attended|presented{S}at|spoke{S}at){S}{ART}(?P<obj>{E})",
        ("attended", "presented at", "spoke at"),
        _simple("attended", "attended", ("person",), ("meeting",)),
    ),
    _rule(
        "joined",
        rf"(?P<subj>{P}){S}(?:has{S})?(?:re)?joined{S}(?P<the>the{S})?(?P<obj>{E})"
        rf"(?:{S}(?P<noun>team|squad|group|division|org|{'|'.join(_MEETING_NOUNS)})\b)?",
        ("joined",),
        _joined,
    ),
    _rule(
        "works_at",
        rf"(?P<subj>{P}){S}(?:works|worked|is{S}working|has{S}worked|has{S}been{S}working){S}(?:at|for){S}(?P<obj>{E})",
        ("work",),
        _simple("works_at", "works_at", ("person",), ("organization",)),
    ),
    _rule(
        "employed",
        rf"(?P<subj>{P}){S}(?:is|was){S}(?:employed|hired){S}(?:at|by){S}(?P<obj>{E})",
        ("employed", "hired"),
        _simple("employed", "works_at", ("person",), ("organization",)),
    ),
    _rule(
        "reports_to",
        rf"(?P<subj>{P}){S}(?:reports|reported|is{S}reporting|will{S}report){S}(?:directly{S})?to{S}(?P<obj>{P})",
        ("report",),
        _reports,
    ),
    _rule(
        "manager_is",
        rf"(?P<subj>{P})'s{S}(?:direct{S})?(?:manager|boss|supervisor){S}(?:is|was){S}(?P<obj>{P})",
        ("manager", "boss", "supervisor"),
        _reports,
    ),
    _rule(
        "manages",
        rf"(?P<subj>{P}){S}(?P<verb>manages|managed|is{S}managing|leads|led|is{S}leading|heads|headed|runs|ran)"
        rf"{S}(?P<the>the{S})?(?P<obj>{P})(?:{S}(?P<noun>team|squad|group|division|org|organization|project|initiative)\b)?",
        ("manag", "lead", "led", "head", "run", "ran"),
        _manages,
    ),
    _rule(
        "member_of",
        rf"(?P<subj>{P}){S}(?:is|was|has{S}been|is{S}now){S}(?P<rel>on|in|part{S}of|a{S}member{S}of){S}(?P<the>the{S})?"
        rf"(?P<obj>{E})(?:{S}(?P<noun>team|squad|group|division)\b)?",
        (" on ", " in ", "part of", "member of"),
        _member,
    ),
    _rule(
        "works_on",
        rf"(?P<subj>{P}){S}(?:works|worked|is{S}working|has{S}been{S}working|contributes|contributed){S}(?:on|to){S}(?:the{S})?"
        rf"(?:[Pp]roject{S}(?P<proj>[A-Za-z0-9][\w&.'-]{{0,40}}(?:{S}[A-Z][\w&.'-]{{0,40}}){{0,3}})"
        rf"|(?P<obj>{E})(?:{S}(?P<noun>project|product|initiative)\b)?)",
        ("work", "contribut"),
        _works_on,
    ),
    _rule(
        "owns",
        rf"(?P<subj>{P}){S}(?:owns|owned|is{S}the{S}owner{S}of){S}(?:the{S})?(?P<obj>{E})"
        rf"(?:{S}(?P<noun>project|product|document|doc)\b)?",
        ("own",),
        _owns,
    ),
    _rule(
        "located_in",
        rf"(?P<subj>{E}){S}(?:is|was|are){S}(?:based|headquartered|located){S}in{S}(?P<value>{E})",
        ("based", "headquartered", "located"),
        _simple("located_in", "located_in", ("organization", "person", "team"), ()),
    ),
    _rule(
        "stands_for",
        rf"(?<![\w])(?P<subj>[A-Z][A-Z0-9&]{{1,10}}){S}(?:stands{S}for|is{S}short{S}for){S}(?P<value>[A-Za-z\"“][^.\n;:!?]{{0,80}})",
        ("stands for", "short for"),
        _simple("stands_for", "has_definition", ("glossary_term",), ()),
    ),
)
