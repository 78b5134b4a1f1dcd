from __future__ import annotations

import pytest

from retriever.packing import PackItem, estimate_tokens, pack, truncate_to_tokens

TEXT = "alpha beta gamma delta epsilon"  # 30 chars -> 8 tokens


@pytest.mark.parametrize(("text", "tokens"), [("", 0), ("a", 1), ("abcd", 1), ("abcde", 2), ("x" * 40, 10)])
def test_estimate_tokens(text: str, tokens: int) -> None:
    assert estimate_tokens(text) == tokens


def test_none_budget_keeps_everything() -> None:
    items = [PackItem("p1", "passage", "x" * 4000), PackItem("f1", "fact", "y")]
    res = pack(items, None)
    assert res.kept == tuple(items)
    assert [d.action for d in res.decisions] == ["kept", "kept"]
    assert res.used_tokens == 1001


def test_keeps_in_priority_order_until_budget() -> None:
    items = [
        PackItem("a", "passage", "a" * 40),
        PackItem("b", "fact", "b" * 40),
        PackItem("c", "fact", "c" * 8),
    ]
    res = pack(items, 22)  # 10 + 10 fit, c needs 2 -> 22
    assert [i.key for i in res.kept] == ["a", "b", "c"]
    assert res.used_tokens == 22
    res = pack(items, 21)  # c (2 tokens) no longer fits after a + b
    assert [i.key for i in res.kept] == ["a", "b"]
    assert res.decisions[2].action == "dropped" and res.decisions[2].reason == "over_budget"


def test_later_smaller_item_fits_after_drop() -> None:
    items = [PackItem("big", "fact", "z" * 400), PackItem("small", "fact", "tiny")]
    res = pack(items, 5)
    assert [i.key for i in res.kept] == ["small"]
    assert [d.action for d in res.decisions] == ["dropped", "kept"]


def test_passage_truncated_at_word_boundary() -> None:
    # budget 5 tokens -> 19 chars + "…"; char 19 is inside "delta", so cut after "gamma"
    res = pack([PackItem("p", "passage", TEXT)], 5, min_truncated_tokens=1)
    assert res.kept[0].text == "alpha beta gamma…"
    d = res.decisions[0]
    assert d.action == "truncated" and d.tokens == 5 == estimate_tokens("alpha beta gamma…")
    assert d.reason == "truncated from 8 to 5 tokens"


def test_truncate_to_tokens_edges() -> None:
    # limit = 4 * 4 - 1 = 15 chars; TEXT[15] is the last letter of "gamma" -> back to "alpha beta"
    assert truncate_to_tokens(TEXT, 4) == "alpha beta…"
    # limit = 3 * 4 - 1 = 11; char 11 is a space, so the first 11 chars end exactly on a word
    assert truncate_to_tokens("abcdefghijk lmn", 3) == "abcdefghijk…"
    assert truncate_to_tokens("supercalifragilistic", 2) is None
    assert truncate_to_tokens("short", 10) == "short"
    assert truncate_to_tokens("anything", 0) is None


def test_facts_and_paths_are_never_truncated() -> None:
    for kind in ("fact", "path"):
        res = pack([PackItem("k", kind, TEXT)], 7, min_truncated_tokens=1)
        assert res.kept == ()
        assert res.decisions[0].reason == "over_budget"


def test_too_little_room_to_truncate_drops() -> None:
    res = pack([PackItem("p", "passage", TEXT)], 5)  # default min_truncated_tokens = 8
    assert res.kept == () and res.decisions[0].reason == "over_budget"


def test_single_huge_word_dropped() -> None:
    res = pack([PackItem("p", "passage", "x" * 500)], 20)
    assert res.kept == ()
    assert res.decisions[0].reason == "no_word_boundary"


def test_empty_items_dropped_and_zero_budget() -> None:
    res = pack([PackItem("e", "passage", "   "), PackItem("f", "fact", "abc")], 0)
    assert [d.reason for d in res.decisions] == ["empty", "over_budget"]
    assert res.used_tokens == 0
    with pytest.raises(ValueError):
        pack([], -1)
    assert pack([], 10).kept == ()


def test_budget_never_exceeded_and_no_mid_word_splits() -> None:
    words = [f"w{i}" * (1 + i % 5) for i in range(300)]
    items = [
        PackItem(f"i{n}", ("passage", "fact", "path")[n % 3], " ".join(words[n : n + 5 + n % 40])) for n in range(120)
    ]
    vocabulary = set(words)
    for budget in (0, 1, 7, 8, 9, 33, 100, 257, 1000, 5000):
        res = pack(items, budget, min_truncated_tokens=1)
        assert res.used_tokens <= budget
        assert sum(estimate_tokens(i.text) for i in res.kept) == res.used_tokens
        assert len(res.decisions) == len(items)
        for item in res.kept:
            for word in item.text.removesuffix("…").split():
                assert word in vocabulary
