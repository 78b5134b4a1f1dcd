"""The one owner of a chunk's embedding input (``services.chunk_embedding``): the hashes stored before it was
the owner stay the same, so every vector in ``embedding_cache`` and on ``chunks`` still carries over."""

from __future__ import annotations

import pytest

from services.chunk_embedding import cache_hit, embedding_hash, embedding_input, pending_sql

# Computed on main before this module existed, with ingest's old formula:
# content_hash(embedding_input(title, indexed_text(context, text))).
KNOWN = [
    ("Release plan", "[8 May 2023] Alice:", "Ship it on Tuesday.", "d7d5d844608e91bfd87293ba09333bd7"),
    (None, None, "Ship it on Tuesday.", "2263cb0f5cc8474660b4a7a9d814a874"),
    ("Release plan", "", "Ship it on Tuesday.", "b2dd491109567437af38a27a10d9e646"),
]


@pytest.mark.parametrize(("title", "context", "text", "stored"), KNOWN)
def test_the_hash_of_a_known_chunk_is_unchanged(title: str | None, context: str | None, text: str, stored: str) -> None:
    assert embedding_hash(title, context, text) == stored


def test_the_input_is_title_then_context_then_text() -> None:
    assert embedding_input(None, None, "hello") == "hello"
    assert embedding_input(None, "", "hello") == "hello"  # an empty context adds nothing (as NULL does)
    assert embedding_input(None, "[8 May 2023] Caroline:", "hello") == "[8 May 2023] Caroline: hello"
    assert embedding_input("Plan", "Setup > Kafka", "hello") == "Plan\n\nSetup > Kafka hello"
    assert embedding_input("", "ctx", "hello") == "ctx hello"


def test_the_sql_fragments_name_their_alias_and_model_parameter() -> None:
    assert pending_sql("c", "$2") == (
        "NOT c.is_parent AND NOT c.deleted AND (c.embedding IS NULL OR c.embedding_model IS DISTINCT FROM $2)"
    )
    assert pending_sql("", "$3").startswith("NOT is_parent AND NOT deleted")
    assert cache_hit("u", "$12") == "ec.content_hash = u.content_hash AND ec.embedding_model = $12"
