"""Kind-aware ranking (pure): which ranking configuration and which levers the ``full`` arm uses, chosen by the
kinds of the candidates the arms returned.

Why: the levers of the last rounds (CC weights 0.7/0.3, RM3 PRF, the second round's author / neighbour /
when-boosts, the title boost) were tuned on chat turns (LoCoMo). On scientific abstracts the product's ``full``
ranked below its own dense arm (issue 26): there the dense model is the stronger arm, feedback terms drawn from
long abstracts drift, and the chat second round has no authors or threads to use. So the candidates decide:
when most of them are ``document`` chunks the ``documents`` profile applies, otherwise today's (``messages``).
The profiles' values were chosen on the document set's train/dev split and LoCoMo's dev conversations
(docs/evaluation.md, "Kind-aware ranking").

Only ``document`` is measured on a document corpus; emails, tickets, pull requests and meetings keep the message
profile (today's ranking) until a set of theirs is measured.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import Protocol

from retriever.hits import CC_WEIGHTS, DEFAULT, RankConfig

ENABLED = True
"""Whether ``full`` picks its profile by the candidates' kinds (off = one profile for every kind, as before)."""
DOCUMENT_KINDS = frozenset({"document"})
DOCUMENT_SHARE = 0.5
"""A query is ranked as documents when at least this share of its candidates are of a document kind."""


@dataclass(frozen=True, slots=True)
class KindProfile:
    """One ranking profile: the configuration of :func:`retriever.ranking.fuse_and_rank` and the levers around it."""

    name: str
    config: RankConfig
    prf: bool = True
    """Whether the lexical arm's pseudo-relevance feedback is used (the plain BM25 list otherwise)."""
    second_round: bool = True
    """Whether :mod:`retriever.multihop`'s second round runs."""


MESSAGES = KindProfile("messages", DEFAULT)
DOCUMENTS = KindProfile(
    "documents",
    replace(DEFAULT, arm_weights=MappingProxyType({**CC_WEIGHTS, "lexical": 0.5, "dense": 0.5}), doc_repeat=0.5),
    prf=False,
    second_round=False,
)
PROFILES: dict[str, KindProfile] = {p.name: p for p in (MESSAGES, DOCUMENTS)}


def document_share(kinds: Iterable[str]) -> float:
    """Share of ``kinds`` that are document kinds (0.0 for none)."""
    values = list(kinds)
    return sum(1 for k in values if k in DOCUMENT_KINDS) / len(values) if values else 0.0


def choose(kinds: Iterable[str], base: RankConfig = DEFAULT) -> KindProfile:
    """The profile for a ``full`` query whose candidates have ``kinds``.

    ``base`` is the preset's configuration: the message profile keeps it as it is (so a caller's preset still
    wins for chat), and with :data:`ENABLED` off every query gets it.
    """
    messages = replace(PROFILES["messages"], config=base) if base is not DEFAULT else PROFILES["messages"]
    if not ENABLED:
        return messages
    return PROFILES["documents"] if document_share(kinds) >= DOCUMENT_SHARE else messages


class LexicalList(Protocol):
    @property
    def ids(self) -> list[str]: ...
    @property
    def scores(self) -> dict[str, float]: ...


class ArmLists(Protocol):
    """The arms' ids best first and raw scores, and the lexical arm's first round (``passages._ArmsFound``)."""

    ids: dict[str, list[str]]
    scores: dict[str, dict[str, float]]

    @property
    def plain_lexical(self) -> LexicalList | None: ...


def apply(
    full: bool, kinds: Iterable[str], config: RankConfig, arms: ArmLists
) -> tuple[KindProfile | None, RankConfig]:
    """For the ``full`` arm: the profile of these candidates and its configuration; a profile without PRF swaps
    the lexical arm's feedback list in ``arms`` for its first round. Other arms: ``(None, config)``, unchanged."""
    if not full:
        return None, config
    profile = choose(kinds, config)
    plain = arms.plain_lexical
    if not profile.prf and plain is not None:
        arms.ids["lexical"], arms.scores["lexical"] = list(plain.ids), dict(plain.scores)
    return profile, profile.config
