"""What a child chunk is embedded and hashed as: ingest hashes it, the embedder embeds it."""

from __future__ import annotations


def embedding_input(title: str | None, text: str) -> str:
    """The text a child chunk is embedded and hashed as (title gives short chunks their context)."""
    return f"{title}\n\n{text}" if title else text
