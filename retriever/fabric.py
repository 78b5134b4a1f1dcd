"""Graph-first fabric (seed 003) as the retrieval mode ``fabric``: the graph channel and passage search run in
parallel, and their results are joined.

- **Entity hints** from the query (capitalised spans, quoted phrases, ``@handles``) resolve to graph seeds under
  the viewer's ACL (``reads.resolve_about``), beside explicit ``subjects`` / ``about``.
- **Normalised**: passage relevance is its score over the best passage's; facts come from the graph as they are.
- **Cross-source near-duplicates**: a fact whose text is more than ``dedup_threshold`` (0.85) similar to a passage
  (token-set cosine) is not repeated — the passage is marked ``cross_validated``.
- **Cross-reference boost**: a passage that names an entity the graph returned gets ``boost`` (1.2x) on its
  relevance and the graph relations of that entity in its metadata (``graph_relations``).
- **Final score** = ``w_recency * recency + w_relevance * relevance + w_authority * authority`` with the seed's
  0.3 / 0.5 / 0.2 as the starting point; recency halves every ``half_life_days``; authority is 1 for a
  cross-validated passage, 0.5 for one naming a graph entity, 0 otherwise.
- Graph unavailable (an error in the channel): passages only, in search order, with a diagnostic.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import asyncpg

from retriever.compose import fact_text
from retriever.graph import reads
from retriever.graph.channel import GraphContext
from retriever.passages import PassageSearch
from schemas.graph import Fact
from schemas.tools import RetrieveContextRequest
from services.viewer import Principals

_CAPITALISED = re.compile(r"\b([A-Z][\w'’.-]*(?:\s+(?:of|the|de|van|von)?\s*[A-Z][\w'’.-]*){0,3})")
_QUOTED = re.compile(r"[\"“]([^\"”]{2,80})[\"”]")
_HANDLE = re.compile(r"@([\w.-]{2,64})")
_HYPHENATED = re.compile(r"(?<![@\w])([a-z0-9]+(?:-[a-z0-9]+)+)\b")  # "database-engineer", "pg-vector"
_WORD = re.compile(r"\w+")
# Capitalised words that start questions or sentences and name nothing.
_STOP_WORDS = (
    "what who whom whose when where why how which is are was were did does do the a an in on at of for to and or "
    "i we you he she they it my our your his her their this that these those tell show list give find"
)
_STOP = frozenset(_STOP_WORDS.split())
MAX_HINTS = 5


@dataclass(frozen=True, slots=True)
class FabricConfig:
    dedup_threshold: float = 0.85
    boost: float = 1.2
    w_recency: float = 0.3
    w_relevance: float = 0.5
    w_authority: float = 0.2
    half_life_days: float = 180.0


@dataclass(frozen=True, slots=True)
class Candidate:
    key: str
    text: str
    score: float
    event_time: datetime


@dataclass
class Joined:
    order: list[str]
    scores: dict[str, float]
    facts: list[Fact]
    relations: dict[str, list[dict[str, str]]] = field(default_factory=dict)
    cross_validated: set[str] = field(default_factory=set)
    diagnostics: dict[str, Any] = field(default_factory=dict)


def entity_hints(query: str) -> list[str]:
    """Names the query may be about, most specific first, at most ``MAX_HINTS``."""
    found: list[str] = []
    for m in _QUOTED.finditer(query):
        found.append(m.group(1).strip())
    for m in _HANDLE.finditer(query):
        found.append(m.group(1))
    for m in _HYPHENATED.finditer(query):
        found.append(m.group(1))
    for m in _CAPITALISED.finditer(query):
        words = m.group(1).split()
        while words and words[0].lower() in _STOP:
            words = words[1:]
        name = " ".join(words).strip(" .'’")
        if name and name.lower() not in _STOP:
            found.append(name)
    return list(dict.fromkeys(found))[:MAX_HINTS]


def _bag(text: str) -> Counter[str]:
    return Counter(w.lower() for w in _WORD.findall(text))


def similarity(a: str, b: str) -> float:
    """Cosine of the two texts' word-count vectors (case-folded)."""
    x, y = _bag(a), _bag(b)
    dot = sum(x[w] * y[w] for w in x.keys() & y.keys())
    nx, ny = math.sqrt(sum(v * v for v in x.values())), math.sqrt(sum(v * v for v in y.values()))
    return 0.0 if nx == 0 or ny == 0 else dot / (nx * ny)


def _names(fact: Fact) -> list[str]:
    return [end.name for end in (fact.subject, fact.object) if end is not None and end.name]


def _relation(fact: Fact) -> dict[str, str]:
    to = fact.object.name if fact.object is not None else (fact.value or "")
    return {"from": fact.subject.name, "relation": fact.predicate, "to": to}


def _mentions(text: str, name: str) -> bool:
    return re.search(rf"(?<!\w){re.escape(name)}(?!\w)", text, flags=re.IGNORECASE) is not None


def join(
    passages: Sequence[Candidate],
    facts: Sequence[Fact],
    *,
    now: datetime,
    config: FabricConfig = FabricConfig(),
    graph_ok: bool = True,
) -> Joined:
    """Join the two channels' results into one passage order with fabric scores (see the module rules)."""
    if not graph_ok or not passages:
        diag = {"graph_unavailable": not graph_ok, "boosted": {}, "cross_validated": [], "facts_merged": 0}
        return Joined([p.key for p in passages], {p.key: p.score for p in passages}, list(facts), diagnostics=diag)
    top = max(p.score for p in passages) or 1.0
    by_name: dict[str, list[dict[str, str]]] = {}
    for f in facts:
        for name in _names(f):
            by_name.setdefault(name, []).append(_relation(f))
    relations: dict[str, list[dict[str, str]]] = {}
    cross: set[str] = set()
    merged_facts: set[int] = set()
    for i, f in enumerate(facts):
        line = fact_text(f)
        best = max(passages, key=lambda p: similarity(line, p.text))
        if similarity(line, best.text) > config.dedup_threshold:
            cross.add(best.key)
            merged_facts.add(i)
    scores: dict[str, float] = {}
    boosted: dict[str, float] = {}
    for p in passages:
        relevance = max(0.0, p.score / top)
        named = [n for n in by_name if _mentions(p.text, n)]
        if named:
            relevance *= config.boost
            boosted[p.key] = config.boost
            relations[p.key] = [r for n in named for r in by_name[n]][:10]
        age_days = max(0.0, (now - p.event_time).total_seconds() / 86_400)
        recency = 0.5 ** (age_days / config.half_life_days)
        authority = 1.0 if p.key in cross else 0.5 if named else 0.0
        scores[p.key] = config.w_recency * recency + config.w_relevance * relevance + config.w_authority * authority
    order = sorted(scores, key=lambda k: (-scores[k], k))
    kept_facts = [f for i, f in enumerate(facts) if i not in merged_facts]
    diag = {
        "graph_unavailable": False,
        "boosted": boosted,
        "cross_validated": sorted(cross),
        "facts_merged": len(merged_facts),
        "weights": {"recency": config.w_recency, "relevance": config.w_relevance, "authority": config.w_authority},
    }
    return Joined(order, scores, kept_facts, relations, cross, diag)


# ---- the mode's two halves inside retrieve_context ------------------------------------------------------------


async def add_hint_seeds(
    conn: asyncpg.Connection, req: RetrieveContextRequest, viewer: Principals, ctx: GraphContext
) -> None:
    """The fabric's extra graph seeds: every visible entity the query names (``entity_hints``), added to ``ctx``
    after the explicit subjects / ``about`` (the retriever's ``_graph`` resolves those and expands them all)."""
    hints = entity_hints(req.query)
    for hint in hints:
        found = await reads.resolve_about(conn, workspace=req.workspace, viewer=viewer, about=hint)
        for m in found:
            if (m.type, m.id) not in ctx.seeds:
                ctx.seeds.append((m.type, m.id))
                ctx.resolved_about.append({"type": str(m.type), "id": str(m.id), "name": str(m.name)})
    ctx.notes["fabric_hints"] = ", ".join(hints) or "none"


def fabric_join(
    found: PassageSearch, graph: GraphContext, now: datetime
) -> tuple[PassageSearch, GraphContext, dict[str, Any]]:
    """Re-rank the passage search's hits with the graph's results (``join``); facts merged into a passage go."""
    by_id = {rh.hit.chunk_id: rh for rh in found.ranked}
    cands = [
        Candidate(
            rh.hit.chunk_id,
            found.rows[rh.hit.chunk_id].parent_text or rh.hit.text,
            found.scores.get(rh.hit.chunk_id, rh.score),
            found.rows[rh.hit.chunk_id].event_time,
        )
        for rh in found.ranked
        if rh.hit.chunk_id in found.rows
    ]
    joined = join(cands, graph.structured_facts, now=now, graph_ok="fabric" not in graph.notes)
    ranked = [dataclasses.replace(by_id[k], score=joined.scores[k]) for k in joined.order]
    found = dataclasses.replace(found, ranked=ranked, scores=found.scores | joined.scores)
    graph = dataclasses.replace(graph, structured_facts=joined.facts)
    diag = joined.diagnostics | {"relations": joined.relations, "hints": graph.notes.get("fabric_hints")}
    if "fabric" in graph.notes:
        diag["graph_error"] = graph.notes["fabric"]
    return found, graph, diag
