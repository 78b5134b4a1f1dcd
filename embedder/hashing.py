"""Deterministic feature-hashing embedder. FOR TESTS ONLY: it has no notion of meaning.

Each text is lowercased and split into word unigrams and bigrams; each feature is hashed with
blake2b into a bucket and a sign (the "hashing trick" with signed hashes, so collisions cancel
instead of piling up), and the bucket counts are L2-normalized. Texts that share words therefore
have a higher cosine than unrelated texts, which is all the retrieval tests need, and the output
is identical across processes and machines (unlike Python's salted ``hash``).

An empty text (or one without word characters) maps to a fixed unit vector, so every returned
vector is usable with cosine distance.
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Sequence
from functools import lru_cache
from hashlib import blake2b

from embedder.metered import MeteredEmbedder

DEFAULT_DIM = 384
_WORD = re.compile(r"\w+", re.UNICODE)
_EMPTY_FEATURE = "\x00empty"
_BIGRAM_WEIGHT = 0.5


@lru_cache(maxsize=65536)
def _bucket(feature: str, dim: int) -> tuple[int, float]:
    """Bucket index and sign of one feature (cached: chat text repeats words a lot)."""
    digest = blake2b(feature.encode("utf-8"), digest_size=8, person=b"om-hash-v1").digest()
    value = int.from_bytes(digest, "little")
    return (value >> 1) % dim, (1.0 if value & 1 else -1.0)


def features(text: str) -> list[tuple[str, float]]:
    """Weighted features of ``text``: unigrams (1.0) and bigrams (0.5)."""
    words = _WORD.findall(text.lower())
    if not words:
        return [(_EMPTY_FEATURE, 1.0)]
    feats: list[tuple[str, float]] = [(w, 1.0) for w in words]
    feats.extend((f"{a} {b}", _BIGRAM_WEIGHT) for a, b in itertools.pairwise(words))
    return feats


def hash_embed(text: str, dim: int = DEFAULT_DIM) -> list[float]:
    """The L2-normalized hashed vector of one text."""
    vec = [0.0] * dim
    for feature, weight in features(text):
        index, sign = _bucket(feature, dim)
        vec[index] += sign * weight
    norm = math.sqrt(sum(x * x for x in vec))
    if norm == 0.0:  # every feature cancelled out: fall back to the empty-text vector
        return hash_embed("", dim)
    return [x / norm for x in vec]


class HashingEmbedder(MeteredEmbedder):
    """``Embedder`` over :func:`hash_embed`. Model id ``hash/v1-<dim>``. Tokens = word count."""

    def __init__(self, dim: int = DEFAULT_DIM, max_batch: int = 256) -> None:
        if dim < 8:
            raise ValueError(f"dim must be >= 8, got {dim}")
        if max_batch < 1:
            raise ValueError(f"max_batch must be >= 1, got {max_batch}")
        self._identify(f"hash/v1-{dim}", dim, max_batch)

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        # Cheap enough (tens of microseconds per text) to run on the event loop.
        vectors = [hash_embed(text, self._dim) for text in texts]
        tokens = sum(len(_WORD.findall(text)) for text in texts)
        calls = -(-len(texts) // self._max_batch)
        self._meter.record(calls, tokens)
        return vectors
