"""Ingest stage: ``om.envelopes.v1`` -> Postgres projection (+ archived envelope) -> chunks/documents events."""
