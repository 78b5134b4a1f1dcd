"""The BEIR converter (services/eval/loaders/beir.py): layout, dropped queries, the dev half, bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from services.eval.datasets import DatasetFormatError, iter_envelopes
from services.eval.loaders.beir import convert, dev_half


def _beir(tmp: Path, *, dev: bool = False) -> Path:
    src = tmp / "src"
    (src / "qrels").mkdir(parents=True)
    corpus = [
        {"_id": "10", "title": "Aspirin and the heart", "text": "Aspirin lowers the risk of infarction."},
        {"doc_id": "11", "text": "Statins reduce cholesterol."},
    ]
    (src / "corpus.jsonl").write_text("".join(json.dumps(r) + "\n" for r in corpus))
    queries = [{"_id": str(q), "text": f"claim {q}"} for q in range(1, 9)]
    (src / "queries.jsonl").write_text("".join(json.dumps(r) + "\n" for r in queries))
    (src / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n1\t10\t1\n2\t99\t1\n3\t11\t0\n")
    train = "query-id\tcorpus-id\tscore\n" + "".join(f"{q}\t1{q % 2}\t1\n" for q in range(4, 9))
    (src / "qrels" / "train.tsv").write_text(train)
    if dev:
        (src / "qrels" / "dev.tsv").write_text("query-id\tcorpus-id\tscore\n8\t11\t1\n")
    return src


def _lines(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_documents_as_a_connector_sends_them(tmp_path: Path) -> None:
    stats = convert(_beir(tmp_path), tmp_path / "out", dataset="sf")
    events = _lines(tmp_path / "out" / "events.jsonl")
    assert stats.documents == 2
    assert events[0] == {
        "id": "sf/10",
        "dataset": "sf",
        "kind": "document",
        "author": None,
        "timestamp": "2024-01-01T00:00:00+00:00",
        "groups": ["sf:all"],
        "thread": None,
        "text": "Aspirin lowers the risk of infarction.",
        "meta": {"title": "Aspirin and the heart"},
    }
    assert events[1]["meta"] == {}
    envs = list(iter_envelopes(tmp_path / "out", workspace="w"))
    doc = envs[0].document
    assert doc is not None and doc.kind.value == "document" and doc.title == "Aspirin and the heart"


def test_queries_keep_only_fully_present_gold_and_split_train_into_dev(tmp_path: Path) -> None:
    stats = convert(_beir(tmp_path), tmp_path / "out", dataset="sf")
    queries = _lines(tmp_path / "out" / "queries.jsonl")
    test = [q for q in queries if q["split"] == "test"]
    # q2's gold (99) is not in the corpus, q3 has only a score-0 line: neither is a query
    assert [q["qid"] for q in test] == ["sf/test/1"] and test[0]["gold_ids"] == ["sf/10"]
    assert stats.dropped == {"test": 1}
    halves = {q["qid"]: q["split"] for q in queries if q["split"] != "test"}
    assert halves == {
        f"sf/{'dev' if dev_half(str(q)) else 'train'}/{q}": "dev" if dev_half(str(q)) else "train" for q in range(4, 9)
    }
    assert all(q["category"] == q["split"] for q in queries)


def test_an_existing_dev_split_is_kept(tmp_path: Path) -> None:
    convert(_beir(tmp_path, dev=True), tmp_path / "out", dataset="sf")
    queries = _lines(tmp_path / "out" / "queries.jsonl")
    assert [q["qid"] for q in queries if q["split"] == "dev"] == ["sf/dev/8"]
    assert len([q for q in queries if q["split"] == "train"]) == 5


def test_bad_input_names_the_field(tmp_path: Path) -> None:
    src = _beir(tmp_path)
    (src / "corpus.jsonl").write_text('{"title": "no id", "text": "x"}\n')
    with pytest.raises(DatasetFormatError, match="_id"):
        convert(src, tmp_path / "out")
    (src / "corpus.jsonl").write_text('{"_id": "1"}\n')
    with pytest.raises(DatasetFormatError, match="text"):
        convert(src, tmp_path / "out")
    (src / "corpus.jsonl").write_text('{"_id": "1", "text": "t"}\n')
    (src / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n1\t1\tyes\n")
    with pytest.raises(DatasetFormatError, match="score"):
        convert(src, tmp_path / "out")
