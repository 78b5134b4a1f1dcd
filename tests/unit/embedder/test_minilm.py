from __future__ import annotations

import asyncio
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from embedder.minilm import MODEL_ID, MiniLMEmbedder, gelu_erf_, wheel_model_dir
from services.ports import Embedder

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "minilm_reference.json"


@pytest.fixture(scope="module")
def reference() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(FIXTURE.read_text(encoding="utf-8"))
    return data


@pytest.fixture(scope="module")
def minilm() -> MiniLMEmbedder:
    return MiniLMEmbedder(max_batch=4)


def _cosines(got: list[list[float]], want: list[list[float]]) -> list[float]:
    g = np.asarray(got, dtype=np.float64)
    w = np.asarray(want, dtype=np.float64)
    cos = (g * w).sum(axis=1) / (np.linalg.norm(g, axis=1) * np.linalg.norm(w, axis=1))
    return [float(c) for c in cos]


def test_wheel_ships_the_model_files() -> None:
    directory = wheel_model_dir()
    for name in ("model.safetensors", "tokenizer.json", "config.json"):
        assert (directory / name).is_file(), name


async def test_matches_sentence_transformers_reference(minilm: MiniLMEmbedder, reference: dict[str, Any]) -> None:
    sentences: list[str] = reference["sentences"]
    assert len(sentences) == 10
    vectors = await minilm.embed(sentences)
    cosines = _cosines(vectors, reference["embeddings"])
    assert min(cosines) >= 0.999, cosines
    assert min(cosines) > 0.9999, cosines  # float32 numpy vs torch: should be ~1 - 1e-7


async def test_port_shape_and_normalization(minilm: MiniLMEmbedder) -> None:
    assert isinstance(minilm, Embedder)
    assert minilm.model == MODEL_ID == "local/all-MiniLM-L6-v2"
    assert minilm.dim == 384
    vectors = await minilm.embed(["Kafka topics replace the Postgres job table.", "hi"])
    assert [len(v) for v in vectors] == [384, 384]
    for v in vectors:
        assert math.isclose(math.fsum(x * x for x in v), 1.0, rel_tol=1e-5)


async def test_batch_equals_single(minilm: MiniLMEmbedder, reference: dict[str, Any]) -> None:
    sentences: list[str] = reference["sentences"]
    batched = await minilm.embed(sentences)  # sorted by length, padded per batch of 4
    for text, vector in zip(sentences, batched, strict=True):
        [single] = await minilm.embed([text])
        assert np.allclose(single, vector, atol=2e-5), text


async def test_order_is_preserved(minilm: MiniLMEmbedder) -> None:
    texts = ["a much longer sentence about the quarterly budget review on Friday", "short", "mid length"]
    forward = await minilm.embed(texts)
    backward = await minilm.embed(texts[::-1])
    assert np.allclose(forward, backward[::-1], atol=2e-5)


async def test_empty_string_is_embedded(minilm: MiniLMEmbedder) -> None:
    [vector] = await minilm.embed([""])
    assert len(vector) == 384
    assert all(math.isfinite(x) for x in vector)
    assert math.isclose(math.fsum(x * x for x in vector), 1.0, rel_tol=1e-5)
    assert minilm.last_usage.tokens == 2  # [CLS] [SEP]


async def test_long_text_is_truncated_to_256_tokens(minilm: MiniLMEmbedder) -> None:
    long_text = " ".join(f"word{i % 50}" for i in range(2000))
    assert len(minilm.tokenize([long_text])[0]) == 256
    [full] = await minilm.embed([long_text])
    [prefix] = await minilm.embed([" ".join(long_text.split()[:1000])])
    assert minilm.last_usage.tokens == 256
    assert np.allclose(full, prefix, atol=2e-5)  # only the first 256 tokens count


async def test_usage_counts_batches_and_tokens(minilm: MiniLMEmbedder) -> None:
    texts = ["one", "two words", "three small words", "four", "five"]
    await minilm.embed(texts)
    usage = minilm.last_usage
    assert usage.model == MODEL_ID
    assert usage.calls == 2  # max_batch=4
    assert usage.tokens == sum(len(ids) for ids in minilm.tokenize(texts))
    assert await minilm.embed([]) == []
    assert minilm.last_usage.calls == 0


async def test_event_loop_is_not_blocked(minilm: MiniLMEmbedder) -> None:
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0)

    task = asyncio.create_task(ticker())
    await minilm.embed(["The quarterly budget review moved to Friday afternoon."] * 4)
    task.cancel()
    assert ticks > 1


def test_gelu_matches_exact_erf() -> None:
    xs = np.linspace(-8.0, 8.0, 4097, dtype=np.float32).reshape(1, -1)
    want = np.array([0.5 * x * (1.0 + math.erf(x / math.sqrt(2.0))) for x in xs[0].tolist()])
    got = gelu_erf_(xs.copy())
    assert np.abs(got[0].astype(np.float64) - want).max() < 5e-6
