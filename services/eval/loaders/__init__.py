"""Converters from public data-set layouts into the common layout of ``../shared/data`` (``events.jsonl`` +
``queries.jsonl``). The data are read from a path the operator gives and are never committed."""
