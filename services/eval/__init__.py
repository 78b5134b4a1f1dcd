"""Offline evaluation of retrieval quality and ACL safety.

- ``gold``: the gold-set format (``GoldQuery``) and the predictions format (``Prediction``),
  both JSON Lines, with errors that name the file, line and field.
- ``metrics``: hit@k, recall@k, precision@k, MRR@10, nDCG@10 and leak rate, per category and
  overall, in a ``Report`` (plain-text table, JSON, side-by-side comparison of arms).
- ``datasets``: loaders for the common JSONL layout (``events.jsonl`` → ``ChangeEnvelope``,
  ``queries.jsonl`` → ``GoldQuery``) used by the public data sets and by the repository's own
  demo corpus in ``deploy/demo``; deterministic uuids for envelopes and group principals.

Pure logic plus file reading: nothing here talks to Kafka or Postgres. The live runner pushes
the loaded envelopes through the pipeline, calls ``retrieve_context`` and writes predictions;
``score_files`` turns gold + predictions into a ``Report``.
"""
