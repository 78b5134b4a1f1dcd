"""RERANK_PROVIDER=onnx: a cross-encoder ONNX graph supplied by path scores (query, passage) pairs.

The `onnx` package is not installed, so the test writes a tiny ONNX graph itself (protobuf wire format, a
few fields of onnx.proto): score = ReduceSum(Cast(input_ids)) over the pair — deterministic, so the
expected order is computed independently from the tokenizer."""

from __future__ import annotations

import asyncio
import struct
from pathlib import Path

import pytest
from tokenizers import Tokenizer
from tokenizers.models import WordLevel
from tokenizers.pre_tokenizers import Whitespace
from tokenizers.processors import TemplateProcessing

from retriever.onnx_rerank import OnnxReranker
from services.errors import ConfigurationError
from services.settings import Settings
from services.wiring import build_reranker


def _varint(n: int) -> bytes:
    out = b""
    while True:
        b, n = n & 0x7F, n >> 7
        out += struct.pack("B", b | (0x80 if n else 0))
        if not n:
            return out


def _f(num: int, value: int | str | bytes) -> bytes:
    if isinstance(value, int):
        return _varint(num << 3) + _varint(value)
    data = value.encode() if isinstance(value, str) else value
    return _varint(num << 3 | 2) + _varint(len(data)) + data


def _tensor_info(name: str, elem: int, dims: list[str]) -> bytes:
    shape = b"".join(_f(1, _f(2, d)) for d in dims)
    return _f(1, name) + _f(2, _f(1, _f(1, elem) + _f(2, shape)))


def tiny_cross_encoder(path: Path) -> None:
    """inputs input_ids / attention_mask / token_type_ids (int64 [b, s]) → logits = Σ float(input_ids), [b, 1]."""
    cast = _f(1, "input_ids") + _f(2, "f") + _f(4, "Cast") + _f(5, _f(1, "to") + _f(3, 1) + _f(20, 2))
    axes = _f(1, "axes") + _f(8, 1) + _f(20, 7)
    keep = _f(1, "keepdims") + _f(3, 1) + _f(20, 2)
    reduce = _f(1, "f") + _f(2, "logits") + _f(4, "ReduceSum") + _f(5, axes) + _f(5, keep)
    graph = (
        _f(1, cast)
        + _f(1, reduce)
        + _f(2, "tiny")
        + b"".join(_f(11, _tensor_info(n, 7, ["b", "s"])) for n in ("input_ids", "attention_mask", "token_type_ids"))
        + _f(12, _tensor_info("logits", 1, ["b", "o"]))
    )
    model = _f(1, 6) + _f(8, _f(1, "") + _f(2, 11)) + _f(7, graph)
    path.write_bytes(model)


VOCAB = {"[UNK]": 0, "[CLS]": 1, "[SEP]": 2, "who": 3, "leads": 4, "search": 5, "dana": 40, "lee": 7, "lunch": 9}


def tiny_tokenizer(path: Path) -> Tokenizer:
    tok = Tokenizer(WordLevel(VOCAB, unk_token="[UNK]"))
    tok.pre_tokenizer = Whitespace()
    tok.post_processor = TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1", special_tokens=[("[CLS]", 1), ("[SEP]", 2)]
    )
    tok.save(str(path))
    return tok


def test_onnx_reranker_scores_pairs_with_the_supplied_graph(tmp_path: Path) -> None:
    tiny_cross_encoder(tmp_path / "model.onnx")
    tok = tiny_tokenizer(tmp_path / "tokenizer.json")
    rr = OnnxReranker(tmp_path)  # a folder with one .onnx and tokenizer.json
    texts = ["lunch with lee", "dana leads search", "who", "unknown words only"]
    expected = [float(sum(tok.encode("who leads search", t).ids)) for t in texts]
    assert rr.score_pairs("who leads search", texts) == expected
    order = asyncio.run(rr.rerank("who leads search", texts))
    assert [i for i, _ in order] == sorted(range(len(texts)), key=lambda i: (-expected[i], i))
    assert order[0] == (1, expected[1])  # "dana" carries the largest id


def test_onnx_reranker_refuses_missing_files_naming_the_setting(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError) as err:
        OnnxReranker(tmp_path / "nope.onnx")
    assert err.value.context["field"] == "rerank_model_path"
    tiny_cross_encoder(tmp_path / "model.onnx")
    with pytest.raises(ConfigurationError) as err:
        OnnxReranker(tmp_path / "model.onnx")  # no tokenizer.json beside it
    assert err.value.context["field"] == "rerank_tokenizer_path"


def _settings(**kw: object) -> Settings:
    return Settings(database_url="postgresql://x/y", kafka_bootstrap_servers="127.0.0.1:1", **kw)  # type: ignore[arg-type]


def test_wiring_builds_the_onnx_reranker_from_settings(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError) as err:
        build_reranker(_settings(rerank_provider="onnx"))
    assert err.value.context["field"] == "rerank_model_path"
    with pytest.raises(ConfigurationError):
        build_reranker(_settings(rerank_provider="http"))
    assert build_reranker(_settings()) is None
    tiny_cross_encoder(tmp_path / "model.onnx")
    tiny_tokenizer(tmp_path / "tokenizer.json")
    assert isinstance(build_reranker(_settings(rerank_provider="onnx", rerank_model_path=tmp_path)), OnnxReranker)
