"""Data contracts only (pydantic v2): events on Kafka topics and tool requests/responses.

No I/O lives here. ``python -m schemas.export`` writes the JSON Schema files in ``schemas/json``.
"""
