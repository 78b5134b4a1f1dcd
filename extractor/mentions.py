"""Person references the HERB enterprise corpus (and Slack-like sources) write explicitly.

What the source text looks like (HERB ``events.jsonl``):
- Slack messages mention people by employee id: ``@eid_13fdff84``, also quoted ``@'eid_6bd20afa'``
  and bare in prose (``reported by QA Specialist eid_dc8bf84e``); some ids have 7 hex digits.
- Slack messages also mention by display name: ``I agree with @Hannah Garcia.``
- Pull requests carry reviews inline: ``[review CHANGES_REQUESTED by eid_cdd331bc] …``; PRs of
  the open-source products use ``EMP_<digits>`` ids instead (``[review APPROVED by EMP_767960421]``,
  identity namespace ``herb_emp``; these ids are not in ``people.jsonl``).
- Meeting transcripts start with a roster, then speaker lines::

      Attendees
      Fiona Miller, Fiona Brown, Hannah Garcia
      Transcript
      Alice Taylor: Team, I wanted to get your feedback …

  The event's ``meta.participants`` lists employee ids in roster order (one per roster name,
  duplicates included), so ids are paired with names by position only when the counts match.
  Speakers need not be on the roster.
- Meeting chats: first line an ISO timestamp, then ``Name: message`` lines.

Rules and numbers:
- ``eid_`` + 6–12 lower-case hex digits is a person with identity ``("herb_eid", eid)``: certain,
  so ``mentioned`` links from ids carry confidence 0.9; ``@Name`` (1–2 capitalized tokens,
  trailing stopwords trimmed) has no identity and carries 0.6.
- Roster attendance is 0.95, speaker attendance 0.9, PR reviews 0.95.
- Rosters longer than 500 names and speaker names longer than 60 characters are ignored.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from extractor.links import (
    HERB_EID_NAMESPACE,
    HERB_EMP_NAMESPACE,
    SOURCE_DOCUMENT,
    EntityRef,
    ExtractedLink,
    dedup_links,
    link_allowed,
)
from services.names import clean_name
from services.taxonomy.registry import Registry

EID_MENTION_CONFIDENCE = 0.9
NAME_MENTION_CONFIDENCE = 0.6
ROSTER_CONFIDENCE = 0.95
SPEAKER_CONFIDENCE = 0.9
REVIEW_CONFIDENCE = 0.95
MAX_ROSTER = 500

MentionKind = Literal["eid", "at_name", "roster", "speaker", "reviewer"]

_EID_MENTION = re.compile(r"(?<![\w@'])(?P<at>@)?'?(?P<eid>eid_[0-9a-f]{6,12})'?(?![0-9A-Za-z_])")
_AT_NAME = re.compile(r"(?<![\w@])@(?P<name>[A-Z][A-Za-z'’-]{0,30}(?:[ \t][A-Z][A-Za-z'’-]{0,30})?)")
_REVIEW = re.compile(r"\[review (?P<state>[A-Z_]{1,30}) by @?(?:(?P<eid>eid_[0-9a-f]{6,12})|(?P<emp>EMP_\d{3,12}))\]")
_PERSON_NAME = re.compile(r"[A-Z][\w.'’-]{0,40}(?: [A-Z][\w.'’-]{0,40}){0,4}")
_SPEAKER = re.compile(r"(?P<name>[A-Z][\w.'’-]{0,40}(?: [A-Z][\w.'’-]{0,40}){0,4}):[ \t]")
_ROSTER_HEADER = re.compile(r"(?i)(?:attendees|participants)[ \t]*(?::[ \t]*|$)")
_TRANSCRIPT_HEADER = re.compile(r"(?i)transcript[ \t]*:?[ \t]*")


@dataclass(frozen=True, slots=True)
class PersonMention:
    """A person reference found in text; ``span`` is the character range of the reference."""

    person: EntityRef
    span: tuple[int, int]
    kind: MentionKind


def herb_person(eid: str, name: str | None = None) -> EntityRef:
    """A person ref keyed by a HERB employee id (display name defaults to the id)."""
    key = eid.lower()
    return EntityRef(type="person", name=name or key, identity=(HERB_EID_NAMESPACE, key))


def herb_emp_person(emp: str) -> EntityRef:
    """A person ref keyed by a HERB ``EMP_<digits>`` id (pull-request authors and reviewers)."""
    return EntityRef(type="person", name=emp, identity=(HERB_EMP_NAMESPACE, emp))


def find_person_mentions(text: str) -> list[PersonMention]:
    """``@eid_…`` / bare ``eid_…`` ids and ``@First Last`` display names, in text order."""
    found: list[PersonMention] = []
    for m in _EID_MENTION.finditer(text):
        found.append(PersonMention(herb_person(m.group("eid")), (m.start(), m.end()), "eid"))
    for m in _AT_NAME.finditer(text):
        name = clean_name(m.group("name"))
        if name is None:
            continue
        end = m.start() + 1 + len(name)
        found.append(PersonMention(EntityRef("person", name), (m.start(), end), "at_name"))
    found.sort(key=lambda p: p.span)
    return found


def mention_links(text: str, *, registry: Registry, document: EntityRef = SOURCE_DOCUMENT) -> list[ExtractedLink]:
    """``document -mentioned-> person`` for every person mention, plus ``reviewed`` for PR reviews."""
    links: list[ExtractedLink] = []
    for mention in find_person_mentions(text):
        confidence = EID_MENTION_CONFIDENCE if mention.kind == "eid" else NAME_MENTION_CONFIDENCE
        links.append(
            ExtractedLink(
                document,
                "mentioned",
                mention.person,
                None,
                confidence,
                mention.span,
                f"mention:{mention.kind}",
            )
        )
    for m in _REVIEW.finditer(text):
        reviewer = herb_person(m.group("eid")) if m.group("eid") else herb_emp_person(m.group("emp"))
        links.append(
            ExtractedLink(
                reviewer,
                "reviewed",
                document,
                None,
                REVIEW_CONFIDENCE,
                (m.start(), m.end()),
                f"review:{m.group('state').lower()}",
            )
        )
    return dedup_links(link for link in links if link_allowed(link, registry))


@dataclass(frozen=True, slots=True)
class MeetingAttendance:
    """People on a meeting's roster and people who spoke in it (roster order, then speaking order)."""

    roster: tuple[PersonMention, ...]
    speakers: tuple[PersonMention, ...]

    @property
    def people(self) -> tuple[EntityRef, ...]:
        """Distinct people, roster first; a speaker matching a roster person is not repeated."""
        seen: set[tuple[str, str, str]] = set()
        out: list[EntityRef] = []
        for mention in (*self.roster, *self.speakers):
            if mention.person.key not in seen:
                seen.add(mention.person.key)
                out.append(mention.person)
        return tuple(out)


def parse_meeting(text: str, participants: Sequence[str] | None = None) -> MeetingAttendance:
    """Roster (``Attendees`` block) and speakers (``Name: …`` lines) of a transcript or meeting chat.

    ``participants`` are employee ids in roster order; they become identities only when their
    count equals the roster's name count (no guessing otherwise). A speaker takes the identity
    of the roster person with the same name when exactly one roster person has that name.
    """
    lines = text.split("\n")
    roster, body_start = _roster(lines, participants)
    by_name: dict[str, list[EntityRef]] = {}
    for mention in roster:
        by_name.setdefault(mention.person.name, []).append(mention.person)
    speakers: list[PersonMention] = []
    seen: set[str] = set()
    offset = sum(len(line) + 1 for line in lines[:body_start])
    for line in lines[body_start:]:
        m = _SPEAKER.match(line, 0, min(len(line), 64))
        name = clean_name(m.group("name")) if m else None
        if m is not None and name is not None and name == m.group("name") and name not in seen:
            seen.add(name)
            same = by_name.get(name, [])
            person = same[0] if len(same) == 1 else EntityRef("person", name)
            speakers.append(PersonMention(person, (offset, offset + len(name)), "speaker"))
        offset += len(line) + 1
    return MeetingAttendance(tuple(roster), tuple(speakers))


def attendance_links(
    text: str, meeting: EntityRef, *, registry: Registry, participants: Sequence[str] | None = None
) -> list[ExtractedLink]:
    """``person -attended-> meeting`` for roster people (0.95) and speakers (0.9), registry-checked."""
    attendance = parse_meeting(text, participants)
    links = [
        ExtractedLink(m.person, "attended", meeting, None, ROSTER_CONFIDENCE, m.span, "meeting:roster")
        for m in attendance.roster
    ]
    links += [
        ExtractedLink(m.person, "attended", meeting, None, SPEAKER_CONFIDENCE, m.span, "meeting:speaker")
        for m in attendance.speakers
    ]
    return dedup_links(link for link in links if link_allowed(link, registry))


def _roster(lines: list[str], participants: Sequence[str] | None) -> tuple[list[PersonMention], int]:
    """Roster mentions and the index of the first body line. No header → empty roster, body = all."""
    index = 0
    while index < len(lines) and not lines[index].strip():
        index += 1
    if index >= len(lines):
        return [], 0
    header = _ROSTER_HEADER.match(lines[index])
    if header is None:
        return [], 0
    offset = sum(len(line) + 1 for line in lines[:index])
    inline = lines[index][header.end() :]
    chunks: list[tuple[int, str]] = [(offset + header.end(), inline)] if inline.strip() else []
    offset += len(lines[index]) + 1
    body = index + 1
    while body < len(lines) and lines[body].strip() and not _TRANSCRIPT_HEADER.fullmatch(lines[body].strip()):
        if _SPEAKER.match(lines[body], 0, min(len(lines[body]), 64)):
            break
        chunks.append((offset, lines[body]))
        offset += len(lines[body]) + 1
        body += 1
    if body < len(lines) and _TRANSCRIPT_HEADER.fullmatch(lines[body].strip()):
        body += 1
    raw: list[tuple[str, tuple[int, int]]] = []
    for start, chunk in chunks:
        for m in re.finditer(r"[^,;]+", chunk):
            piece = m.group().strip()
            if piece:
                lead = len(m.group()) - len(m.group().lstrip())
                raw.append((piece, (start + m.start() + lead, start + m.start() + lead + len(piece))))
    raw = raw[:MAX_ROSTER]
    ids = list(participants or [])
    paired = len(ids) == len(raw)
    mentions: list[PersonMention] = []
    for i, (piece, span) in enumerate(raw):
        if not _PERSON_NAME.fullmatch(piece):
            continue
        if paired and re.fullmatch(r"eid_[0-9a-f]{6,12}", ids[i].lower()):
            person = herb_person(ids[i], piece)
        else:
            person = EntityRef("person", piece)
        mentions.append(PersonMention(person, span, "roster"))
    return mentions, body
