from ingest.chunking import CHILD_CHARS, PARENT_CHARS, plan_chunks
from services.chunk_embedding import content_hash


def test_empty_text_has_no_chunks() -> None:
    assert plan_chunks("") == []
    assert plan_chunks("   \n\n ") == []


def test_short_message_is_one_parent_one_child_same_span() -> None:
    text = "Priya reports to Dana since the reorg."
    plans = plan_chunks(text)
    assert [p.is_parent for p in plans] == [True, False]
    parent, child = plans
    assert (parent.start, parent.end) == (child.start, child.end) == (0, len(text))
    assert child.parent_ordinal == parent.ordinal == 0
    assert child.content_hash == content_hash(text)


def test_offsets_point_into_the_original_text() -> None:
    text = "Intro line.\n\n" + " ".join(f"Sentence number {i} talks about search quality." for i in range(80))
    for plan in plan_chunks(text):
        assert text[plan.start : plan.end] == plan.text
        assert plan.text == plan.text.strip()


def test_limits_respected_and_children_inside_their_parent() -> None:
    text = "\n\n".join(" ".join(f"Para {p} sentence {i} is about Atlas." for i in range(60)) for p in range(5))
    plans = plan_chunks(text)
    parents = {p.ordinal: p for p in plans if p.is_parent}
    assert len(parents) > 1
    for plan in plans:
        limit = PARENT_CHARS if plan.is_parent else CHILD_CHARS
        assert len(plan.text) <= limit
        if not plan.is_parent:
            parent = parents[plan.parent_ordinal]  # type: ignore[index]
            assert parent.start <= plan.start and plan.end <= parent.end
    assert [p.ordinal for p in plans] == list(range(len(plans)))


def test_every_word_is_covered_by_some_child() -> None:
    words = [f"w{i}" for i in range(3000)]
    text = " ".join(words)
    children = [p for p in plan_chunks(text) if not p.is_parent]
    covered = " ".join(c.text for c in children).split()
    assert covered == words  # no word lost, none duplicated, none split


def test_chunking_is_deterministic() -> None:
    text = "A. B. C.\n\nD e f g."
    assert plan_chunks(text) == plan_chunks(text)
