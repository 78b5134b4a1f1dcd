"""Parent/child chunking (pure).

Parents are readable sections (up to ``PARENT_CHARS``, split on blank lines, then lines, then
sentences); children are the ranked/embedded units inside a parent (up to ``CHILD_CHARS``, split
on sentence boundaries, never mid-word). A short message is one parent with one child spanning the
same text. Offsets are character offsets into the original text so evidence spans stay exact.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from services.chunk_embedding import content_hash

PARENT_CHARS = 2000
CHILD_CHARS = 600
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")
_PARA = re.compile(r"\n\s*\n")


@dataclass(frozen=True, slots=True)
class Span:
    start: int
    end: int


@dataclass(frozen=True, slots=True)
class ChunkPlan:
    ordinal: int
    parent_ordinal: int | None  # None for parents
    start: int
    end: int
    text: str
    content_hash: str

    @property
    def is_parent(self) -> bool:
        return self.parent_ordinal is None


def _pieces(text: str, start: int, end: int, boundary: re.Pattern[str]) -> list[Span]:
    """Split text[start:end] at ``boundary`` matches into spans covering the non-blank pieces."""
    spans: list[Span] = []
    pos = start
    for m in boundary.finditer(text, start, end):
        if m.start() > pos:
            spans.append(Span(pos, m.start()))
        pos = m.end()
    if pos < end:
        spans.append(Span(pos, end))
    return [s for s in spans if text[s.start : s.end].strip()]


def _hard_split(text: str, span: Span, limit: int) -> list[Span]:
    """Split an over-long span at whitespace so no piece exceeds ``limit`` (words longer than it are cut)."""
    out: list[Span] = []
    pos = span.start
    while span.end - pos > limit:
        cut = text.rfind(" ", pos + 1, pos + limit)
        if cut <= pos:
            cut = pos + limit
        out.append(Span(pos, cut))
        pos = cut
        while pos < span.end and text[pos].isspace():
            pos += 1
    if pos < span.end:
        out.append(Span(pos, span.end))
    return out


def _pack(text: str, spans: list[Span], limit: int) -> list[Span]:
    """Greedily merge consecutive spans while the merged span stays within ``limit`` characters."""
    atoms: list[Span] = []
    for s in spans:
        atoms.extend(_hard_split(text, s, limit) if s.end - s.start > limit else [s])
    packed: list[Span] = []
    for s in atoms:
        if packed and s.end - packed[-1].start <= limit:
            packed[-1] = Span(packed[-1].start, s.end)
        else:
            packed.append(s)
    return packed


def _trim(text: str, span: Span) -> Span:
    start, end = span.start, span.end
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return Span(start, end)


def plan_chunks(text: str, *, parent_chars: int = PARENT_CHARS, child_chars: int = CHILD_CHARS) -> list[ChunkPlan]:
    """Parents first (each followed by its children), ordinals dense from 0. Empty text -> no chunks."""
    if not text.strip():
        return []
    paragraphs = _pieces(text, 0, len(text), _PARA)
    sections: list[Span] = []
    for para in paragraphs:
        if para.end - para.start <= parent_chars:
            sections.append(para)
        else:
            sections.extend(_pack(text, _pieces(text, para.start, para.end, _SENTENCE_END), parent_chars))
    parents = [_trim(text, s) for s in _pack(text, sections, parent_chars)]
    plans: list[ChunkPlan] = []
    ordinal = 0
    for parent in parents:
        p_ord = ordinal
        p_text = text[parent.start : parent.end]
        plans.append(ChunkPlan(p_ord, None, parent.start, parent.end, p_text, content_hash(p_text)))
        ordinal += 1
        children = _pack(text, _pieces(text, parent.start, parent.end, _SENTENCE_END), child_chars)
        for child in children:
            c = _trim(text, child)
            c_text = text[c.start : c.end]
            plans.append(ChunkPlan(ordinal, p_ord, c.start, c.end, c_text, content_hash(c_text)))
            ordinal += 1
    return plans
