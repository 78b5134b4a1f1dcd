"""Relevance-conditioned preload (seed 002): the viewer's top-k memories and top-k passages for the current turn,
deduplicated (one item per document, one per distinct text), packed to a token budget and rendered as one block
with numbered citations.

One ``search_knowledge_base`` over everything the viewer may see, with a candidate list four times ``top_k``
(at most 50), split into agent memories and other passages: every ACL and audit rule of the search applies
unchanged, and the call costs one search (measured: two concurrent searches, one restricted to memories, put
the p50 at 1.32x ``retrieve_context`` on 2 cores; ``bench/preload_bench.py``). Memories come first in the block:
they are what the agent (or its team) chose to keep.
"""

from __future__ import annotations

import hashlib
import math
import re

from retriever.packing import CHARS_PER_TOKEN, PackItem, estimate_tokens, pack
from retriever.service import RetrieverService
from schemas.preload import DEFAULT_PRELOAD_TOKENS, PreloadItem, PreloadRequest, PreloadResponse
from schemas.tools import Passage, SearchKnowledgeBaseRequest
from services.memories import AGENT_SYSTEM
from services.viewer import Viewer

_SPACE = re.compile(r"\s+")


def _text_key(text: str) -> str:
    return hashlib.sha256(_SPACE.sub(" ", text).strip().lower().encode()).hexdigest()


def _prefix(n: int, item: PreloadItem) -> str:
    label = "memory" if item.kind == "memory" else item.source_system
    title = f"{item.title}: " if item.title else ""
    return f"[{n}] ({label}, {item.event_time.date().isoformat()}) {title}"


def select(memories: list[Passage], passages: list[Passage], top_k: int) -> list[tuple[str, Passage]]:
    """Memories first, then passages; at most ``top_k`` of each; one per document and per distinct text."""
    seen_docs: set[str] = set()
    seen_text: set[str] = set()
    chosen: list[tuple[str, Passage]] = []
    for kind, found in (("memory", memories), ("passage", passages)):
        taken = 0
        for p in found:
            if taken == top_k:
                break
            key = _text_key(p.text)
            if str(p.document_id) in seen_docs or key in seen_text:
                continue
            seen_docs.add(str(p.document_id))
            seen_text.add(key)
            chosen.append((kind, p))
            taken += 1
    return chosen


async def preload(svc: RetrieverService, viewer: Viewer, req: PreloadRequest, *, default_top_k: int) -> PreloadResponse:
    top_k = req.top_k or default_top_k
    budget = req.max_tokens or DEFAULT_PRELOAD_TOKENS
    found = await svc.search_knowledge_base(
        SearchKnowledgeBaseRequest(query=req.text, workspace=req.workspace, limit=min(50, 4 * top_k)), viewer
    )
    memories = [p for p in found.passages if p.source_system == AGENT_SYSTEM]
    chosen = select(memories, [p for p in found.passages if p.source_system != AGENT_SYSTEM], top_k)
    candidates = [
        PreloadItem(
            citation=0,
            kind="memory" if kind == "memory" else "passage",
            text=p.text,
            title=p.title,
            document_id=p.document_id,
            source_system=p.source_system,
            external_id=p.external_id,
            url=p.url,
            event_time=p.event_time,
            score=p.score,
            scope=p.scope,
        )
        for kind, p in chosen
    ]
    # Truncation only cuts the end of a line, so an item's text is what follows its prefix in the packed line.
    prefixes = [_prefix(i + 1, c) for i, c in enumerate(candidates)]
    # Newlines between lines and a citation number that shrinks after a drop are not in the packer's count:
    # reserve a character per line for them so the block stays within the budget.
    room = max(1, budget - math.ceil(len(candidates) / CHARS_PER_TOKEN))
    packed = pack([PackItem(str(i), "passage", prefixes[i] + c.text) for i, c in enumerate(candidates)], room)
    items: list[PreloadItem] = []
    lines: list[str] = []
    for kept in packed.kept:
        i = int(kept.key)
        item = candidates[i].model_copy(update={"citation": len(items) + 1})
        item = item.model_copy(update={"text": kept.text[len(prefixes[i]) :]})
        items.append(item)
        lines.append(_prefix(item.citation, item) + item.text)
    block = "\n".join(lines)
    return PreloadResponse(block=block, items=items, tokens=estimate_tokens(block), considered=len(found.passages))
