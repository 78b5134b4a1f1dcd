"""The model-in-a-child-process wrapper keeps the Embedder contract of the provider it hosts."""

from __future__ import annotations

import numpy as np
import pytest

from embedder.hashing import HashingEmbedder
from embedder.minilm import MiniLMEmbedder
from embedder.process import ProcessEmbedder
from services.errors import ConfigurationError
from services.ports import Embedder

pytestmark = pytest.mark.unit

TEXTS = ["Dana moved the quarterly budget review to Friday.", "Kafka migration is blocked on legal.", "ok"]


async def test_hosted_provider_gives_the_same_vectors_ids_and_spend_as_in_process() -> None:
    hosted = ProcessEmbedder("hash", dim=32, max_batch=2)
    try:
        local = HashingEmbedder(dim=32, max_batch=2)
        assert isinstance(hosted, Embedder)
        assert (hosted.model, hosted.dim, hosted.max_batch) == (local.model, local.dim, local.max_batch)
        got = await hosted.embed(TEXTS)
        want = await local.embed(TEXTS)
        assert np.allclose(got, want, atol=1e-6)
        assert hosted.last_usage == local.last_usage  # calls and tokens counted by the child, reported here
        assert np.allclose(await hosted.embed_queries(TEXTS[:1]), await local.embed_queries(TEXTS[:1]), atol=1e-6)
        assert await hosted.embed([]) == [] and hosted.last_usage.calls == 0
        assert hosted.total_usage.calls == 2 + 1
    finally:
        await hosted.aclose()
    with pytest.raises(RuntimeError, match="after aclose"):
        await hosted.embed(TEXTS)
    await hosted.aclose()  # idempotent


async def test_minilm_in_a_child_process_matches_minilm_in_this_one() -> None:
    hosted = ProcessEmbedder("local")
    try:
        got = np.asarray(await hosted.embed(TEXTS))
        want = np.asarray(await MiniLMEmbedder().embed(TEXTS))
        assert got.shape == (3, 384)
        assert float(np.min(np.sum(got * want, axis=1))) > 0.999999
    finally:
        await hosted.aclose()


async def test_bge_in_a_child_process_gives_the_standalone_vectors_bit_for_bit() -> None:
    from embedder.bge import BGESmallEmbedder

    hosted = ProcessEmbedder("bge", intra_op_num_threads=1)
    try:
        alone = BGESmallEmbedder()
        assert (hosted.model, hosted.dim, hosted.max_batch) == (alone.model, alone.dim, alone.max_batch)
        assert await hosted.embed(TEXTS) == await alone.embed(TEXTS)
        assert await hosted.embed_queries(TEXTS[:1]) == await alone.embed_queries(TEXTS[:1])
        assert hosted.last_usage == alone.last_usage
    finally:
        await hosted.aclose()


def test_a_bad_setting_fails_at_construction_naming_it() -> None:
    with pytest.raises(ConfigurationError, match="unknown settings"):
        ProcessEmbedder("hash", no_such_setting=1)
