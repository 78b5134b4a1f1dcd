"""Optional vendor adapters of the read path (ports ``services.ports.Reranker`` / ``Synthesizer``).

- ``HttpReranker``: Cohere/TEI-style ``POST <rerank_url>`` with ``{"query", "documents"/"texts", "top_n"}``;
  accepts ``{"results": [{"index", "relevance_score"}]}`` (Cohere, Jina) or ``[{"index", "score"}]`` (TEI).
  Errors surface (``VendorError`` for timeouts/5xx/429, ``VendorRejectedError`` for other 4xx or a
  malformed body): a failed rerank never silently falls back to the unreranked order.
- ``ChatSynthesizer``: OpenAI-compatible chat completions through ``openai.AsyncOpenAI``. The caller
  degrades to a numbered citation list when it is absent or fails (synthesis is a convenience).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import httpx

from services.errors import VendorError, VendorRejectedError

SYNTHESIS_SYSTEM = (
    "You answer questions for a workplace assistant using ONLY the numbered passages given. "
    "Cite every claim with its passage number in square brackets, like [2]. If the passages do not "
    "answer the question, say so briefly. Be concise."
)


class HttpReranker:
    def __init__(
        self,
        url: str,
        *,
        api_key: str | None = None,
        model: str | None = None,
        timeout: float = 10.0,
        client: httpx.AsyncClient | None = None,
    ) -> None:
        self.url = url
        self.model = model
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.client = client or httpx.AsyncClient(timeout=timeout, headers=headers)

    async def rerank(self, query: str, texts: Sequence[str]) -> list[tuple[int, float]]:
        """(index into ``texts``, relevance) best first."""
        body: dict[str, Any] = {
            "query": query,
            "documents": list(texts),
            "texts": list(texts),
            "top_n": len(texts),
            "return_documents": False,
        }
        if self.model:
            body["model"] = self.model
        try:
            resp = await self.client.post(self.url, json=body)
        except httpx.HTTPError as exc:
            raise VendorError("rerank call failed", vendor="rerank", error=type(exc).__name__) from exc
        if resp.status_code >= 500 or resp.status_code == 429:
            raise VendorError("rerank vendor error", vendor="rerank", status=resp.status_code)
        if resp.status_code >= 400:
            raise VendorRejectedError(
                "rerank vendor rejected the request",
                vendor="rerank",
                status=resp.status_code,
                body=resp.text[:200],
            )
        try:
            data = resp.json()
            items = data["results"] if isinstance(data, dict) else data
            out = [(int(i["index"]), float(i.get("relevance_score", i.get("score")))) for i in items]
        except (ValueError, KeyError, TypeError) as exc:
            raise VendorRejectedError("rerank response malformed", vendor="rerank") from exc
        if any(not 0 <= i < len(texts) for i, _ in out):
            raise VendorRejectedError("rerank response index out of range", vendor="rerank")
        return sorted(out, key=lambda p: (-p[1], p[0]))

    async def aclose(self) -> None:
        await self.client.aclose()


class ChatSynthesizer:
    def __init__(self, base_url: str, *, api_key: str | None, model: str, timeout: float = 30.0) -> None:
        from openai import AsyncOpenAI

        self.model = model
        self.client = AsyncOpenAI(base_url=base_url, api_key=api_key or "none", timeout=timeout, max_retries=1)

    async def synthesize(self, query: str, passages: Sequence[str]) -> str:
        numbered = "\n\n".join(f"[{i}] {p}" for i, p in enumerate(passages, start=1))
        try:
            resp = await self.client.chat.completions.create(
                model=self.model,
                temperature=0,
                messages=[
                    {"role": "system", "content": SYNTHESIS_SYSTEM},
                    {"role": "user", "content": f"Passages:\n{numbered}\n\nQuestion: {query}"},
                ],
            )
        except Exception as exc:  # any client/vendor failure: the caller degrades and says why
            raise VendorError("synthesis call failed", vendor="llm", error=type(exc).__name__) from exc
        text = (resp.choices[0].message.content or "").strip() if resp.choices else ""
        if not text:
            raise VendorRejectedError("synthesis returned no text", vendor="llm")
        return text

    async def aclose(self) -> None:
        await self.client.close()
