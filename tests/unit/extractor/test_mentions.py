"""HERB-style person references: ``@eid_…`` mentions, ``@Name``, PR reviews, meeting rosters and speakers.

The literals below are copied from HERB ``events.jsonl`` (shortened where marked).
"""

from __future__ import annotations

from extractor.links import SOURCE_DOCUMENT, EntityRef
from extractor.mentions import (
    EID_MENTION_CONFIDENCE,
    NAME_MENTION_CONFIDENCE,
    ROSTER_CONFIDENCE,
    SPEAKER_CONFIDENCE,
    attendance_links,
    find_person_mentions,
    herb_person,
    mention_links,
    parse_meeting,
)
from extractor.patterns import extract_links
from services.taxonomy import load_registry

REGISTRY = load_registry()

SLACK_JOIN = (
    "@eid_13fdff84 joined planning-onForceX. Also, @eid_d96fb219, @eid_2589c967, @eid_ec3b5d65 joined via invite."
)
SLACK_QUOTED = (
    "@'eid_6bd20afa' created this channel on 2026-06-11 01:22:00. "
    "This is the very beginning of the planning-ATF_AIX channel."
)
SLACK_BARE = (
    "Hi team, QA team found some issues in the last release of ATF_AIX. "
    "The issue was reported by QA Specialist eid_dc8bf84e."
)
SLACK_AT_NAME = (
    "I agree with @Hannah Garcia. The performance optimizations are clearly implemented "
    "based on the evaluation results."
)
SLACK_AT_NAME_RUN_ON = "@Charlie Davis Thanks for bringing this up!"
PR_REVIEWS = (  # shortened
    "Integrate GraphQL for Data Fetching in Dashboard\n"
    "[review CHANGES_REQUESTED by eid_cdd331bc] The Apollo Client setup looks solid.\n"
    "[review APPROVED by EMP_767960421] Approving."
)
TRANSCRIPT = (  # shortened
    "Attendees\n"
    "Charlie Garcia, David Williams, George Brown, Ian Miller, Emma Jones, Charlie Martinez, Julia Jones\n"
    "Transcript\n"
    "Charlie Davis: Team, I wanted to get your feedback or suggestions on the "
    "Market Research Report for onForceX.\n"
    "Charlie Garcia: Thanks, Charlie. I think the Executive Summary is clear."
)
PARTICIPANTS = [
    "eid_802e8eff",
    "eid_e96d2f38",
    "eid_3bcf2a20",
    "eid_bed67c52",
    "eid_4afd9484",
    "eid_f1c8f4a5",
    "eid_839bc5eb",
]
MEETING_CHAT = (
    "2026-04-30T19:58:00\n"
    "Hannah Smith: https://sf-internal.slack.com/archives/docs/final_backaix_market_research_report"
)


def test_eid_mentions_carry_the_herb_identity() -> None:
    mentions = find_person_mentions(SLACK_JOIN)
    assert [m.person.identity for m in mentions] == [
        ("herb_eid", "eid_13fdff84"),
        ("herb_eid", "eid_d96fb219"),
        ("herb_eid", "eid_2589c967"),
        ("herb_eid", "eid_ec3b5d65"),
    ]
    assert all(m.kind == "eid" and m.person.type == "person" for m in mentions)
    first = mentions[0]
    assert SLACK_JOIN[first.span[0] : first.span[1]] == "@eid_13fdff84"


def test_quoted_and_bare_eids() -> None:
    assert [m.person for m in find_person_mentions(SLACK_QUOTED)] == [herb_person("eid_6bd20afa")]
    assert [m.person for m in find_person_mentions(SLACK_BARE)] == [herb_person("eid_dc8bf84e")]


def test_seven_digit_ids_seen_in_herb_are_accepted() -> None:
    assert [m.person.name for m in find_person_mentions("What do you think, @eid_e6d2ec9?")] == ["eid_e6d2ec9"]


def test_at_name_mentions_have_no_identity() -> None:
    (mention,) = find_person_mentions(SLACK_AT_NAME)
    assert mention.person == EntityRef("person", "Hannah Garcia") and mention.kind == "at_name"
    (run_on,) = find_person_mentions(SLACK_AT_NAME_RUN_ON)
    assert run_on.person.name == "Charlie Davis"


def test_emails_and_words_are_not_mentions() -> None:
    assert find_person_mentions("mail alice@Example.com about reid_12345678 and @here") == []


def test_mention_links_and_reviews() -> None:
    links = mention_links(SLACK_JOIN + " " + SLACK_AT_NAME, registry=REGISTRY)
    confidences = {lk.object.name: lk.confidence for lk in links if lk.object}
    assert confidences["eid_13fdff84"] == EID_MENTION_CONFIDENCE
    assert confidences["Hannah Garcia"] == NAME_MENTION_CONFIDENCE
    assert all(lk.subject == SOURCE_DOCUMENT and lk.predicate == "mentioned" for lk in links)
    reviews = [lk for lk in mention_links(PR_REVIEWS, registry=REGISTRY) if lk.predicate == "reviewed"]
    assert [(lk.subject.identity, lk.object, lk.rule) for lk in reviews] == [
        (("herb_eid", "eid_cdd331bc"), SOURCE_DOCUMENT, "review:changes_requested"),
        (("herb_emp", "EMP_767960421"), SOURCE_DOCUMENT, "review:approved"),
    ]


def test_extract_links_includes_mentions_and_skips_review_markup() -> None:
    links = extract_links(PR_REVIEWS, registry=REGISTRY)
    names = {lk.object.name for lk in links if lk.object and lk.predicate == "mentioned"}
    assert "APPROVED" not in names and "CHANGES_REQUESTED" not in names and "Approving" not in names
    assert "eid_cdd331bc" in names
    assert "Apollo Client" in names


def test_transcript_roster_pairs_ids_by_position() -> None:
    attendance = parse_meeting(TRANSCRIPT, PARTICIPANTS)
    assert [m.person.name for m in attendance.roster] == [
        "Charlie Garcia",
        "David Williams",
        "George Brown",
        "Ian Miller",
        "Emma Jones",
        "Charlie Martinez",
        "Julia Jones",
    ]
    assert [m.person.identity for m in attendance.roster] == [("herb_eid", p) for p in PARTICIPANTS]
    span = attendance.roster[1].span
    assert TRANSCRIPT[span[0] : span[1]] == "David Williams"
    assert [m.person for m in attendance.speakers] == [
        EntityRef("person", "Charlie Davis"),
        herb_person("eid_802e8eff", "Charlie Garcia"),
    ]
    assert len(attendance.people) == 8


def test_roster_without_matching_ids_is_names_only() -> None:
    attendance = parse_meeting(TRANSCRIPT, PARTICIPANTS[:3])
    assert all(m.person.identity is None for m in attendance.roster)


def test_duplicate_roster_names_keep_their_own_ids_and_speakers_stay_unresolved() -> None:
    text = "Attendees\nFiona Miller, Emma Brown, Fiona Miller\nTranscript\nFiona Miller: Thanks, Alice."
    attendance = parse_meeting(text, ["eid_1330d187", "eid_ab6f41bc", "eid_4988ee2a"])
    assert [m.person.identity for m in attendance.roster] == [
        ("herb_eid", "eid_1330d187"),
        ("herb_eid", "eid_ab6f41bc"),
        ("herb_eid", "eid_4988ee2a"),
    ]
    assert attendance.speakers[0].person == EntityRef("person", "Fiona Miller")


def test_attendance_links() -> None:
    meeting = EntityRef("meeting", "onForceX_planning_1")
    links = attendance_links(TRANSCRIPT, meeting, registry=REGISTRY, participants=PARTICIPANTS)
    assert all(lk.predicate == "attended" and lk.object == meeting for lk in links)
    by_name = {lk.subject.name: lk.confidence for lk in links}
    assert by_name["David Williams"] == ROSTER_CONFIDENCE
    assert by_name["Charlie Garcia"] == ROSTER_CONFIDENCE  # roster beats speaker on dedup
    assert by_name["Charlie Davis"] == SPEAKER_CONFIDENCE
    assert len(links) == 8


def test_meeting_chat_speakers() -> None:
    attendance = parse_meeting(MEETING_CHAT)
    assert attendance.roster == ()
    assert [m.person.name for m in attendance.speakers] == ["Hannah Smith"]


def test_generic_headings_are_not_speakers() -> None:
    text = "Summary: we shipped.\nNext Steps: plan.\nAlice Taylor: done."
    assert [m.person.name for m in parse_meeting(text).speakers] == ["Alice Taylor"]


def test_transcript_names_are_typed_person_in_pattern_extraction() -> None:
    objects = {lk.object for lk in extract_links(TRANSCRIPT, registry=REGISTRY) if lk.object}
    assert EntityRef("person", "Charlie Davis") in objects
    assert EntityRef("person", "David Williams") in objects
    assert EntityRef("glossary_term", "Market Research Report") in objects
