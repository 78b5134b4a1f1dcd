from __future__ import annotations

import math
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from retriever.boosts import (
    access_multiplier,
    autocut_index,
    dedup_by_content,
    floor_threshold,
    recency_decay,
    recency_multiplier,
    tier_multiplier,
    title_matches,
)
from retriever.fusion import cc_fuse, normalise, rrf_fuse
from retriever.hits import DEFAULT, DENSE_ONLY, LEXICAL_ONLY, RRF_ONLY, RRF_WEIGHTS, Hit, RankConfig, RankedHit
from retriever.ranking import fuse_and_rank
from retriever.terms import content_terms

NOW = datetime(2025, 6, 15, 12, 0, tzinfo=UTC)
# the seed's pipeline (RRF 1:1, autocut at a 20 % gap): the hand-computed cascade/autocut cases use it
# the pipeline's other steps, without the content priors and diversity (tested on their own below)
RRF = replace(
    DEFAULT,
    fusion="rrf",
    arm_weights=RRF_WEIGHTS,
    autocut_min_gap=0.2,
    doc_repeat=1.0,
    boilerplate_weight=0.0,
    low_info_terms=0,
)


def hit(
    cid: str,
    *,
    scope: str = "user",
    title: str | None = None,
    age: float = 100_000,
    access: int = 0,
    content_hash: str | None = None,
    text: str = "body",
) -> Hit:
    return Hit(
        chunk_id=cid,
        document_id=f"doc-{cid}",
        content_hash=content_hash or f"h-{cid}",
        title=title,
        text=text,
        event_time=NOW - timedelta(days=age),
        scope=scope,
        access_count=access,
    )


def ids(result_hits: tuple[RankedHit, ...]) -> list[str]:
    return [rh.hit.chunk_id for rh in result_hits]


# ---------------------------------------------------------------- RRF


def test_rrf_hand_computed_scores_and_order() -> None:
    # k = 60, ranks 1-based:
    #   a: dense 1, lexical 2         -> 1/61 + 1/62           = 0.0325224748
    #   b: dense 2, lexical 1         -> 1/62 + 1/61           = 0.0325224748 (tie with a)
    #   c: dense 3                    -> 1/63                  = 0.0158730159
    #   d: lexical 3, relational 1    -> 1/63 + 0.5/61         = 0.0240697371
    fused = rrf_fuse({"dense": ["a", "b", "c"], "lexical": ["b", "a", "d"], "relational": ["d"]})
    assert fused.scores["a"] == pytest.approx(0.0325224748, abs=1e-10)
    assert fused.scores["b"] == pytest.approx(0.0325224748, abs=1e-10)
    assert fused.scores["c"] == pytest.approx(0.0158730159, abs=1e-10)
    assert fused.scores["d"] == pytest.approx(0.0240697371, abs=1e-10)
    assert fused.order == ("a", "b", "d", "c")  # a/b tie broken by id
    assert fused.arm_ranks["a"] == {"dense": 1, "lexical": 2}
    assert fused.arm_ranks["d"] == {"lexical": 3, "relational": 1}


def test_rrf_custom_weights_and_k() -> None:
    # k = 0, weights dense 2, lexical 1: x = 2/1 + 1/2 = 2.5 ; y = 2/2 = 1.0 ; z = 1/1 = 1.0
    fused = rrf_fuse({"dense": ["x", "y"], "lexical": ["z", "x"]}, {"dense": 2.0, "lexical": 1.0}, k=0)
    assert fused.scores == {"x": 2.5, "y": 1.0, "z": 1.0}
    assert fused.order == ("x", "y", "z")


def test_rrf_ignores_unweighted_and_zero_weight_arms() -> None:
    fused = rrf_fuse({"dense": ["a"], "mystery": ["b"], "lexical": ["c"]}, {"dense": 1.0, "lexical": 0.0})
    assert set(fused.scores) == {"a"}


def test_rrf_repeated_id_keeps_first_rank() -> None:
    fused = rrf_fuse({"dense": ["a", "a", "b"]})
    assert fused.arm_ranks["a"] == {"dense": 1}
    assert fused.scores["a"] == pytest.approx(1 / 61)
    assert fused.scores["b"] == pytest.approx(1 / 63)  # b sits at position 3


def test_rrf_empty() -> None:
    fused = rrf_fuse({})
    assert fused.order == () and dict(fused.scores) == {}
    assert rrf_fuse({"dense": []}).order == ()


def test_rrf_is_independent_of_arm_dict_order() -> None:
    one = rrf_fuse({"dense": ["a", "b"], "lexical": ["b", "a"]})
    two = rrf_fuse({"lexical": ["b", "a"], "dense": ["a", "b"]})
    assert one.order == two.order == ("a", "b")


# ---------------------------------------------------------------- factors


def test_tier_multiplier_defaults_and_fallback() -> None:
    assert tier_multiplier("user") == 1.0
    assert tier_multiplier("team") == 0.9
    assert tier_multiplier("division") == 0.75
    assert tier_multiplier("org") == 0.6
    assert tier_multiplier("galaxy") == 0.6  # unknown -> "other"
    assert tier_multiplier("team", {"team": 0.5, "other": 0.1}) == 0.5
    assert tier_multiplier("org", {"team": 0.5, "other": 0.1}) == 0.1


@pytest.mark.parametrize(("age", "expected"), [(0, 1.4), (30, 1.2), (60, 1.1), (-10, 1.4)])
def test_recency_multiplier_values(age: float, expected: float) -> None:
    assert recency_multiplier(age) == pytest.approx(expected)


def test_recency_multiplier_bounded_and_monotonic() -> None:
    ages = [0, 0.5, 1, 7, 30, 90, 365, 3650, 1e6]
    values = [recency_multiplier(a) for a in ages]
    assert all(1.0 <= v <= 1.4 for v in values)
    assert values == sorted(values, reverse=True)
    assert values[0] > values[-1]


@pytest.mark.parametrize(
    ("count", "expected"),
    [
        (0, 1.0),
        (-3, 1.0),
        # 1 + 0.6 * ln(10) / ln(101) = 1 + 0.6 * 2.302585 / 4.615121 = 1.2993537
        (9, 1.2993537),
        (100, 1.6),
        (10**6, 1.6),
    ],
)
def test_access_multiplier_values(count: int, expected: float) -> None:
    assert access_multiplier(count) == pytest.approx(expected, abs=1e-6)


def test_access_multiplier_monotonic_and_bounded() -> None:
    values = [access_multiplier(n) for n in range(0, 500, 7)]
    assert values == sorted(values)
    assert all(1.0 <= v <= 1.6 for v in values)


def test_title_matches_uses_content_terms_only() -> None:
    assert content_terms("What is the plan for the Pricing review?") == ["plan", "pricing", "review"]
    assert title_matches(content_terms("what is the plan"), "The Plan")
    assert not title_matches(content_terms("what is the"), "The Thing")
    assert not title_matches(["plan"], None)
    assert not title_matches(["plan"], "Planning notes")  # whole tokens, not substrings


def test_recency_decay() -> None:
    assert recency_decay(0, 30) == 1.0
    assert recency_decay(30, 30) == pytest.approx(0.5)
    assert recency_decay(90, 30) == pytest.approx(0.125)
    assert recency_decay(90, 30, min_decay=0.2) == 0.2
    with pytest.raises(ValueError):
        recency_decay(1, 0)


def test_floor_threshold() -> None:
    assert floor_threshold([]) is None
    assert floor_threshold([0.5, 2.0, 1.0]) == pytest.approx(1.2)
    assert floor_threshold([2.0], ratio=0.5) == 1.0


# ---------------------------------------------------------------- autocut / dedup


def test_autocut_cuts_at_largest_meaningful_gap() -> None:
    # gaps at i >= 3: 0.9 - 0.4 = 0.5, 0.4 - 0.35 = 0.05 ; 0.5 >= 0.2 * 1.0 -> keep 3
    assert autocut_index([1.0, 0.95, 0.9, 0.4, 0.35]) == 3


def test_autocut_keeps_all_when_gap_small() -> None:
    assert autocut_index([1.0, 0.9, 0.85, 0.8, 0.75]) is None


def test_autocut_ignores_gaps_before_min_keep() -> None:
    # the 0.9 drop at i = 1 is inside the protected prefix; later gaps are 0.01
    assert autocut_index([1.0, 0.1, 0.09, 0.08, 0.07]) is None
    assert autocut_index([1.0, 0.1, 0.09, 0.08, 0.07], min_keep=1) == 1


def test_autocut_tie_takes_first_gap_and_short_lists_untouched() -> None:
    assert autocut_index([1.0, 0.875, 0.75, 0.5, 0.25]) == 3  # both gaps exactly 0.25
    assert autocut_index([1.0, 0.1, 0.01]) is None  # len <= min_keep
    assert autocut_index([]) is None
    assert autocut_index([0.0, 0.0, 0.0, 0.0]) is None


def test_dedup_keeps_first_best() -> None:
    ranked = [
        RankedHit(hit("a", content_hash="X"), 3.0, 3.0, {}, {}),
        RankedHit(hit("b", content_hash="Y"), 2.0, 2.0, {}, {}),
        RankedHit(hit("c", content_hash="X"), 1.0, 1.0, {}, {}),
    ]
    kept, dropped = dedup_by_content(ranked)
    assert [rh.hit.chunk_id for rh in kept] == ["a", "b"]
    assert dropped == [("c", "a")]


# ---------------------------------------------------------------- pipeline


def test_fuse_and_rank_floor_gates_the_cascade() -> None:
    # all scope "user" (tier 1.0). a = 2/61, b = 2/62, c = 1/63
    # floor = 0.6 * 2/61 = 0.019672 ; c = 0.015873 is below -> untouched despite title + access
    hits = {
        "a": hit("a", title="Pricing review"),
        "b": hit("b"),
        "c": hit("c", title="Pricing", access=1000, age=0),
    }
    res = fuse_and_rank({"dense": ["a", "b", "c"], "lexical": ["a", "b"]}, hits, "pricing", NOW, RRF)
    by_id = {rh.hit.chunk_id: rh for rh in res.hits}
    assert res.diagnostics["floor"] == pytest.approx(0.6 * 2 / 61)
    assert by_id["a"].score == pytest.approx(2 / 61 * 1.25)  # title only; ancient, never accessed
    assert by_id["a"].boosts == {"tier": 1.0, "title": 1.25}
    assert by_id["b"].score == pytest.approx(2 / 62)
    assert by_id["c"].score == pytest.approx(1 / 63)
    assert by_id["c"].boosts == {"tier": 1.0}
    assert res.diagnostics["below_floor"] == ["c"]
    assert ids(res.hits) == ["a", "b", "c"]


def test_fuse_and_rank_tier_boost_applied_before_floor() -> None:
    # a: 1/61 org -> 0.6/61 = 0.0098361 ; b: 1/62 team -> 0.9/62 = 0.0145161 (max)
    # floor = 0.6 * 0.0145161 = 0.0087097 -> a above the floor too
    hits = {"a": hit("a", scope="org"), "b": hit("b", scope="team")}
    res = fuse_and_rank({"dense": ["a", "b"]}, hits, "", NOW, replace(RRF, autocut=False))
    assert res.diagnostics["floor"] == pytest.approx(0.6 * 0.9 / 62)
    assert ids(res.hits) == ["b", "a"]
    assert res.hits[0].score == pytest.approx(0.9 / 62)
    assert res.hits[1].score == pytest.approx(0.6 / 61)
    assert res.diagnostics["below_floor"] == []


def test_cascade_factors_stay_in_bounds() -> None:
    hits: dict[str, Hit] = {}
    dense: list[str] = []
    for i in range(40):
        cid = f"h{i:02d}"
        hits[cid] = hit(cid, age=i * 11 % 400, access=(i * 37) % 5000, title="Roadmap" if i % 3 else None)
        dense.append(cid)
    config = replace(RRF, autocut=False, dedup=False)
    res = fuse_and_rank({"dense": dense, "lexical": list(reversed(dense))}, hits, "roadmap", NOW, config)
    assert len(res.hits) == 40
    floor = res.diagnostics["floor"]
    assert isinstance(floor, float)
    for rh in res.hits:
        b = rh.boosts
        assert 1.0 <= b.get("recency", 1.0) <= 1.4
        assert 1.0 <= b.get("access", 1.0) <= 1.6
        assert b.get("title", 1.25) == 1.25
        post_tier = rh.fused * b["tier"]
        ratio = rh.score / post_tier
        if post_tier < floor:
            assert ratio == pytest.approx(1.0)
            assert set(b) == {"tier"}
        else:
            assert 1.0 <= ratio <= 1.4 * 1.6 * 1.25 + 1e-12
            assert ratio == pytest.approx(math.prod(v for k, v in b.items() if k != "tier"))


def test_recent_popular_hits_get_recency_and_access() -> None:
    hits = {"a": hit("a", age=0, access=100)}
    res = fuse_and_rank({"dense": ["a"]}, hits, "x", NOW, RRF)
    assert res.hits[0].boosts == {"tier": 1.0, "recency": pytest.approx(1.4), "access": pytest.approx(1.6)}
    assert res.hits[0].score == pytest.approx(1 / 61 * 1.4 * 1.6)


def test_ties_are_deterministic() -> None:
    hits = {"b": hit("b"), "a": hit("a")}
    one = fuse_and_rank({"dense": ["b"], "lexical": ["a"]}, hits, "", NOW, RRF)
    two = fuse_and_rank({"lexical": ["a"], "dense": ["b"]}, dict(reversed(hits.items())), "", NOW, RRF)
    assert ids(one.hits) == ids(two.hits) == ["a", "b"]


def test_duplicates_dropped_in_pipeline() -> None:
    hits = {"a": hit("a", content_hash="same"), "b": hit("b", content_hash="same"), "c": hit("c")}
    res = fuse_and_rank({"dense": ["b", "a", "c"]}, hits, "", NOW, RRF)
    assert ids(res.hits) == ["b", "c"]
    assert res.diagnostics["dropped_duplicates"] == [{"chunk_id": "a", "kept": "b"}]


def test_autocut_in_pipeline() -> None:
    # a 2/61=.032787, b 2/62=.032258, c 2/63=.031746, d 1/64=.015625, e 1/65=.015385
    # gap c->d = .016121 >= 0.2 * .032787 -> keep 3
    hits = {c: hit(c) for c in "abcde"}
    config = replace(RRF, cascade=False)
    res = fuse_and_rank({"dense": list("abcde"), "lexical": list("abc")}, hits, "", NOW, config)
    assert ids(res.hits) == ["a", "b", "c"]
    assert res.diagnostics["autocut_index"] == 3
    no_cut = fuse_and_rank({"dense": list("abcde"), "lexical": list("abc")}, hits, "", NOW, RRF_ONLY)
    assert ids(no_cut.hits) == list("abcde")
    assert no_cut.diagnostics["autocut_index"] is None


def test_decay_reorders_after_autocut() -> None:
    # a: 1/61 = .016393, 60 days old -> * 0.25 = .004098 ; b: 1/62 = .016129, age 0 -> * 1.0
    hits = {"a": hit("a", age=60), "b": hit("b", age=0)}
    config = replace(RRF, cascade=False, autocut=False, decay_half_life_days=30.0, decay_min=0.1)
    res = fuse_and_rank({"dense": ["a", "b"]}, hits, "", NOW, config)
    assert ids(res.hits) == ["b", "a"]
    assert res.hits[1].score == pytest.approx(0.25 / 61)
    assert res.hits[1].boosts["decay"] == pytest.approx(0.25)


def test_presets_select_arms() -> None:
    hits = {c: hit(c) for c in "abc"}
    arms = {"dense": ["a"], "lexical": ["b"], "relational": ["c"]}
    lex = fuse_and_rank(arms, hits, "", NOW, LEXICAL_ONLY)
    assert ids(lex.hits) == ["b"]
    assert lex.diagnostics["ignored_arms"] == ["dense", "relational"]
    assert ids(fuse_and_rank(arms, hits, "", NOW, DENSE_ONLY).hits) == ["a"]
    full = fuse_and_rank(arms, hits, "", NOW, replace(RRF, cascade=False, autocut=False))
    assert ids(full.hits) == ["a", "b", "c"]  # relational weighs 0.5
    assert full.hits[2].score == pytest.approx(0.5 / 61)


def test_diagnostics_contents() -> None:
    hits = {"a": hit("a"), "b": hit("b")}
    res = fuse_and_rank({"dense": ["a", "ghost", "b"], "lexical": ["a"]}, hits, "", NOW, RRF)
    d = res.diagnostics
    assert d["missing_hits"] == ["ghost"]
    assert d["arm_ranks"] == {"a": {"dense": 1, "lexical": 1}, "b": {"dense": 3}}
    assert d["fused"] == {"a": pytest.approx(2 / 61), "b": pytest.approx(1 / 63)}
    assert d["channels"] == {"dense": 2, "lexical": 1}
    assert set(d) >= {"boosts", "floor", "autocut_index", "dropped_duplicates", "ignored_arms"}


def test_limit_and_empty_inputs() -> None:
    hits = {c: hit(c) for c in "abcd"}
    res = fuse_and_rank({"dense": list("abcd")}, hits, "", NOW, RRF, limit=2)
    assert ids(res.hits) == ["a", "b"]
    empty = fuse_and_rank({}, {}, "", NOW, RRF)
    assert empty.hits == ()
    assert empty.diagnostics["floor"] is None
    assert fuse_and_rank({"dense": list("abcd")}, hits, "", NOW, RRF, limit=0).hits == ()


def test_naive_now_rejected() -> None:
    with pytest.raises(ValueError):
        fuse_and_rank({}, {}, "", datetime(2025, 1, 1))


@pytest.mark.parametrize(
    "kwargs",
    [
        {"floor_ratio": 1.5},
        {"arm_weights": {"dense": -1.0}},
        {"recency_max": 0.9},
        {"autocut_min_keep": 0},
        {"decay_half_life_days": 0.0},
        {"decay_min": 2.0},
    ],
)
def test_config_validation(kwargs: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        RankConfig(**kwargs)  # type: ignore[arg-type]


def test_tie_created_by_tier_boost_breaks_by_chunk_id() -> None:
    # k = 0: z fused 1/1 = 1.0 (org 0.5 -> 0.5) ; a fused 1/2 = 0.5 (user 1.0 -> 0.5): an exact tie
    config = RankConfig(
        fusion="rrf",
        arm_weights=RRF_WEIGHTS,
        rrf_k=0,
        tier_boost={"user": 1.0, "org": 0.5},
        cascade=False,
        autocut=False,
    )
    hits = {"z": hit("z", scope="org"), "a": hit("a", scope="user")}
    res = fuse_and_rank({"dense": ["z", "a"]}, hits, "", NOW, config)
    assert [rh.score for rh in res.hits] == [0.5, 0.5]
    assert ids(res.hits) == ["a", "z"]


# ---------------------------------------------------------------- CC fusion (the default)


def test_normalise_min_max_floor_and_degenerate_cases() -> None:
    assert normalise({"a": 3.0, "b": 2.0, "c": 1.0}) == {"a": 1.0, "b": 0.5, "c": 0.0}
    # a natural floor below the observed minimum keeps the lowest hit above 0
    assert normalise({"a": 4.0, "b": 1.0}, floor=0.0) == {"a": 1.0, "b": 0.25}
    # a floor above the observed minimum is clamped to it (never a negative score)
    assert normalise({"a": 4.0, "b": 1.0}, floor=2.0) == {"a": 1.0, "b": 0.0}
    assert normalise({"a": 0.7}) == {"a": 1.0}
    assert normalise({"a": 0.5, "b": 0.5}) == {"a": 1.0, "b": 1.0}
    assert normalise({}) == {}


def test_cc_hand_computed_scores() -> None:
    # lexical BM25 a 6, b 3 (floor 0) -> 1.0, 0.5 ; dense cosine a .2, b .6, c .4 -> 0, 1, .5
    # a = .7*1 + .3*0 = .70 ; b = .7*.5 + .3*1 = .65 ; c = .3*.5 = .15
    fused = cc_fuse(
        {"lexical": ["a", "b"], "dense": ["b", "c", "a"]},
        {"lexical": {"a": 6.0, "b": 3.0}, "dense": {"a": 0.2, "b": 0.6, "c": 0.4}},
    )
    assert fused.scores == {"a": pytest.approx(0.70), "b": pytest.approx(0.65), "c": pytest.approx(0.15)}
    assert fused.order == ("a", "b", "c")
    assert fused.arm_ranks == {"a": {"dense": 3, "lexical": 1}, "b": {"dense": 1, "lexical": 2}, "c": {"dense": 2}}


def test_cc_keeps_score_gaps_that_rrf_throws_away() -> None:
    # BM25 is sure about "a" (12 vs 1); the dense arm barely prefers "b" and "c" (.51, .505 vs .50).
    arms = {"lexical": ["a", "b"], "dense": ["b", "c", "a"]}
    scores = {"lexical": {"a": 12.0, "b": 1.0}, "dense": {"b": 0.51, "c": 0.505, "a": 0.50}}
    # RRF: b = 1/61 + 1/62 > a = 1/61 + 1/63
    assert rrf_fuse(arms, {"lexical": 1.0, "dense": 1.0}).order[0] == "b"
    # CC: a = .7 * 1 + .3 * 0 = .70 > b = .7 * 1/12 + .3 * 1 = .358
    fused = cc_fuse(arms, scores)
    assert fused.order[0] == "a"
    assert fused.scores["b"] == pytest.approx(0.7 / 12 + 0.3)


def test_cc_rank_scores_for_arms_without_raw_scores_and_relational_cap() -> None:
    # relational has no raw scores: ranks 1..2 of 2 -> 1.0, 0.5 ; weight 0.5 -> at most 0.5
    fused = cc_fuse(
        {"lexical": ["a"], "dense": ["a"], "relational": ["r", "s"]},
        {"lexical": {"a": 2.0}, "dense": {"a": 0.9}},
    )
    assert fused.scores["r"] == pytest.approx(0.5)
    assert fused.scores["s"] == pytest.approx(0.25)
    assert fused.scores["a"] == pytest.approx(1.0)  # a lone hit normalises to 1 in both arms
    assert fused.order == ("a", "r", "s")


def test_cc_missing_raw_score_takes_the_arm_minimum_and_unlisted_scores_are_ignored() -> None:
    fused = cc_fuse({"dense": ["a", "b", "a"]}, {"dense": {"a": 0.8, "z": 0.99}}, {"dense": 1.0})
    assert fused.scores == {"a": 1.0, "b": 1.0}  # b gets the minimum (0.8): all equal -> 1.0
    assert fused.arm_ranks == {"a": {"dense": 1}, "b": {"dense": 2}}
    assert "z" not in fused.scores


def test_cc_ignores_zero_weight_arms_and_is_order_independent() -> None:
    arms = {"semantic": ["x"], "lexical": ["b", "a"]}
    one = cc_fuse(arms, {"lexical": {"a": 1.0, "b": 2.0}})
    two = cc_fuse(dict(reversed(arms.items())), {"lexical": {"b": 2.0, "a": 1.0}})
    assert "x" not in one.scores
    assert one == two
    assert cc_fuse({}, {}).order == ()


def test_default_pipeline_is_cc_with_cascade_and_autocut() -> None:
    assert DEFAULT.fusion == "cc"
    assert RRF_ONLY.fusion == "rrf" and dict(RRF_ONLY.arm_weights) == dict(RRF_WEIGHTS)
    hits = {c: hit(c) for c in "abcd"}
    arms = {"lexical": list("abcd"), "dense": list("abcd")}
    scores = {"lexical": {"a": 10.0, "b": 9.0, "c": 8.5, "d": 1.0}, "dense": {"a": 0.9, "b": 0.8, "c": 0.8, "d": 0.1}}
    res = fuse_and_rank(arms, hits, "", NOW, arm_scores=scores)
    # a 1.0 ; b .7*.9+.3*.875 = .8925 ; c .7*.85+.3*.875 = .8575 ; d .7*.1 = .07 -> cliff of .79 >= 0.3
    assert [rh.fused for rh in res.hits] == [pytest.approx(1.0), pytest.approx(0.8925), pytest.approx(0.8575)]
    assert res.diagnostics["fusion"] == "cc"
    assert res.diagnostics["autocut_index"] == 3


def test_unknown_fusion_rejected() -> None:
    with pytest.raises(ValueError, match="fusion"):
        RankConfig(fusion="borda")


# ---------------------------------------------------------------- access: bounded, never past a better match


def test_usage_never_lifts_a_hit_past_a_better_match() -> None:
    # "zeta" matches better (lexical 1.0 vs 0.9); "alpha" has been returned a thousand times and would win an
    # id tie-break
    hits = {"zeta": hit("zeta", age=5), "alpha": hit("alpha", age=5, access=1000)}
    scores = {"zeta": 1.0, "alpha": 0.9}
    res = fuse_and_rank({"lexical": ["zeta", "alpha"]}, hits, "x", NOW, arm_scores={"lexical": scores})
    assert ids(res.hits) == ["zeta", "alpha"]
    better, used = res.hits
    assert used.score < better.score
    assert 1.0 < used.boosts["access"] <= 1.6  # lifted up to the better match's score, no further
    assert used.score == pytest.approx(better.score)
    assert sorted(res.hits, key=lambda rh: (-rh.score, rh.hit.chunk_id)) == list(res.hits)  # a re-sort agrees


def test_usage_breaks_a_tie_between_equal_matches() -> None:
    hits = {"a": hit("a", age=5), "b": hit("b", age=5, access=10)}
    res = fuse_and_rank({"lexical": ["a", "b"]}, hits, "x", NOW, arm_scores={"lexical": {"a": 1.0, "b": 1.0}})
    assert ids(res.hits) == ["b", "a"]


def test_usage_cannot_reorder_any_two_hits_of_different_match() -> None:
    hits = {f"h{i:02d}": hit(f"h{i:02d}", age=i, access=(i * 37) % 500) for i in range(30)}
    order = sorted(hits)
    scores = {cid: 1.0 - i / 100 for i, cid in enumerate(order)}
    config = replace(DEFAULT, autocut=False)
    with_usage = fuse_and_rank({"lexical": order}, hits, "x", NOW, config, arm_scores={"lexical": scores})
    unused = {cid: replace(h, access_count=0) for cid, h in hits.items()}
    without = fuse_and_rank({"lexical": order}, unused, "x", NOW, config, arm_scores={"lexical": scores})
    assert ids(with_usage.hits) == ids(without.hits)


# ---------------------------------------- priors: per-document diversity, boilerplate, low information


def doc_hit(cid: str, doc: str, text: str = "a long enough passage about the kiln glaze schedule") -> Hit:
    return replace(hit(cid, age=5, text=text), document_id=doc)


def test_further_passages_of_one_document_make_room_for_other_documents() -> None:
    hits = {
        "a1": doc_hit("a1", "A"),
        "a2": doc_hit("a2", "A"),
        "a3": doc_hit("a3", "A"),
        "b1": doc_hit("b1", "B"),
        "c1": doc_hit("c1", "C"),
    }
    scores = {"a1": 1.0, "a2": 0.95, "a3": 0.9, "b1": 0.85, "c1": 0.8}
    arms = {"lexical": list(scores)}
    config = replace(DEFAULT, autocut=False, cascade=False)
    res = fuse_and_rank(arms, hits, "x", NOW, config, arm_scores={"lexical": scores})
    assert ids(res.hits) == ["a1", "b1", "c1", "a2", "a3"]
    assert res.hits[3].boosts["doc_repeat"] == pytest.approx(config.doc_repeat)
    assert res.hits[4].boosts["doc_repeat"] == pytest.approx(config.doc_repeat**2)
    off = fuse_and_rank(arms, hits, "x", NOW, replace(config, doc_repeat=1.0), arm_scores={"lexical": scores})
    assert ids(off.hits) == list(scores)


def test_a_line_repeated_across_documents_yields_to_a_specific_passage() -> None:
    boiler = "This message and any attachments are confidential; the kiln schedule is subject to change."
    hits = {f"x{i}": doc_hit(f"x{i}", f"D{i}", boiler) for i in range(6)}
    hits["s"] = doc_hit("s", "S", "The kiln schedule moved to Thursday after the glaze firing test")
    scores = {**{f"x{i}": 1.0 for i in range(6)}, "s": 0.85}
    config = replace(DEFAULT, autocut=False, cascade=False)
    res = fuse_and_rank({"lexical": list(scores)}, hits, "kiln schedule", NOW, config, arm_scores={"lexical": scores})
    assert ids(res.hits)[0] == "s"
    assert res.hits[1].boosts["boilerplate"] < 1.0


def test_a_short_generic_line_yields_to_an_informative_one() -> None:
    hits = {
        "g": doc_hit("g", "G", "haha yes!"),
        "i": doc_hit("i", "I", "yes, I went to the pottery fair with my kids"),
    }
    scores = {"g": 1.0, "i": 0.8}
    config = replace(DEFAULT, autocut=False, cascade=False)
    res = fuse_and_rank({"lexical": ["g", "i"]}, hits, "pottery yes", NOW, config, arm_scores={"lexical": scores})
    assert ids(res.hits) == ["i", "g"]
    assert res.hits[1].boosts["low_info"] < 1.0
    assert "low_info" not in res.hits[0].boosts


def test_the_baselines_have_no_priors() -> None:
    for config in (LEXICAL_ONLY, DENSE_ONLY, RRF_ONLY):
        assert (config.doc_repeat, config.boilerplate_weight, config.low_info_terms) == (1.0, 0.0, 0)
