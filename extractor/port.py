"""The extractor stage's ports. (The LLM client behind ``LinkSource`` is held by the runtime as
``services.ports.LlmExtraction``; ``extractor.stage.link_source`` narrows it to this port.)"""

from __future__ import annotations

from typing import Protocol

import asyncpg

from extractor.links import ExtractedLink


class LinkSource(Protocol):
    """An optional extra extraction path (the LLM). Returns links and the spend rows it caused."""

    async def extract(self, conn: asyncpg.Connection, workspace: str, text: str) -> list[ExtractedLink]: ...

    def take_spend(self) -> list[tuple[object, ...]]: ...
