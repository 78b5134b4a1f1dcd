"""Kind-aware ranking: the profile is chosen by the candidates' kinds, and a profile without PRF ranks with the
lexical arm's first round (retriever/kind_rank.py)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import pytest

from retriever import kind_rank
from retriever.hits import DEFAULT


@dataclass
class _Plain:
    ids: list[str]
    scores: dict[str, float]


@dataclass
class _Arms:
    ids: dict[str, list[str]] = field(default_factory=dict)
    scores: dict[str, dict[str, float]] = field(default_factory=dict)
    plain_lexical: _Plain | None = None


def test_mostly_documents_get_the_document_profile() -> None:
    assert kind_rank.choose(["document", "document", "message"]).name == "documents"
    assert kind_rank.choose(["message", "message", "document"]).name == "messages"
    assert kind_rank.choose([]).name == "messages"
    # unmeasured document-like kinds keep today's ranking
    assert kind_rank.choose(["email", "ticket", "pull_request"]).name == "messages"


def test_the_message_profile_is_todays_ranking() -> None:
    profile = kind_rank.choose(["message"])
    assert profile.config is DEFAULT and profile.prf and profile.second_round
    custom = replace(DEFAULT, title_boost=1.0)
    assert kind_rank.choose(["message"], custom).config is custom


def test_the_document_profile_differs_from_chat_in_its_levers() -> None:
    docs = kind_rank.PROFILES["documents"]
    assert docs.config != DEFAULT
    assert (docs.prf, docs.second_round) != (True, True) or docs.config.arm_weights != DEFAULT.arm_weights


def test_disabled_gives_every_kind_one_profile(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kind_rank, "ENABLED", False)
    assert kind_rank.choose(["document"] * 5).name == "messages"


def test_apply_swaps_in_the_plain_lexical_list_only_without_prf(monkeypatch: pytest.MonkeyPatch) -> None:
    def arms() -> _Arms:
        return _Arms({"lexical": ["b", "a"]}, {"lexical": {"b": 2.0, "a": 1.0}}, _Plain(["a"], {"a": 3.0}))

    found = arms()
    monkeypatch.setitem(kind_rank.PROFILES, "documents", replace(kind_rank.DOCUMENTS, prf=False))
    profile, config = kind_rank.apply(True, ["document"], DEFAULT, found)
    assert profile is not None and profile.name == "documents" and config is profile.config
    assert found.ids["lexical"] == ["a"] and found.scores["lexical"] == {"a": 3.0}

    found = arms()
    profile, config = kind_rank.apply(True, ["message"], DEFAULT, found)
    assert profile is not None and profile.name == "messages" and found.ids["lexical"] == ["b", "a"]

    found = arms()
    assert kind_rank.apply(False, ["document"], DEFAULT, found) == (None, DEFAULT)
    assert found.ids["lexical"] == ["b", "a"]
