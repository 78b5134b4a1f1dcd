"""Pure composition helpers of ``retrieve_context`` (no I/O): time axes, arm presets, packing order,
and diagnostics that never name anything the viewer cannot see."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from dataclasses import replace as _replace
from datetime import datetime, timedelta
from typing import Any

from retriever.hits import DEFAULT, DENSE_ONLY, LEXICAL_ONLY, RRF_ONLY, RankConfig
from retriever.packing import PackItem, PackResult, pack
from retriever.temporal_plan import TemporalPlan, plan_temporal
from schemas.graph import EntityBrief, Fact, Path
from schemas.tools import PassageFilters

ARM_PRESETS: dict[str, tuple[tuple[str, ...], RankConfig]] = {
    # the product: every arm (semantic = the dense model scores every text candidate), CC fusion,
    # tier boost, floor-gated cascade, dedup, autocut
    "full": (("dense", "lexical", "semantic", "relational"), DEFAULT),
    # evaluation baselines: plain arms (hybrid = the seed's RRF 1:1), no cascade and no autocut
    "hybrid": (("dense", "lexical"), RRF_ONLY),
    "lexical": (("lexical",), _replace(LEXICAL_ONLY, cascade=False, autocut=False)),
    "dense": (("dense",), _replace(DENSE_ONLY, cascade=False, autocut=False)),
}


@dataclass(frozen=True, slots=True)
class TimeAxes:
    """The effective temporal axes of one call: host values win, the planner fills the gaps."""

    as_of: datetime | None
    believed_as_of: datetime | None
    grain: str | None
    date_from: datetime | None
    date_to: datetime | None
    diff_range: tuple[datetime, datetime] | None
    plan: TemporalPlan | None
    source: str  # "host" | "planner" | "none"
    boost_range: tuple[datetime, datetime] | None = None
    """A date that says *which* document is meant: a soft ranking boost for passages of that period, no filter."""


MAX_STATE_CHARS = 500
_STATE_VERB = re.compile(
    r"\b(?:who|whom|which|what|where|how many|how much)\b.{0,80}?\b(?:is|are|was|were|led|leads?|leading|"
    r"owned|owns?|ran|runs?|managed|manages?|headed|heads?|in charge|responsible|reported to|reports? to|"
    r"the (?:lead|owner|manager|head|status|price|target|budget))\b",
    re.IGNORECASE,
)
_DOC_NOUN = re.compile(
    r"\b(?:report|memo|note|notes|meeting|standup|review|email|mail|message|post|announcement|doc|document|"
    r"call|sync|retro|retrospective|demo|presentation|ticket|pr|thread|chat|minutes|update|summary|"
    r"said|say|says|mention(?:ed)?|discuss(?:ed)?|wrote|posted|shared|talk(?:ed)?|told|ask(?:ed)?)\b",
    re.IGNORECASE,
)


def is_state_question(query: str, plan: TemporalPlan) -> bool:
    """A question about the state of the world at a time ("who led Search in March 2024?", "what was the
    accuracy at the end of March 2025?"), not about which document ("the report on 2023-10-22", "what did Dana
    say in March 2024"): a who/what … is/was/led/owned … question and no document word or speech verb in it."""
    text = " ".join(query.split())[:MAX_STATE_CHARS]
    return bool(_STATE_VERB.search(text)) and not _DOC_NOUN.search(text)


def resolve_time(
    query: str,
    filters: PassageFilters,
    *,
    as_of: datetime | None,
    believed_as_of: datetime | None,
    grain: str | None,
    now: datetime,
) -> TimeAxes:
    """Host ``as_of``/``believed_as_of`` win; without them the query text is planned.

    - An ambiguous plan (missing year, several unrelated dates, reversed range) sets nothing.
    - A point plan (``as of A``) sets ``as_of``.
    - An explicit window ``between A and B`` or ``since|after A`` bounds passage ``event_time`` where the
      host left the date filters empty, and asks for fact diffs over it.
    - ``before|until A`` closes the window at A (reported in the plan) but filters nothing: the answer to
      "what was X called before October 2024?" is the note of the change at A that says what it *was*
      (demo query nw-q21), so A's own period becomes ``boost_range``.
    - A single period (``on A``, ``in A``, a bare date) bounds facts and passages (as ``as_of`` = its last
      instant) only in a question about the state of the world at that time (:func:`is_state_question`);
      otherwise it says which document is meant and becomes ``boost_range``: a soft boost, never a filter.
    """
    if as_of is not None or believed_as_of is not None:
        return TimeAxes(as_of, believed_as_of, grain, filters.date_from, filters.date_to, None, None, "host")
    plan = plan_temporal(query, now)
    if plan.kind == "none":
        return TimeAxes(None, None, grain, filters.date_from, filters.date_to, None, plan, "none")
    eff_grain = grain or plan.grain
    if plan.ambiguities:
        return TimeAxes(None, None, eff_grain, filters.date_from, filters.date_to, None, plan, "planner")
    if plan.kind == "point":
        return TimeAxes(plan.as_of, None, eff_grain, filters.date_from, filters.date_to, None, plan, "planner")
    start, end = plan.range_start, plan.range_end
    if plan.kind == "before" and plan.anchor is not None:
        # "what was X called before October 2024?": the evidence is the note of the change at A that says
        # what it *was* ("Atlas is renamed Compass", dated in October): no filter, A's own period is boosted
        return TimeAxes(None, None, eff_grain, filters.date_from, filters.date_to, None, plan, "planner", plan.anchor)
    if plan.is_window and (start is not None or end is not None):
        diff = (start, end) if start is not None and end is not None else None
        return TimeAxes(
            None,
            None,
            eff_grain,
            filters.date_from or start,
            filters.date_to or end,
            diff,
            plan,
            "planner",
        )
    if start is not None and end is not None:
        if is_state_question(query, plan):
            point = min(end - timedelta(microseconds=1), now)
            return TimeAxes(point, None, eff_grain, filters.date_from, filters.date_to, None, plan, "planner")
        return TimeAxes(
            None, None, eff_grain, filters.date_from, filters.date_to, (start, end), plan, "planner", (start, end)
        )
    return TimeAxes(None, None, eff_grain, filters.date_from, filters.date_to, None, plan, "planner")


def plan_dict(axes: TimeAxes) -> dict[str, Any] | None:
    p = axes.plan
    if p is None:
        return {
            "source": "host",
            "as_of": _iso(axes.as_of),
            "believed_as_of": _iso(axes.believed_as_of),
            "grain": axes.grain,
        }
    return {
        "source": axes.source,
        "kind": p.kind,
        "grain": axes.grain,
        "as_of": _iso(p.as_of),
        "range_start": _iso(p.range_start),
        "range_end": _iso(p.range_end),
        "matched_text": p.matched_text,
        "form": p.form,
        "effect": _effect(axes),
        "ambiguities": list(p.ambiguities),
    }


def _effect(axes: TimeAxes) -> str:
    """What the plan did to the search: ``filter`` (window), ``as_of`` (state at a time), ``boost`` or ``none``."""
    if axes.boost_range is not None:
        return "boost"
    if axes.plan is not None and axes.plan.is_window and not axes.plan.ambiguities:
        return "filter"
    if axes.as_of is not None:
        return "as_of"
    return "none"


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value else None


def fact_text(fact: Fact) -> str:
    """One line per fact for packing and synthesis: ``subject predicate object [valid_from..valid_to]``
    (times as the response writes them)."""
    when = fact.model_dump(mode="json", include={"valid_from", "valid_to"})
    obj = _label(fact.object) or (fact.value or "")
    span = ""
    if when.get("valid_from") or when.get("valid_to"):
        span = f" [{when.get('valid_from') or '…'}..{when.get('valid_to') or '…'}]"
    return f"{_label(fact.subject)} {fact.predicate} {obj}{span}".strip()


def _label(end: EntityBrief | None) -> str:
    return "" if end is None else (end.name or str(end.id))


def path_text(path: Path) -> str:
    """A path as the compact JSON the response carries (what packing counts)."""
    return json.dumps(path.model_dump(mode="json"), sort_keys=True, separators=(",", ":"), default=str)


def packing_order(
    mode: str,
    passages: Sequence[tuple[str, str]],
    facts: Sequence[tuple[str, str]],
    paths: Sequence[tuple[str, str]],
) -> list[PackItem]:
    """Priority order: ``vector_first`` passages → facts → paths; ``graph_first`` facts → paths → passages;
    ``joint`` round-robin passage, fact, path."""
    p = [PackItem(k, "passage", t) for k, t in passages]
    f = [PackItem(k, "fact", t) for k, t in facts]
    w = [PackItem(k, "path", t) for k, t in paths]
    if mode == "graph_first":
        return f + w + p
    if mode == "joint":
        out: list[PackItem] = []
        for i in range(max(len(p), len(f), len(w))):
            out += [lst[i] for lst in (p, f, w) if i < len(lst)]
        return out
    return p + f + w


def pack_context(
    mode: str,
    max_tokens: int | None,
    passages: Sequence[tuple[str, str]],
    facts: Sequence[tuple[str, str]],
    paths: Sequence[tuple[str, str]],
) -> PackResult:
    return pack(packing_order(mode, passages, facts, paths), max_tokens)


def packing_diagnostics(result: PackResult, max_tokens: int | None) -> dict[str, Any]:
    return {
        "max_tokens": max_tokens,
        "used_tokens": result.used_tokens,
        "decisions": [
            {"key": d.key, "kind": d.kind, "action": d.action, "tokens": d.tokens, "reason": d.reason}
            for d in result.decisions
        ],
    }


def fusion_diagnostics(diag: Mapping[str, Any], visible: set[str]) -> dict[str, Any]:
    """``fuse_and_rank`` diagnostics restricted to chunk ids the viewer can see.

    Arms only ever hold ACL-filtered ids, but a chunk can vanish between the arm query and the hit
    fetch (tombstone, ACL change): such ids are reported as a count, never by value.
    """
    out = {k: v for k, v in diag.items() if k != "missing_hits"}
    out["missing_hits"] = len(diag.get("missing_hits") or [])
    out["below_floor"] = [i for i in diag.get("below_floor") or [] if i in visible]
    out["dropped_duplicates"] = [
        d for d in diag.get("dropped_duplicates") or [] if d["chunk_id"] in visible and d["kept"] in visible
    ]
    return out


def relax_planner_bounds(axes: TimeAxes, filters: PassageFilters) -> TimeAxes | None:
    """``axes`` without the passage bounds the temporal planner added (a state question's ``as_of``, a window's
    dates), the plan's period as the boost instead; None when the planner bounded nothing (the host's own bounds
    are kept) or the query said ``as of A`` explicitly (a point in time: an empty answer is the answer)."""
    if axes.source != "planner" or axes.plan is None or axes.plan.kind == "point":
        # an explicit "as of A" asks for the state at A: nothing then is the answer, later passages are not
        return None
    if axes.as_of is None and axes.date_from == filters.date_from and axes.date_to == filters.date_to:
        return None
    plan = axes.plan
    span = axes.boost_range
    if span is None and plan.range_start is not None and plan.range_end is not None:
        span = (plan.range_start, plan.range_end)
    if span is None and plan.anchor is not None:
        span = plan.anchor
    return _replace(axes, as_of=None, date_from=filters.date_from, date_to=filters.date_to, boost_range=span)
