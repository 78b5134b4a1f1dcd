"""Query understanding without an LLM: quoted phrases, names, first / last, aggregate questions."""

from __future__ import annotations

from retriever.query_shape import names, order_of, parse_query, quoted_phrases


def test_quoted_phrases_straight_and_curly_distinct_in_order() -> None:
    assert quoted_phrases('Would Melanie enjoy "The Four Seasons" by Vivaldi?') == ("The Four Seasons",)
    assert quoted_phrases('the “Lean  Startup” and "lean startup" again') == ("Lean Startup",)
    assert quoted_phrases('a "x" b') == ()  # one character is no phrase
    assert quoted_phrases("no quotes here") == ()


def test_names_skip_the_first_word_stopwords_months_and_possessives() -> None:
    assert names("What subject have Caroline and Melanie both painted?") == ("Caroline", "Melanie")
    assert names("What did Melanie's kids paint in July?") == ("Melanie",)
    assert names("When did Gina mention Shia Labeouf? Then Jon left.") == ("Gina", "Shia", "Labeouf", "Jon")
    assert names("Who leads Search on Monday?") == ("Search",)


def test_words_inside_a_quoted_phrase_are_not_names() -> None:
    shape = parse_query('When did Jon start reading "The Lean Startup"?')
    assert shape.phrases == ("The Lean Startup",)
    assert shape.names == ("Jon",)
    assert not shape.join


def test_order_first_or_last_but_not_a_period_nor_both() -> None:
    assert order_of("What was the first book Dana recommended?") == "first"
    assert order_of("What is the latest status of the migration?") == "last"
    assert order_of("Who spoke most recently about the budget?") == "last"
    assert order_of("What did Omar ship last week?") is None  # a period: the temporal planner's
    assert order_of("Which team won first place?") is None
    assert order_of("Was the first or the last draft approved?") is None
    assert order_of("What did Omar ship?") is None


def test_aggregate_questions_ask_for_several_things() -> None:
    aggregate = [
        "What activities does Melanie partake in?",
        "Where has Melanie camped?",
        "How many times has Melanie gone to the beach in 2023?",
        "Which city have both Jean and John visited?",
        "What books has Melanie read?",
        "What kind of art does Caroline make?",
    ]
    single = ["What did Caroline research?", "When did Melanie paint a sunrise?", "Is Oscar Melanie's pet?"]
    assert all(parse_query(q).aggregate for q in aggregate)
    assert not any(parse_query(q).aggregate for q in single)


def test_join_needs_two_distinct_names() -> None:
    assert parse_query("Do Jon and Gina start businesses out of what they love?").join
    assert not parse_query("What do Melanie's kids like? Melanie said so.").join
