from __future__ import annotations

import math

import pytest

from embedder.hashing import HashingEmbedder, hash_embed
from services.ports import Embedder, EmbedUsage


def _cos(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True))


def test_vectors_are_unit_length_and_deterministic() -> None:
    v = hash_embed("The quarterly budget review moved to Friday.")
    assert len(v) == 384
    assert math.isclose(math.fsum(x * x for x in v), 1.0, rel_tol=1e-9)
    assert v == hash_embed("The quarterly budget review moved to Friday.")


def test_known_value_is_stable_across_processes() -> None:
    # blake2b, not Python's salted hash(): this must never change for "hash/v1-*".
    v = hash_embed("hello world", dim=16)
    assert [round(x, 6) for x in v] == [round(x, 6) for x in hash_embed("HELLO, world!", dim=16)]
    assert sum(1 for x in v if x != 0.0) <= 3  # two unigrams + one bigram


def test_shared_words_score_higher_than_unrelated_text() -> None:
    a = hash_embed("Dana Reyes founded Acme Robotics in 2019")
    b = hash_embed("Who founded Acme Robotics?")
    c = hash_embed("The cafeteria serves pasta on Thursdays")
    assert _cos(a, b) > _cos(a, c) + 0.2
    assert _cos(a, b) > 0.3


def test_word_order_matters_through_bigrams() -> None:
    a = hash_embed("dog bites man")
    assert _cos(a, hash_embed("dog bites man")) > _cos(a, hash_embed("man bites dog"))


def test_empty_and_symbol_only_texts_get_a_fixed_unit_vector() -> None:
    empty = hash_embed("")
    assert math.isclose(math.fsum(x * x for x in empty), 1.0)
    assert hash_embed("   ?!  ") == empty


@pytest.mark.parametrize("dim", [8, 64, 1536])
def test_dimension_is_configurable(dim: int) -> None:
    assert len(hash_embed("some text", dim=dim)) == dim


async def test_embedder_port_and_usage() -> None:
    embedder = HashingEmbedder(dim=64, max_batch=2)
    assert isinstance(embedder, Embedder)
    assert embedder.model == "hash/v1-64"
    assert embedder.dim == 64
    vectors = await embedder.embed(["one two", "three", "four five six"])
    assert len(vectors) == 3
    assert all(len(v) == 64 for v in vectors)
    assert embedder.last_usage == EmbedUsage("hash/v1-64", calls=2, tokens=6)
    await embedder.embed(["seven"])
    assert embedder.last_usage == EmbedUsage("hash/v1-64", calls=1, tokens=1)
    assert embedder.total_usage == EmbedUsage("hash/v1-64", calls=3, tokens=7)
    assert await embedder.embed([]) == []


def test_invalid_settings_are_rejected() -> None:
    with pytest.raises(ValueError):
        HashingEmbedder(dim=4)
    with pytest.raises(ValueError):
        HashingEmbedder(max_batch=0)
