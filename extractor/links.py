"""Extraction output types shared by every extraction path (patterns, mentions, LLM).

Rules:
- An ``EntityRef`` is typed by the registry's entity types. ``identity`` is an optional
  ``(namespace, key)`` pair from a source system (``("herb_eid", "eid_9b023657")``,
  ``("email", "a@b.c")``) that identity resolution trusts over the display name.
- An ``ExtractedLink`` is either entity → entity (``object`` set, ``value`` None) or a value
  claim (``object`` None, ``value`` set, predicate object type ``literal``).
- Dedup key is ``(subject, predicate, object-or-value)``; the higher confidence wins and a
  tie keeps the earlier link (so rules run first win ties).
- Every link must pass ``link_allowed`` against the registry before it is written.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Hashable, Iterable
from dataclasses import dataclass

from services.taxonomy.registry import LITERAL, Registry

HERB_EID_NAMESPACE = "herb_eid"
"""Identity namespace of HERB employee ids (``eid_`` + hex)."""
HERB_EMP_NAMESPACE = "herb_emp"
"""Identity namespace of HERB ``EMP_<digits>`` ids (open-source pull-request authors/reviewers)."""


@dataclass(frozen=True, slots=True)
class EntityRef:
    """A typed reference to an entity as written in a source. Resolution happens downstream."""

    type: str
    name: str
    identity: tuple[str, str] | None = None

    @property
    def key(self) -> tuple[str, str, str]:
        """Dedup key: the identity when known, else the case-folded name within the type."""
        if self.identity is not None:
            return (self.type, self.identity[0], self.identity[1])
        return (self.type, "", " ".join(self.name.split()).casefold())


SOURCE_DOCUMENT = EntityRef(type="document", name="", identity=("source", "self"))
"""Placeholder subject of ``mentioned`` links: "the document being extracted". Callers bind it
to the real document with ``bind_source``."""


@dataclass(frozen=True, slots=True)
class ExtractedLink:
    """One candidate fact with its evidence span (character offsets into the source text)."""

    subject: EntityRef
    predicate: str
    object: EntityRef | None
    value: str | None
    confidence: float
    span: tuple[int, int]
    rule: str = ""

    @property
    def key(self) -> tuple[Hashable, ...]:
        literal = (LITERAL, (self.value or "").casefold())
        target: Hashable = self.object.key if self.object is not None else literal
        return (self.subject.key, self.predicate, target)

    def shifted(self, offset: int) -> ExtractedLink:
        """The same link with its span moved by ``offset`` (window → document coordinates)."""
        return dataclasses.replace(self, span=(self.span[0] + offset, self.span[1] + offset))


def link_allowed(link: ExtractedLink, registry: Registry) -> bool:
    """True when the registry allows this link's predicate between its subject and object types."""
    if link.object is None:
        if not link.value:
            return False
        return registry.allows(link.predicate, link.subject.type, LITERAL)
    if link.value is not None:
        return False
    return registry.allows(link.predicate, link.subject.type, link.object.type)


def dedup_links(links: Iterable[ExtractedLink]) -> list[ExtractedLink]:
    """Keep one link per ``(subject, predicate, object)``: the strictly higher confidence replaces.

    Output order is first-seen order of each key.
    """
    best: dict[tuple[Hashable, ...], ExtractedLink] = {}
    for link in links:
        current = best.get(link.key)
        if current is None or link.confidence > current.confidence:
            best[link.key] = link
    return list(best.values())


def bind_source(links: Iterable[ExtractedLink], document: EntityRef) -> list[ExtractedLink]:
    """Replace the ``SOURCE_DOCUMENT`` placeholder (as subject or object) with ``document``."""
    out: list[ExtractedLink] = []
    for link in links:
        if link.subject == SOURCE_DOCUMENT:
            link = dataclasses.replace(link, subject=document)
        if link.object == SOURCE_DOCUMENT:
            link = dataclasses.replace(link, object=document)
        out.append(link)
    return out
