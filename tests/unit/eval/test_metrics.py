"""Hand-computed cases for the retrieval metrics, aggregation and the leak rate."""

from __future__ import annotations

import json
import math

import pytest

from services.eval.dataset_queries import any_visible
from services.eval.gold import GoldQuery, Prediction
from services.eval.metrics import compare_table, score
from services.eval.rank_metrics import hit_at, ndcg_at, precision_at, rank, recall_at, reciprocal_rank

G1 = "group:00000000-0000-0000-0000-000000000001"
G2 = "group:00000000-0000-0000-0000-000000000002"


def _q(qid: str, expected: list[str], category: str = "single_hop", groups: tuple[str, ...] = (G1,)) -> GoldQuery:
    return GoldQuery(
        qid=qid,
        query=f"question {qid}",
        category=category,
        viewer={"groups": groups},
        expected_doc_ids=expected,
    )


def _p(qid: str, ids: list[str], scores: list[float] | None = None) -> Prediction:
    return Prediction(qid=qid, doc_ids=ids, doc_scores=scores)


# --- per-query metrics ----------------------------------------------------------------------


def test_mixed_ranking_hand_computed() -> None:
    ranked = ["x", "a", "y", "b"]
    rel = frozenset({"a", "b", "c"})
    assert hit_at(ranked, rel, 1) == 0.0
    assert hit_at(ranked, rel, 5) == 1.0
    assert recall_at(ranked, rel, 1) == 0.0
    assert recall_at(ranked, rel, 5) == pytest.approx(2 / 3)
    assert precision_at(ranked, rel, 1) == 0.0
    assert precision_at(ranked, rel, 5) == pytest.approx(2 / 5)  # denominator is k, not len(ranked)
    assert reciprocal_rank(ranked, rel) == pytest.approx(1 / 2)
    dcg = 1 / math.log2(3) + 1 / math.log2(5)
    idcg = 1 + 1 / math.log2(3) + 1 / math.log2(4)
    assert ndcg_at(ranked, rel) == pytest.approx(dcg / idcg)
    assert ndcg_at(ranked, rel) == pytest.approx(0.49819, abs=1e-5)


def test_perfect_ranking_scores_one() -> None:
    rel = frozenset({"a", "b"})
    assert ndcg_at(["a", "b", "z"], rel) == pytest.approx(1.0)
    assert reciprocal_rank(["a", "b"], rel) == 1.0
    assert recall_at(["a", "b"], rel, 1) == 0.5


def test_cutoff_excludes_rank_eleven() -> None:
    ranked = [f"n{i}" for i in range(10)] + ["a"]
    rel = frozenset({"a"})
    assert reciprocal_rank(ranked, rel) == 0.0
    assert ndcg_at(ranked, rel) == 0.0


def test_ideal_dcg_is_capped_at_k() -> None:
    rel = frozenset(f"r{i}" for i in range(15))
    assert ndcg_at([f"r{i}" for i in range(10)], rel) == pytest.approx(1.0)


def test_empty_results_score_zero() -> None:
    rel = frozenset({"a"})
    assert hit_at([], rel, 10) == recall_at([], rel, 10) == precision_at([], rel, 10) == 0.0
    assert reciprocal_rank([], rel) == ndcg_at([], rel) == 0.0


# --- duplicates and ties --------------------------------------------------------------------


def test_duplicates_keep_first_occurrence_and_free_the_slot() -> None:
    assert rank(["a", "b", "a", "c", "b"]) == ["a", "b", "c"]
    report = score([_q("q", ["b"])], [_p("q", ["a", "a", "b"])], ks=(1, 2))
    m = report.overall
    assert m is not None
    assert m.mrr == pytest.approx(1 / 2)  # not 1/3: the duplicate "a" does not take rank 2
    assert m.precision[2] == pytest.approx(1 / 2)
    assert m.hit[1] == 0.0


def test_duplicate_relevant_id_is_counted_once() -> None:
    report = score([_q("q", ["b", "c"])], [_p("q", ["b", "b", "b"])], ks=(3,))
    m = report.overall
    assert m is not None
    assert m.recall[3] == pytest.approx(1 / 2)
    assert m.precision[3] == pytest.approx(1 / 3)


def test_duplicate_keeps_first_score() -> None:
    assert rank(["a", "b", "a"], [0.1, 0.5, 0.9]) == ["b", "a"]


def test_ties_given_order_is_stable() -> None:
    assert rank(["a", "b", "c"], [0.5, 0.9, 0.9]) == ["b", "c", "a"]
    assert rank(["c", "b", "a"], [0.9, 0.9, 0.1], relevant={"c"}) == ["c", "b", "a"]


def test_ties_pessimistic_puts_relevant_last_within_a_tie() -> None:
    ranked = rank(["c", "b", "a"], [0.9, 0.9, 0.1], relevant={"c"}, ties="pessimistic")
    assert ranked == ["b", "c", "a"]
    given = score([_q("q", ["c"])], [_p("q", ["c", "b", "a"], [0.9, 0.9, 0.1])])
    pessimistic = score([_q("q", ["c"])], [_p("q", ["c", "b", "a"], [0.9, 0.9, 0.1])], ties="pessimistic")
    assert given.overall is not None and pessimistic.overall is not None
    assert given.overall.mrr == 1.0
    assert pessimistic.overall.mrr == pytest.approx(0.5)


def test_scores_must_match_ids() -> None:
    with pytest.raises(ValueError, match="one score per id"):
        Prediction(qid="q", doc_ids=["a", "b"], doc_scores=[1.0])


# --- aggregation, abstention, leak rate -----------------------------------------------------


def test_macro_average_per_category_and_overall() -> None:
    gold = [
        _q("q1", ["a"], "single_hop"),
        _q("q2", ["b"], "single_hop"),
        _q("q3", ["c", "d"], "multi_hop"),
    ]
    preds = [_p("q1", ["a"]), _p("q2", ["x", "b"]), _p("q3", ["c"])]
    report = score(gold, preds, ks=(1, 10))
    rows = {r.category: r for r in report.categories}
    single = rows["single_hop"].metrics
    multi = rows["multi_hop"].metrics
    assert single is not None and multi is not None and report.overall is not None
    assert single.mrr == pytest.approx((1 + 0.5) / 2)
    assert single.hit[1] == pytest.approx(0.5)
    assert multi.recall[10] == pytest.approx(0.5)
    assert report.overall.n == 3
    assert report.overall.recall[10] == pytest.approx((1 + 1 + 0.5) / 3)  # macro over queries
    assert report.overall.mrr == pytest.approx((1 + 0.5 + 1) / 3)


def test_abstention_category_reported_separately() -> None:
    gold = [_q("q1", ["a"]), _q("q2", ["b"], "adversarial")]
    report = score(gold, [_p("q1", ["a"]), _p("q2", ["x"])])
    assert report.overall is not None and report.all_with_gold is not None
    assert report.overall.n == 1 and report.overall.recall[10] == 1.0
    assert report.all_with_gold.n == 2 and report.all_with_gold.recall[10] == pytest.approx(0.5)
    adversarial = next(r for r in report.categories if r.category == "adversarial")
    assert adversarial.abstention and adversarial.metrics is not None and adversarial.metrics.recall[10] == 0.0


def test_queries_without_gold_are_excluded_from_averages() -> None:
    gold = [_q("q1", ["a"]), _q("q2", [], "acl"), _q("q3", [], "acl")]
    report = score(gold, [_p("q1", ["a"]), _p("q2", []), _p("q3", ["z", "y"])])
    assert report.overall is not None and report.overall.n == 1
    acl = next(r for r in report.categories if r.category == "acl")
    assert acl.metrics is None and acl.n_no_gold == 2
    assert report.abstention.n == 2
    assert report.abstention.returned_nothing == 1
    assert report.abstention.empty_rate == pytest.approx(0.5)
    assert report.abstention.mean_returned == pytest.approx(1.0)


def test_leak_rate_counts_queries_with_any_invisible_id() -> None:
    visibility = any_visible({"pub": frozenset({G1}), "priv": frozenset({G2})})
    gold = [_q("q1", ["pub"]), _q("q2", [], "acl"), _q("q3", ["pub"]), _q("q4", ["pub"], groups=(G1, G2))]
    preds = [
        _p("q1", ["pub"]),
        _p("q2", ["priv", "priv"]),  # leaks, counted once
        _p("q3", ["pub", "ghost"]),  # unknown id counts as not visible
        _p("q4", ["priv", "pub"]),  # this viewer holds G2: no leak
    ]
    report = score(gold, preds, visibility=visibility)
    assert report.leak_rate == pytest.approx(2 / 4)
    assert report.leaked_qids == ("q2", "q3")
    by_qid = {s.qid: s for s in report.per_query}
    assert by_qid["q2"].leaked_ids == ("priv",)
    assert by_qid["q3"].leaked_ids == ("ghost",)
    assert next(r for r in report.categories if r.category == "acl").n_leaked == 1


def test_leak_rate_zero_and_unmeasured() -> None:
    gold = [_q("q1", ["pub"])]
    assert score(gold, [_p("q1", ["pub"])], visibility=any_visible({"pub": frozenset({G1})})).leak_rate == 0.0
    assert score(gold, [_p("q1", ["pub"])]).leak_rate is None
    lenient = any_visible({}, unknown_visible=True)
    assert score(gold, [_p("q1", ["other"])], visibility=lenient).leak_rate == 0.0


def test_missing_and_unknown_predictions() -> None:
    report = score([_q("q1", ["a"]), _q("q2", ["b"])], [_p("q1", ["a"]), _p("zz", ["a"])])
    assert report.missing_predictions == ("q2",)
    assert report.unknown_predictions == ("zz",)
    assert report.overall is not None and report.overall.hit[10] == pytest.approx(0.5)


def test_claim_target_scores_claim_ids() -> None:
    gold = [GoldQuery(qid="q", query="who?", expected_claim_ids=["c1"], expected_doc_ids=["d1"])]
    pred = [Prediction(qid="q", doc_ids=["d9"], claim_ids=["c0", "c1"])]
    report = score(gold, pred, target="claim")
    assert report.overall is not None and report.overall.mrr == pytest.approx(0.5)


def test_invalid_ks() -> None:
    with pytest.raises(ValueError):
        score([_q("q", ["a"])], [], ks=(0,))


# --- rendering ------------------------------------------------------------------------------


def test_report_table_json_and_comparison() -> None:
    gold = [_q("q1", ["a"]), _q("q2", ["b"], "adversarial"), _q("q3", [], "acl")]
    visibility = any_visible({"a": frozenset({G1}), "b": frozenset({G1})})
    good = score(gold, [_p("q1", ["a"]), _p("q2", ["b"]), _p("q3", [])], visibility=visibility)
    bad = score(gold, [_p("q1", ["x", "a"])])
    table = good.to_table()
    assert "overall" in table and "adversarial*" in table and "nDCG@10" in table
    assert "leak rate: 0.000 (0/3 queries) OK" in table
    assert "no expected ids (abstention): 1 queries" in table
    assert "missing predictions" in bad.to_table() and "not measured" in bad.to_table()
    data = json.loads(good.to_json())
    assert data["overall"]["n"] == 1 and data["leak_rate"] == 0.0 and "per_query" not in data
    assert "per_query" in json.loads(good.to_json(per_query=True))
    side = compare_table({"hybrid": good, "bm25": bad})
    header, *rows = side.splitlines()
    assert "hybrid" in header and "bm25" in header
    overall_mrr = next(r for r in rows if r.startswith("overall") and "mrr@10" in r)
    assert overall_mrr.split()[-2:] == ["1.000", "0.500"]
    assert rows[-1].split() == ["all", "leak_rate", "0.000", "-"]


# --- window recall --------------------------------------------------------------------------


def test_window_recall_counts_gold_inside_a_returned_window_and_leaves_per_turn_recall_alone() -> None:
    gold = [_q("q1", ["a", "n"]), _q("q2", ["z"])]
    windows = (("p", "a", "n"), ())  # a's window holds its neighbour n; x has none
    preds = [
        Prediction(qid="q1", doc_ids=("a", "x"), doc_windows=windows),
        Prediction(qid="q2", doc_ids=("y",), doc_windows=(("y", "z"),)),
    ]
    report = score(gold, preds, ks=(1, 10))
    per = {s.qid: s for s in report.per_query}
    assert per["q1"].recall[10] == pytest.approx(0.5)  # per turn: only a
    assert per["q1"].window_recall[10] == pytest.approx(1.0)  # n is in a's window
    assert per["q2"].window_recall[1] == pytest.approx(1.0)
    assert report.overall is not None
    assert report.overall.as_dict()["window_recall@10"] == pytest.approx(1.0)
    assert report.overall.recall[10] == pytest.approx(0.25)
    assert "window_recall@10" in compare_table({"full": report})


def test_window_recall_is_absent_without_windows() -> None:
    report = score([_q("q1", ["a"])], [_p("q1", ["a"])], ks=(10,))
    assert report.overall is not None and "window_recall@10" not in report.overall.as_dict()
    assert report.to_table()  # the plain table keeps its columns


def test_windows_must_match_ids() -> None:
    with pytest.raises(ValueError, match="doc_windows"):
        Prediction(qid="q", doc_ids=("a", "b"), doc_windows=(("a",),))
