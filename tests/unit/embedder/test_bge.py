"""bge-small-en-v1.5-q on the real model files (``make models`` fetches them; no mocks)."""

from __future__ import annotations

import asyncio
import math
from pathlib import Path

import numpy as np
import pytest

from embedder.bge import (
    DIM,
    MODEL_ID,
    ONNX_FILE,
    QUERY_INSTRUCTION,
    TOKENIZER_FILE,
    BGESmallEmbedder,
    default_model_dir,
)
from embedder.providers import build_embedder
from services.errors import ConfigurationError
from services.ports import Embedder

QUERIES = [
    "When was the quarterly budget review moved?",
    "Who is on call for the Postgres failover drill?",
    "What did legal say about the Acme Robotics contract?",
]
PASSAGES = [  # PASSAGES[i] answers QUERIES[i]; the last two answer nothing
    "Dana moved the quarterly budget review from Thursday to Friday at 3pm because finance needs another day.",
    "Priya is the on-call engineer for Saturday's Postgres failover drill; Tom is her backup.",
    "Legal signed off on the Acme Robotics contract after we removed the unlimited liability clause.",
    "The offsite will be in Lisbon this year; book flights before the end of the month.",
    "Our new hire onboarding doc now covers laptop setup, VPN access and the coffee machine.",
]
LONG = " ".join(f"word{i % 50}" for i in range(3000))


@pytest.fixture(scope="module")
def bge() -> BGESmallEmbedder:
    return BGESmallEmbedder(max_batch=4)


def _norm(vector: list[float]) -> float:
    return math.sqrt(math.fsum(x * x for x in vector))


def test_model_files_are_fetched() -> None:
    directory = default_model_dir()
    for name in (ONNX_FILE, TOKENIZER_FILE):
        assert (directory / name).is_file(), f"{directory / name} missing: run `make models`"


async def test_port_shape_and_normalization(bge: BGESmallEmbedder) -> None:
    assert isinstance(bge, Embedder)
    assert isinstance(build_embedder("bge"), BGESmallEmbedder)
    assert bge.model == MODEL_ID == "local/bge-small-en-v1.5-q"
    assert bge.dim == DIM == 384
    assert bge.max_seq_length == 512
    vectors = await bge.embed(["Kafka topics replace the Postgres job table.", "hi", ""])
    assert [len(v) for v in vectors] == [384, 384, 384]
    for v in vectors:
        assert all(math.isfinite(x) for x in v)
        assert math.isclose(_norm(v), 1.0, rel_tol=1e-5)
    [query] = await bge.embed_queries(["Which table did Kafka replace?"])
    assert len(query) == 384 and math.isclose(_norm(query), 1.0, rel_tol=1e-5)


async def test_deterministic(bge: BGESmallEmbedder) -> None:
    first = await bge.embed(PASSAGES)
    again = await bge.embed(PASSAGES)
    assert first == again
    other = BGESmallEmbedder(intra_op_num_threads=1)  # another session, another thread count
    assert np.allclose(await other.embed(PASSAGES), first, atol=1e-5)


async def test_thread_count_and_worker_setting_leave_vectors_bit_identical(bge: BGESmallEmbedder) -> None:
    """EMBED_THREADS only changes speed: the same texts give the same float32 vectors, bit for bit."""
    texts = [*PASSAGES, LONG, "ok", PASSAGES[0] * 4]
    want = await bge.embed(texts)
    for threads in (1, 2):
        other = BGESmallEmbedder(intra_op_num_threads=threads)
        assert await other.embed(texts) == want, threads


def test_onnxruntime_pool_threads_do_not_spin(bge: BGESmallEmbedder) -> None:
    """Spinning pool threads between the one-sequence runs would burn CPU the other stages need."""
    options = bge._session.get_session_options()
    assert options.get_session_config_entry("session.intra_op.allow_spinning") == "0"
    assert options.get_session_config_entry("session.inter_op.allow_spinning") == "0"


async def test_batch_invariance_padding_does_not_leak(bge: BGESmallEmbedder) -> None:
    short = "Budget review moved to Friday."
    [alone] = await bge.embed([short])
    longer = [PASSAGES[0] * 3, short, LONG, PASSAGES[1], "ok", PASSAGES[2] * 2]
    batched = await bge.embed(longer)
    assert np.abs(np.asarray(batched[1]) - np.asarray(alone)).max() < 1e-5
    for text, vector in zip(longer, batched, strict=True):  # every text, whatever its batch-mates
        [single] = await bge.embed([text])
        assert np.abs(np.asarray(single) - np.asarray(vector)).max() < 1e-5, text[:40]


async def test_order_is_preserved(bge: BGESmallEmbedder) -> None:
    forward = await bge.embed(PASSAGES)
    backward = await bge.embed(PASSAGES[::-1])
    assert np.allclose(forward, backward[::-1], atol=1e-6)


async def test_queries_get_the_instruction_and_passages_do_not(bge: BGESmallEmbedder) -> None:
    text = QUERIES[0]
    [as_query] = await bge.embed_queries([text])
    query_tokens = bge.last_usage.tokens
    [as_passage] = await bge.embed([text])
    assert query_tokens == len(bge.tokenize([QUERY_INSTRUCTION + text])[0]) > bge.last_usage.tokens
    assert np.abs(np.asarray(as_query) - np.asarray(as_passage)).max() > 1e-3
    [prefixed] = await bge.embed([QUERY_INSTRUCTION + text])
    assert np.allclose(as_query, prefixed, atol=1e-6)


async def test_queries_rank_their_passage_first(bge: BGESmallEmbedder) -> None:
    queries = np.asarray(await bge.embed_queries(QUERIES))
    passages = np.asarray(await bge.embed(PASSAGES))
    scores = queries @ passages.T
    for i, row in enumerate(scores):
        ranking = list(np.argsort(-row))
        assert ranking[0] == i, (QUERIES[i], row.round(3).tolist())
        assert row[i] - max(s for j, s in enumerate(row) if j != i) > 0.05, row.round(3).tolist()


async def test_long_text_is_truncated_to_max_seq_length(bge: BGESmallEmbedder) -> None:
    assert len(bge.tokenize([LONG])[0]) == 512
    [full] = await bge.embed([LONG])
    assert bge.last_usage.tokens == 512
    [prefix] = await bge.embed([" ".join(LONG.split()[:1000])])  # > 510 word pieces: same first 512 tokens
    assert np.allclose(full, prefix, atol=1e-6)
    short_window = BGESmallEmbedder(max_seq_length=16)
    [cut] = await short_window.embed([LONG])
    assert short_window.last_usage.tokens == 16
    assert math.isclose(_norm(cut), 1.0, rel_tol=1e-5)


async def test_usage_counts_runs_and_tokens(bge: BGESmallEmbedder) -> None:
    before = bge.total_usage
    texts = ["one", "two words", "three small words", "four", "five"]
    await bge.embed(texts)
    usage = bge.last_usage
    assert usage.model == MODEL_ID
    assert usage.calls == 5  # one onnxruntime run per text (see the module docstring)
    assert usage.tokens == sum(len(ids) for ids in bge.tokenize(texts))
    assert bge.total_usage.tokens == before.tokens + usage.tokens
    assert bge.total_usage.calls == before.calls + 5


async def test_empty_input_returns_nothing_and_costs_nothing(bge: BGESmallEmbedder) -> None:
    await bge.embed(["warm"])
    before = bge.total_usage
    assert await bge.embed([]) == []
    assert (bge.last_usage.calls, bge.last_usage.tokens) == (0, 0)
    assert await bge.embed_queries([]) == []
    assert (bge.last_usage.calls, bge.last_usage.tokens) == (0, 0)
    assert bge.total_usage == before


async def test_event_loop_is_not_blocked(bge: BGESmallEmbedder) -> None:
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0)

    task = asyncio.create_task(ticker())
    await bge.embed(PASSAGES)
    task.cancel()
    assert ticks > 1


def test_missing_model_dir_is_a_configuration_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    missing = tmp_path / "nowhere"
    with pytest.raises(ConfigurationError) as err:
        build_embedder("bge", model_dir=missing)
    message = str(err.value)
    assert str(missing) in message and "make models" in message and ONNX_FILE in message

    monkeypatch.setenv("ORGMEM_MODELS_DIR", str(tmp_path / "models"))
    assert default_model_dir() == tmp_path / "models" / "bge-small-en-v1.5-q"
    with pytest.raises(ConfigurationError, match="make models") as err:
        build_embedder("bge")
    assert str(tmp_path / "models" / "bge-small-en-v1.5-q") in str(err.value)


def test_invalid_settings_are_configuration_errors() -> None:
    with pytest.raises(ConfigurationError, match="max_seq_length"):
        build_embedder("bge", max_seq_length=513)
    with pytest.raises(ConfigurationError, match="max_batch"):
        build_embedder("bge", max_batch=0)
    with pytest.raises(ConfigurationError, match="intra_op_num_threads"):
        build_embedder("bge", intra_op_num_threads=-1)
