"""Queries and scoring of a data set in the common JSONL layout: each event's visibility (its principals),
``queries.jsonl`` (or a gold file) as ``GoldQuery``, and scoring a predictions file against them."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from datetime import timedelta
from pathlib import Path

from pydantic import ValidationError

from services.eval.datasets import (
    DEFAULT_TIME_OFFSETS,
    RawQuery,
    _events_file,
    _format_error,
    group_principal,
    iter_raw_events,
    system_name,
    to_utc,
)
from services.eval.gold import (
    GoldQuery,
    Prediction,
    iter_json_lines,
    read_gold,
    read_predictions,
)
from services.eval.metrics import DEFAULT_KS, Report, Target, Visibility, score


def event_visibility(path: str | Path, *, limit: int | None = None) -> dict[str, frozenset[str]]:
    """Event id → group principals that may see it (for the leak check)."""
    return {
        raw.id: frozenset(group_principal(raw.dataset, g) for g in raw.groups)
        for _, raw in iter_raw_events(path, limit=limit)
    }


def any_visible(id_principals: Mapping[str, frozenset[str]], *, unknown_visible: bool = False) -> Visibility:
    """Passage rule: visible iff the viewer holds ANY of the id's principals.

    An id missing from ``id_principals`` (hallucinated, or from another corpus) counts as not
    visible, i.e. as a leak, unless ``unknown_visible``.
    """

    def visible(viewer: frozenset[str], doc: str) -> bool:
        principals = id_principals.get(doc)
        return unknown_visible if principals is None else not principals.isdisjoint(viewer)

    return visible


def iter_queries(
    path: str | Path, *, limit: int | None = None, time_offset: timedelta | None = None
) -> Iterator[GoldQuery]:
    """Common-layout ``queries.jsonl`` (a folder or the file) → ``GoldQuery``.

    ``gold_ids`` → ``expected_doc_ids``; ``groups`` → viewer groups (no user principal);
    ``as_of`` naive = UTC, shifted like the events; ``meta.mode`` / ``meta.subjects`` /
    ``meta.expected_claim_ids`` pass through when present.
    """
    file = _events_file(path, "queries.jsonl")
    for n, (line, obj) in enumerate(iter_json_lines(file)):
        if limit is not None and n >= limit:
            return
        try:
            raw = RawQuery.model_validate(obj)
            offset = DEFAULT_TIME_OFFSETS.get(system_name(raw.dataset), timedelta(0))
            offset = offset if time_offset is None else time_offset
            yield GoldQuery.model_validate(
                {
                    "qid": raw.qid,
                    "query": raw.query,
                    "category": raw.category,
                    "viewer": {"groups": [group_principal(raw.dataset, g) for g in raw.groups]},
                    "mode": raw.meta.get("mode"),
                    "subjects": raw.meta.get("subjects"),
                    "as_of": to_utc(raw.as_of, offset) if raw.as_of else None,
                    "expected_doc_ids": raw.gold_ids,
                    "expected_claim_ids": raw.meta.get("expected_claim_ids") or (),
                    "answer": None if raw.answer is None else str(raw.answer),
                }
            )
        except ValidationError as exc:
            raise _format_error(exc, "query field", file, line) from exc


def read_gold_any(path: str | Path) -> list[GoldQuery]:
    """Read gold in either format: ``GoldQuery`` lines, or common-layout queries (have ``gold_ids``)."""
    first = next(iter_json_lines(path), None)
    if first is not None and "gold_ids" in first[1]:
        return list(iter_queries(path))
    return read_gold(path)


def score_files(
    gold: str | Path,
    predictions: str | Path,
    *,
    events: str | Path | None = None,
    target: Target = "doc",
    ks: tuple[int, ...] = DEFAULT_KS,
) -> Report:
    """``orgmem eval score``: gold + predictions (+ events for the leak check) → ``Report``."""
    visibility = any_visible(event_visibility(events)) if events is not None else None
    preds: list[Prediction] = read_predictions(predictions)
    return score(read_gold_any(gold), preds, target=target, ks=ks, visibility=visibility)
