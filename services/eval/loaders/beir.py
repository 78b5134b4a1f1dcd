"""BEIR layout (``corpus.jsonl``, ``queries.jsonl``, ``qrels/<split>.tsv``) → the common layout.

Why: document retrieval was tuned on chat only (issue 26); a BEIR set (e.g. SciFact: claims over scientific
abstracts) is the document-style counterpart. ``orgmem eval convert beir SRC OUT`` writes ``OUT/events.jsonl``
and ``OUT/queries.jsonl``; ``orgmem eval live --dataset OUT`` then sends the abstracts as a document connector
would (kind ``document``, title in ``meta.title``, the abstract as text, no author: BEIR has none).

Rules (all tested):

- a corpus line is ``{"_id", "title", "text"}`` (``doc_id`` is accepted for ``_id``); event id
  ``<dataset>/<_id>``; every document and every query share one group ``<dataset>:all`` (the set has no ACL);
  the timestamp is one fixed instant (BEIR has no time, so recency is neutral).
- a qrels line is ``query-id  corpus-id  score`` with a header; ``score > 0`` is relevant.
- a query whose relevant documents are not all in the corpus is dropped and counted (a corpus may be a subset:
  a half-present gold would score the subset, not the ranking).
- the split is the qrels file's name; without a ``dev.tsv`` the ``train`` queries are halved by a hash of their
  id into ``train`` and ``dev`` (deterministic), so tuning never needs the test split. ``category`` = the split,
  so one live run reports each split on its own row.
"""

from __future__ import annotations

import csv
import hashlib
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from services.eval.datasets import DatasetFormatError

TIMESTAMP = "2024-01-01T00:00:00+00:00"


@dataclass
class ConvertStats:
    documents: int = 0
    queries: dict[str, int] = field(default_factory=dict)
    dropped: dict[str, int] = field(default_factory=dict)


def _error(path: Path, line: int, message: str, field: str | None = None) -> DatasetFormatError:
    return DatasetFormatError(f"{path}:{line}: {message}", path=str(path), line=line, field=field)


def _jsonl(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    with path.open(encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if line.strip():
                try:
                    row = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise _error(path, n, f"invalid JSON ({exc.msg})") from exc
                if not isinstance(row, dict):
                    raise _error(path, n, "expected a JSON object")
                yield n, row


def _doc_id(row: dict[str, Any], path: Path, n: int) -> str:
    value = row.get("_id", row.get("doc_id"))
    if value is None or str(value).strip() == "":
        raise _error(path, n, "field _id is missing", "_id")
    return str(value)


def read_qrels(path: Path) -> dict[str, set[str]]:
    """``query-id → relevant corpus ids`` (score > 0) of one qrels file."""
    out: dict[str, set[str]] = {}
    with path.open(encoding="utf-8") as f:
        for n, row in enumerate(csv.reader(f, delimiter="\t"), 1):
            if not row or (n == 1 and not row[-1].strip().lstrip("-").isdigit()):
                continue
            if len(row) < 3:
                raise _error(path, n, "expected query-id, corpus-id, score")
            qid, doc, score = row[0].strip(), row[1].strip(), row[2].strip()
            try:
                relevant = float(score) > 0
            except ValueError as exc:
                raise _error(path, n, f"field score is not a number: {score!r}", "score") from exc
            if relevant:
                out.setdefault(qid, set()).add(doc)
    return out


def dev_half(qid: str) -> bool:
    """Deterministic half of the ``train`` queries that becomes ``dev`` when the set has no dev qrels."""
    return hashlib.sha256(qid.encode()).digest()[0] % 2 == 1


def splits(src: Path) -> dict[str, dict[str, set[str]]]:
    """Every ``qrels/<split>.tsv``; ``train`` halved into ``train``/``dev`` when no ``dev.tsv`` exists."""
    found = {p.stem: read_qrels(p) for p in sorted((src / "qrels").glob("*.tsv"))}
    if not found:
        raise _error(src / "qrels", 0, "no <split>.tsv file")
    if "dev" not in found and "train" in found:
        train = found.pop("train")
        found["train"] = {q: d for q, d in train.items() if not dev_half(q)}
        found["dev"] = {q: d for q, d in train.items() if dev_half(q)}
    return found


def convert(src: str | Path, out: str | Path, *, dataset: str = "scifact") -> ConvertStats:
    """Write ``out/events.jsonl`` and ``out/queries.jsonl`` from the BEIR folder ``src``."""
    src, out = Path(src), Path(out)
    out.mkdir(parents=True, exist_ok=True)
    group, stats = f"{dataset}:all", ConvertStats()
    corpus = src / "corpus.jsonl"
    ids: set[str] = set()
    with (out / "events.jsonl").open("w", encoding="utf-8") as ev:
        for n, row in _jsonl(corpus):
            doc = _doc_id(row, corpus, n)
            text = str(row.get("text") or "").strip()
            if not text:
                raise _error(corpus, n, "field text is empty", "text")
            title = str(row.get("title") or "").strip()
            event = {
                "id": f"{dataset}/{doc}",
                "dataset": dataset,
                "kind": "document",
                "author": None,
                "timestamp": TIMESTAMP,
                "groups": [group],
                "thread": None,
                "text": text,
                "meta": {"title": title} if title else {},
            }
            ev.write(json.dumps(event) + "\n")
            ids.add(doc)
    stats.documents = len(ids)
    texts = {_doc_id(r, src / "queries.jsonl", n): str(r.get("text") or "") for n, r in _jsonl(src / "queries.jsonl")}
    with (out / "queries.jsonl").open("w", encoding="utf-8") as qf:
        for split, qrels in splits(src).items():
            for qid in sorted(qrels, key=lambda q: (len(q), q)):
                gold = qrels[qid]
                if qid not in texts or not gold <= ids:
                    stats.dropped[split] = stats.dropped.get(split, 0) + 1
                    continue
                query = {
                    "qid": f"{dataset}/{split}/{qid}",
                    "dataset": dataset,
                    "split": split,
                    "query": texts[qid],
                    "gold_ids": sorted(f"{dataset}/{d}" for d in gold),
                    "category": split,
                    "groups": [group],
                    "as_of": None,
                    "meta": {"source_qid": qid},
                }
                qf.write(json.dumps(query) + "\n")
                stats.queries[split] = stats.queries.get(split, 0) + 1
    return stats
