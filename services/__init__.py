"""Shared runtime of Org Memory: settings, Postgres, object store, Kafka wiring, API, CLI,
and the smaller stages (conflicts, collaboration)."""
