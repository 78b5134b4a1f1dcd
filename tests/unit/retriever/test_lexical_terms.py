"""Which query terms generate BM25 candidates (pure part of the lexical arm)."""

from __future__ import annotations

from retriever.lexical_math import LexemeStats, rare_first

STATS = LexemeStats({"team": 0.30, "meet": 0.20, "launch": 0.02}, unlisted=0.001)


def test_without_statistics_every_term_generates() -> None:
    assert rare_first(["team", "heron", "launch"], None, 100_000, 4000) == ["team", "heron", "launch"]


def test_rarest_first_within_the_budget() -> None:
    # expected visible matches at 100k: heron 100 (unlisted), launch 2,000, meet 20,000, team 30,000
    assert rare_first(["team", "heron", "launch", "meet"], STATS, 100_000, 4000) == ["heron", "launch"]


def test_small_scopes_keep_every_term() -> None:
    # 5,000 visible: 5 + 100 + 1,000 + 1,500 = 2,605 <= 4,000
    assert rare_first(["team", "heron", "launch", "meet"], STATS, 5_000, 4000) == ["heron", "launch", "meet", "team"]


def test_the_rarest_term_always_generates() -> None:
    assert rare_first(["team", "meet"], STATS, 1_000_000, 4000) == ["meet"]


def test_unlisted_share_and_ties_break_by_lexeme() -> None:
    assert STATS.share("zebra") == 0.001
    assert rare_first(["zulu", "alpha"], STATS, 100, 4000) == ["alpha", "zulu"]
