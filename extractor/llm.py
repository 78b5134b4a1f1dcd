"""Optional LLM extraction through any OpenAI-compatible chat endpoint (``openai.AsyncOpenAI``).

Rules:
- One call per overlapping window (``extractor.windows.split_windows``, 4,000 chars, 400 overlap) with
  ``response_format`` = the registry-bound JSON schema; replies go through ``parse_llm_output`` (anything
  outside the registry is dropped) and windows merge with ``dedup_links``.
- Budget: the workspace's budget (``PUT /v1/admin/budgets/{workspace}``, else ``daily_token_budget``)
  tokens per day, counted in ``spend``; a document whose windows would exceed it is extracted by the
  zero-LLM path only, and the refusal is recorded with its reason (``services.governance.budgets``).
- Vendor failures: 5xx / 429 / timeouts / connection errors -> ``VendorError`` (retried; after the
  budget the stage's watch calls ``probe`` — vendor down: the stage pauses until it answers again; vendor
  up: the document is dead-lettered); other 4xx -> ``VendorRejectedError`` (dead letter). An unparseable
  reply is dropped (logged). A failed call never yields a guessed fact.
"""

from __future__ import annotations

import json
import logging
from datetime import date
from typing import Any

import asyncpg
import openai

from extractor.links import ExtractedLink, dedup_links
from extractor.llm_schema import build_messages, parse_llm_output, response_format
from extractor.windows import split_windows
from services.errors import ConfigurationError, InvalidPayloadError, VendorError, VendorRejectedError
from services.governance import budgets
from services.settings import Settings
from services.taxonomy.registry import Registry

log = logging.getLogger("orgmem.extract.llm")
PURPOSE = "extract"
WINDOW = 4000
OVERLAP = 400
DEFAULT_DAILY_TOKENS = 2_000_000
CHARS_PER_TOKEN = 4


class LlmExtractor:
    def __init__(
        self,
        client: Any,
        *,
        model: str,
        registry: Registry,
        provider: str = "openai",
        daily_token_budget: int = DEFAULT_DAILY_TOKENS,
    ) -> None:
        self.client = client
        self.model = model
        self.registry = registry
        self.provider = provider
        self.budget = daily_token_budget
        self._spend: dict[str, list[int]] = {}  # workspace -> [calls, items, tokens] not yet recorded

    @classmethod
    def from_settings(cls, s: Settings, registry: Registry) -> LlmExtractor:
        key = s.llm_api_key.get_secret_value() if s.llm_api_key else None
        if not key and not s.llm_base_url:
            raise ConfigurationError("LLM extraction needs LLM_API_KEY or LLM_BASE_URL", setting="LLM_API_KEY")
        client = openai.AsyncOpenAI(api_key=key or "unused", base_url=s.llm_base_url, max_retries=0, timeout=60)
        return cls(client, model=s.llm_model, registry=registry)

    async def aclose(self) -> None:
        await self.client.close()

    def take_spend(self) -> list[tuple[object, ...]]:
        rows: list[tuple[object, ...]] = [
            (date.today(), ws, self.provider, self.model, PURPOSE, c, i, t) for ws, (c, i, t) in self._spend.items()
        ]
        self._spend.clear()
        return rows

    async def probe(self) -> None:
        """Is the vendor answering? One 1-token completion (not counted against a workspace's budget).
        Raises ``VendorError`` for what ``_window`` would retry (connection, timeout, 5xx, 429); any other
        answer, even a 4xx, means the vendor is there."""
        try:
            await self.client.chat.completions.create(
                model=self.model, messages=[{"role": "user", "content": "ping"}], max_tokens=1, temperature=0
            )
        except openai.APIConnectionError as exc:
            raise VendorError(f"LLM probe failed: {exc}", model=self.model) from exc
        except openai.APIStatusError as exc:
            if exc.status_code >= 500 or exc.status_code == 429:
                raise VendorError(f"LLM probe failed with HTTP {exc.status_code}", model=self.model) from exc

    async def extract(self, conn: asyncpg.Connection, workspace: str, text: str) -> list[ExtractedLink]:
        windows = split_windows(text, size=WINDOW, overlap=OVERLAP)
        estimate = sum(len(w.text) for w in windows) // CHARS_PER_TOKEN + 500 * len(windows)
        pending = self._spend.get(workspace, [0, 0, 0])[2]
        admission = await budgets.admit(
            conn,
            workspace=workspace,
            model=self.model,
            purpose=PURPOSE,
            estimate=estimate,
            pending=pending,
            default_budget=self.budget,
        )
        if not admission.allowed:
            log.warning("LLM extraction stopped for workspace %s (%s); zero-LLM only", workspace, admission.reason)
            return []
        links: list[ExtractedLink] = []
        for w in windows:
            links += await self._window(workspace, w.text, w.start)
        return dedup_links(links)

    async def _window(self, workspace: str, text: str, offset: int) -> list[ExtractedLink]:
        try:
            reply = await self.client.chat.completions.create(
                model=self.model,
                messages=build_messages(text, self.registry),
                response_format=response_format(self.registry),
                temperature=0,
            )
        except openai.APIConnectionError as exc:  # includes timeouts
            raise VendorError(f"LLM call failed: {exc}", model=self.model) from exc
        except openai.APIStatusError as exc:
            err = VendorError if exc.status_code >= 500 or exc.status_code == 429 else VendorRejectedError
            raise err(f"LLM call failed with HTTP {exc.status_code}", model=self.model) from exc
        tokens = getattr(getattr(reply, "usage", None), "total_tokens", 0) or 0
        spend = self._spend.setdefault(workspace, [0, 0, 0])
        spend[0] += 1
        spend[1] += 1
        spend[2] += int(tokens)
        content = reply.choices[0].message.content or ""
        try:
            return parse_llm_output(json.loads(content), self.registry, text=text, offset=offset)
        except (json.JSONDecodeError, InvalidPayloadError) as exc:  # never guess: drop the window's reply
            log.warning("LLM reply dropped (workspace %s, offset %d): %s", workspace, offset, exc)
            return []
