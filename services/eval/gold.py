"""Gold-set and predictions formats (JSON Lines), with strict reading and writing.

Gold file: one ``GoldQuery`` per line::

    {"qid": "nw-q01", "query": "Who manages the Search team?", "category": "relational",
     "viewer": {"principal_id": null, "groups": ["group:<uuid>", ...]},
     "mode": null, "subjects": null, "as_of": "2024-10-01T00:00:00Z",
     "expected_doc_ids": ["nw/slack/0042"], "expected_claim_ids": [], "answer": "Lee Okafor"}

Predictions file: one ``Prediction`` per line::

    {"qid": "nw-q01", "doc_ids": ["nw/slack/0042", "nw/doc/atlas"], "claim_ids": []}

Rules:
- ids are the documents' ``source.external_id`` (for the common layout: the event ids) and the
  claims' ids; ``doc_ids`` / ``claim_ids`` are ranked, best first.
- optional ``doc_scores`` / ``claim_scores`` run parallel to the id lists; when given, the scorer
  re-sorts by score (see ``rank_metrics.rank``), so ties are treated by a documented rule.
- ``as_of`` is ISO 8601; a naive timestamp means UTC.
- unknown fields are rejected; duplicate ``qid`` in one file is an error.
- every reading error is a ``GoldFormatError`` naming the path, the 1-based line and the field.
  Blank lines are skipped.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationError,
    field_validator,
    model_validator,
)

from services.errors import InvalidPayloadError
from services.payload_errors import first_error
from services.viewer import Viewer

_UUID = r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
UserPrincipal = Annotated[str, StringConstraints(pattern=rf"^user:{_UUID}$")]
GroupPrincipal = Annotated[str, StringConstraints(pattern=rf"^group:{_UUID}$")]
RetrieveMode = Literal["vector_first", "graph_first", "joint"]


class GoldFormatError(InvalidPayloadError):
    """A gold or predictions line failed validation. Carries ``path``, ``line`` and ``field``."""

    def __init__(self, message: str, *, path: str, line: int, field: str | None = None) -> None:
        super().__init__(message, field=field, path=path, line=line)
        self.path = path
        self.line = line


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, str_strip_whitespace=True)


class GoldViewer(_Model):
    """Who asks, as a gold file spells it. ``principals()`` is what the leak check compares with each id's
    principals; ``viewer()`` is the ``services.viewer.Viewer`` a live run asks as."""

    principal_id: UserPrincipal | None = None
    groups: tuple[GroupPrincipal, ...] = ()

    @field_validator("groups")
    @classmethod
    def _sorted(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(sorted({g.lower() for g in v}))

    def principals(self) -> frozenset[str]:
        own = {self.principal_id.lower()} if self.principal_id else set()
        return frozenset(own | set(self.groups))

    def viewer(self) -> Viewer:
        return Viewer(principal_id=self.principal_id, groups=self.groups)


class GoldQuery(_Model):
    """One gold query. An empty expected list means "nothing relevant exists for this viewer"."""

    qid: Annotated[str, StringConstraints(min_length=1, max_length=256)]
    query: Annotated[str, StringConstraints(min_length=1)]
    category: Annotated[str, StringConstraints(min_length=1, max_length=64)] = "uncategorized"
    viewer: GoldViewer = Field(default_factory=GoldViewer)
    mode: RetrieveMode | None = None
    subjects: tuple[str, ...] | None = None
    as_of: datetime | None = None
    expected_doc_ids: tuple[str, ...] = ()
    expected_claim_ids: tuple[str, ...] = ()
    answer: str | None = None

    @field_validator("as_of")
    @classmethod
    def _utc(cls, v: datetime | None) -> datetime | None:
        if v is None:
            return None
        return v.replace(tzinfo=UTC) if v.tzinfo is None else v.astimezone(UTC)

    def expected(self, target: Literal["doc", "claim"]) -> tuple[str, ...]:
        return self.expected_doc_ids if target == "doc" else self.expected_claim_ids


class Prediction(_Model):
    """What a system returned for one query, ranked best first."""

    qid: Annotated[str, StringConstraints(min_length=1, max_length=256)]
    doc_ids: tuple[str, ...] = ()
    claim_ids: tuple[str, ...] = ()
    doc_scores: tuple[float, ...] | None = None
    claim_scores: tuple[float, ...] | None = None
    doc_windows: tuple[tuple[str, ...], ...] | None = None
    """Per doc id, the ids of its returned window (a conversation hit and its neighbours), for window recall."""

    @model_validator(mode="after")
    def _parallel(self) -> Prediction:
        for ids, scores, name in (
            (self.doc_ids, self.doc_scores, "doc_scores"),
            (self.claim_ids, self.claim_scores, "claim_scores"),
            (self.doc_ids, self.doc_windows, "doc_windows"),
        ):
            if scores is not None and len(scores) != len(ids):
                what = "window" if name == "doc_windows" else "score"
                raise ValueError(f"{name} must have one {what} per id ({len(scores)} != {len(ids)})")
        return self

    def ids(self, target: Literal["doc", "claim"]) -> tuple[str, ...]:
        return self.doc_ids if target == "doc" else self.claim_ids

    def scores(self, target: Literal["doc", "claim"]) -> tuple[float, ...] | None:
        return self.doc_scores if target == "doc" else self.claim_scores


M = TypeVar("M", GoldQuery, Prediction)


def iter_json_lines(path: str | Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield ``(line_number, object)`` for every non-blank line; malformed JSON names the line."""
    p = Path(path)
    with p.open(encoding="utf-8") as fh:
        for number, raw in enumerate(fh, start=1):
            if not raw.strip():
                continue
            try:
                obj = json.loads(raw)
            except json.JSONDecodeError as exc:
                raise GoldFormatError(f"invalid JSON: {exc.msg}", path=str(p), line=number) from exc
            if not isinstance(obj, dict):
                raise GoldFormatError("each line must be a JSON object", path=str(p), line=number)
            yield number, obj


def _field_of(exc: ValidationError) -> tuple[str, str]:
    return first_error(exc, root="<root>")


def _read(path: str | Path, model: type[M]) -> list[M]:
    items: list[M] = []
    seen: dict[str, int] = {}
    for number, obj in iter_json_lines(path):
        try:
            item = model.model_validate(obj)
        except ValidationError as exc:
            field, msg = _field_of(exc)
            raise GoldFormatError(
                f"{model.__name__} field {field!r}: {msg}", path=str(path), line=number, field=field
            ) from exc
        if item.qid in seen:
            raise GoldFormatError(
                f"duplicate qid {item.qid!r} (first on line {seen[item.qid]})",
                path=str(path),
                line=number,
                field="qid",
            )
        seen[item.qid] = number
        items.append(item)
    return items


def read_gold(path: str | Path) -> list[GoldQuery]:
    """Read a gold file in the ``GoldQuery`` format (use ``datasets.read_gold_any`` to sniff)."""
    return _read(path, GoldQuery)


def read_predictions(path: str | Path) -> list[Prediction]:
    return _read(path, Prediction)


def write_jsonl(path: str | Path, items: Iterable[BaseModel]) -> int:
    """Write models one per line (None fields omitted); returns the number of lines written."""
    n = 0
    with Path(path).open("w", encoding="utf-8") as fh:
        for item in items:
            fh.write(item.model_dump_json(exclude_none=True))
            fh.write("\n")
            n += 1
    return n


def write_gold(path: str | Path, queries: Iterable[GoldQuery]) -> int:
    return write_jsonl(path, queries)


def write_predictions(path: str | Path, predictions: Iterable[Prediction]) -> int:
    return write_jsonl(path, predictions)
