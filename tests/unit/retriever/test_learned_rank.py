"""The learned ranker: feature rows, the fallback when no model is configured, the re-ordering, and a training
run that is reproducible (same data and seed, same file hash) and never uses a test split."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import MappingProxyType
from typing import Any

import pytest

from retriever import learned_rank
from retriever.hits import Hit, RankedHit
from retriever.learned_rank import FEATURES, Candidate, LearnedRanker, features
from services.eval import ranker_train

T0 = datetime(2024, 1, 10, tzinfo=UTC)


def _rh(cid: str, doc: str, score: float, ranks: dict[str, int], boosts: dict[str, float], age: int = 0) -> RankedHit:
    hit = Hit(cid, doc, cid, None, f"text {cid}", T0 - timedelta(days=age), "org")
    return RankedHit(hit, score, score / 2, MappingProxyType(ranks), MappingProxyType(boosts))


def _ranked() -> list[RankedHit]:
    return [
        _rh("a", "d1", 1.0, {"lexical": 1, "dense": 2}, {"tier": 0.6, "title": 1.25}),
        _rh("b", "d1", 0.8, {"dense": 1}, {"tier": 0.6, "author": 1.5}, age=9),
        _rh("c", "d2", 0.5, {"lexical": 2}, {"tier": 0.6}),
    ]


CANDS = {
    "a": Candidate("document", "aspirin lowers infarction risk", "x/1"),
    "b": Candidate("document", "statins", "x/1"),
    "c": Candidate("message", "aspirin", "x/2"),
}
SCORES = {"lexical": {"a": 4.0, "c": 2.0}, "dense": {"a": 0.5, "b": 0.7}}


def test_feature_rows_follow_the_named_features() -> None:
    rows = features("does aspirin lower infarction risk?", _ranked(), CANDS, SCORES)
    assert len(rows) == 3 and all(len(r) == len(FEATURES) for r in rows)
    f = [dict(zip(FEATURES, r, strict=True)) for r in rows]
    assert f[0]["lex_score"] == 4.0 and f[0]["lex_rel"] == 1.0 and f[2]["lex_rel"] == 0.5
    assert f[1]["lex_score"] == 0.0 and f[1]["lex_inv_rank"] == 0.0 and f[2]["lex_inv_rank"] == 0.5
    assert f[1]["dense_gap"] == 0.0 and f[0]["dense_gap"] == pytest.approx(-0.2) and f[2]["dense_gap"] == -1.0
    assert f[0]["title"] == 1.25 and f[1]["author"] == 1.5 and f[2]["title"] == 1.0
    assert f[0]["is_document"] == 1.0 and f[2]["is_message"] == 1.0
    assert f[0]["doc_candidates"] == 2.0 and f[2]["doc_candidates"] == 1.0
    assert f[1]["log_age_vs_newest"] > 0 and f[0]["log_age_vs_newest"] == 0.0
    assert f[0]["inv_position"] == 1.0 and f[2]["inv_position"] == pytest.approx(1 / 3)
    assert f[0]["term_overlap"] == 0.75 and f[1]["term_overlap"] == 0.0
    assert features("q", [], CANDS, SCORES) == []


class _Reverse:
    """A fake booster preferring the candidate further down."""

    def predict(self, data: Any) -> list[float]:
        return [-row[FEATURES.index("inv_position")] for row in data]


def test_rerank_reorders_and_keeps_the_score_scale() -> None:
    out = LearnedRanker(_Reverse(), "v1").rerank("q", _ranked(), CANDS, SCORES)
    assert [rh.hit.chunk_id for rh in out] == ["c", "b", "a"]
    assert [rh.score for rh in out] == [1.0, 0.8, 0.5]


def test_no_model_configured_means_no_ranker(tmp_path: Path) -> None:
    assert learned_rank.load(None) is None
    assert learned_rank.load("") is None
    with pytest.raises(FileNotFoundError):
        learned_rank.load(tmp_path / "missing.txt")


def test_a_model_of_other_features_is_refused() -> None:
    with pytest.raises(ValueError, match="features"):
        LearnedRanker(_Reverse(), "v1", features=("lex_score",))


def _data(n: int = 40) -> ranker_train.TrainingSet:
    data = ranker_train.TrainingSet()
    for q in range(n):
        rows = features(f"aspirin {q}", _ranked(), CANDS, SCORES)
        gold = {"x/2"} if q % 3 else {"x/1"}
        data.add(rows, [CANDS[c].external_id for c in "abc"], gold)
    data.add(rows, ["x/1", "x/1", "x/2"], {"x/9"})
    return data


def test_training_is_reproducible_and_the_file_is_versioned(tmp_path: Path) -> None:
    data = _data()
    assert data.skipped == 1 and len(data.groups) == 40
    one, two = ranker_train.train(data), ranker_train.train(data)
    assert learned_rank.model_hash(one) == learned_rank.model_hash(two)
    path = ranker_train.write_model(one, tmp_path, {"seed": 26})
    assert path.name == f"ranker-{learned_rank.model_hash(one)}.txt"
    meta = json.loads(path.with_suffix(".txt.json").read_text())
    assert meta["version"] == learned_rank.model_hash(one) and meta["features"] == list(FEATURES)
    loaded = learned_rank.load(path)
    assert loaded is not None and loaded.version == meta["version"]
    assert len(loaded.rerank("aspirin", _ranked(), CANDS, SCORES)) == 3
    path.write_text(one + "\n")  # edited after training: its hash no longer matches the metadata
    with pytest.raises(ValueError, match="hash"):
        learned_rank.load(path)


def test_runs_never_train_on_test() -> None:
    spec = ranker_train.parse_run("abc:/data/locomo:dev:locomo:conv-26")
    assert (spec.tag, spec.dataset, spec.split, spec.group) == ("abc", Path("/data/locomo"), "dev", "locomo:conv-26")
    with pytest.raises(ValueError, match="test"):
        ranker_train.parse_run("abc:/data/scifact:test")
    with pytest.raises(ValueError, match="TAG:PATH:SPLIT"):
        ranker_train.parse_run("abc")
