"""Contract of ``preload``: the block an agent framework injects before a turn (relevance-conditioned
preload) instead of a whole memory file — the viewer's top memories and passages for the current turn,
deduplicated, packed to a token budget, with numbered citations.

One source: the classes are the agent SDK's (:mod:`orgmem_sdk.models`), re-exported here.
"""

from __future__ import annotations

from orgmem_sdk.models import (
    DEFAULT_PRELOAD_TOKENS,
    MAX_PRELOAD_TOP_K,
    PreloadItem,
    PreloadRequest,
    PreloadResponse,
)

__all__ = ["DEFAULT_PRELOAD_TOKENS", "MAX_PRELOAD_TOP_K", "PreloadItem", "PreloadRequest", "PreloadResponse"]
