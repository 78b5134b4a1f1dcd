"""Pure parts of the ingest index context (ingest/context.py)."""

from __future__ import annotations

from datetime import UTC, datetime

from ingest.context import message_context, section_paths

WHEN = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)


def test_message_context_previous_turns_then_date_and_speaker() -> None:
    assert message_context("Caroline", WHEN, []) == "[8 May 2023] Caroline:"
    assert message_context("Caroline", WHEN, [("Melanie", "Hi!"), (None, "anon"), ("X", "  ")]) == (
        "Melanie: Hi!\nanon\n[8 May 2023] Caroline:"
    )
    assert message_context(None, WHEN, []) == "[8 May 2023]"


def test_section_paths_follow_heading_levels() -> None:
    text = "# A\n\nintro\n\n## B\n\nbee\n\n### C\n\nsee\n\n## D\n\ndee"
    parents = [(0, text)]
    starts = [text.index(w) for w in ("intro", "bee", "see", "dee")]
    assert section_paths(parents, starts) == ["A", "A > B", "A > B > C", "A > D"]
    assert section_paths([(0, "no headings here")], [0]) == [None]
    # offsets are absolute: a second parent's heading applies only after its position
    assert section_paths([(0, "# One\n\nx"), (100, "# Two\n\ny")], [5, 99, 105]) == ["One", "One", "Two"]
