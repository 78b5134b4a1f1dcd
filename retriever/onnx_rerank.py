"""Local cross-encoder reranker: ``RERANK_PROVIDER=onnx`` scores (query, passage) pairs with an ONNX model
the operator supplies by path (``RERANK_MODEL_PATH``; nothing is downloaded).

The model directory (or the ``.onnx`` file's directory) must hold the graph and a Hugging Face
``tokenizer.json`` (``RERANK_TOKENIZER_PATH`` overrides). The graph's inputs are fed by name — any of
``input_ids``, ``attention_mask``, ``token_type_ids`` (int64, ``[1, seq]``) — from the tokenizer's pair
encoding of ``(query, passage)``, truncated to ``max_length`` tokens. The first output is the relevance:
shape ``[1]`` or ``[1, 1]`` gives the score, ``[1, 2]`` (a two-class head) gives the logit of class 1.
Pairs run one at a time (no padding: a score depends on its pair only) in a worker thread.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from services.errors import ConfigurationError

TOKENIZER_FILE = "tokenizer.json"


def _resolve(model_path: Path) -> Path:
    if model_path.is_dir():
        found = sorted(model_path.glob("*.onnx"))
        if len(found) != 1:
            raise ConfigurationError(
                f"RERANK_MODEL_PATH {model_path} must name an .onnx file or a folder with exactly one",
                field="rerank_model_path",
            )
        return found[0]
    if not model_path.is_file():
        raise ConfigurationError(f"RERANK_MODEL_PATH {model_path} does not exist", field="rerank_model_path")
    return model_path


class OnnxReranker:
    """``Reranker`` over a local cross-encoder ONNX graph (see the module docstring)."""

    def __init__(self, model_path: Path, *, tokenizer_path: Path | None = None, max_length: int = 512) -> None:
        import onnxruntime as ort
        from tokenizers import Tokenizer

        model = _resolve(Path(model_path))
        tok = tokenizer_path or model.parent / TOKENIZER_FILE
        if not Path(tok).is_file():
            raise ConfigurationError(
                f"no tokenizer for the rerank model: {tok} is missing", field="rerank_tokenizer_path"
            )
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = 1
        self._session: Any = ort.InferenceSession(str(model), opts, providers=["CPUExecutionProvider"])
        self._inputs = {i.name for i in self._session.get_inputs()}
        if "input_ids" not in self._inputs:
            raise ConfigurationError(f"rerank model {model} has no input_ids input", field="rerank_model_path")
        self._tokenizer = Tokenizer.from_file(str(tok))
        self._tokenizer.enable_truncation(max_length=max_length)
        self.model = model.name

    def score_pairs(self, query: str, texts: Sequence[str]) -> list[float]:
        out: list[float] = []
        for text in texts:
            enc = self._tokenizer.encode(query, text)
            feeds = {
                "input_ids": np.asarray([enc.ids], dtype=np.int64),
                "attention_mask": np.asarray([enc.attention_mask], dtype=np.int64),
                "token_type_ids": np.asarray([enc.type_ids], dtype=np.int64),
            }
            result = self._session.run(None, {k: v for k, v in feeds.items() if k in self._inputs})[0]
            flat = np.asarray(result, dtype=np.float64).reshape(-1)
            out.append(float(flat[1] if flat.size == 2 else flat[0]))
        return out

    async def rerank(self, query: str, texts: Sequence[str]) -> list[tuple[int, float]]:
        scores = await asyncio.to_thread(self.score_pairs, query, list(texts))
        return sorted(enumerate(scores), key=lambda x: (-x[1], x[0]))

    async def aclose(self) -> None:
        """Nothing to release (the session is freed with the object); part of the ``Reranker`` port."""
