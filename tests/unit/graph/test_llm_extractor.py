"""LLM extraction path with a fake OpenAI-compatible client (no vendor): windows, registry binding,
budget and error mapping."""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

import httpx
import openai
import pytest

from extractor.llm import LlmExtractor
from services.errors import VendorError, VendorRejectedError
from services.taxonomy import default_registry

TEXT = "Ada Byron founded Analytical Engines Inc. She likes tea."


class FakeConn:
    def __init__(self, spent: int = 0) -> None:
        self.spent = spent

        self.executed: list[tuple[Any, ...]] = []

    async def fetchval(self, *_: Any) -> int:
        return self.spent

    async def fetchrow(self, *_: Any) -> None:  # no budget row: the extractor's default applies
        return None

    async def execute(self, *args: Any) -> str:
        self.executed.append(args)
        return "INSERT 0 1"


class FakeClient:
    def __init__(self, reply: dict[str, Any] | Exception) -> None:
        self.reply = reply
        self.calls = 0
        self.chat = SimpleNamespace(completions=SimpleNamespace(create=self.create))

    async def create(self, **kwargs: Any) -> Any:
        self.calls += 1
        assert kwargs["response_format"]["type"] == "json_schema"
        if isinstance(self.reply, Exception):
            raise self.reply
        msg = SimpleNamespace(content=json.dumps(self.reply))
        return SimpleNamespace(choices=[SimpleNamespace(message=msg)], usage=SimpleNamespace(total_tokens=42))


def _link(predicate: str, otype: str) -> dict[str, Any]:
    return {
        "subject": {"type": "person", "name": "Ada Byron"},
        "predicate": predicate,
        "object": {"type": otype, "name": "Analytical Engines Inc"},
        "value": None,
        "confidence": 0.99,
        "evidence": "Ada Byron founded Analytical Engines Inc",
    }


async def test_registry_bound_links_and_spend() -> None:
    client = FakeClient({"links": [_link("founded", "organization"), _link("invented", "organization")]})
    llm = LlmExtractor(client, model="m", registry=default_registry())
    links = await llm.extract(FakeConn(), "w", TEXT)
    assert [(lk.predicate, lk.object.name if lk.object else None) for lk in links] == [
        ("founded", "Analytical Engines Inc")
    ]
    assert links[0].confidence <= 0.9 and links[0].span[0] == 0
    [row] = llm.take_spend()
    assert row[1:] == ("w", "openai", "m", "extract", 1, 1, 42) and llm.take_spend() == []


async def test_budget_exhausted_skips_the_vendor() -> None:
    client = FakeClient({"links": []})
    llm = LlmExtractor(client, model="m", registry=default_registry(), daily_token_budget=100)
    conn = FakeConn(spent=100)
    assert await llm.extract(conn, "w", TEXT) == []
    assert client.calls == 0
    [refusal] = conn.executed  # the stop is recorded with its reason
    assert "spend_refusals" in refusal[0] and refusal[2:] == ("w", "m", "extract", "budget_exhausted")


async def test_vendor_errors_map_to_transient_and_permanent() -> None:
    req = httpx.Request("POST", "http://x")
    down = openai.InternalServerError("boom", response=httpx.Response(503, request=req), body=None)  # type: ignore[arg-type]
    bad = openai.BadRequestError("no", response=httpx.Response(400, request=req), body=None)  # type: ignore[arg-type]
    with pytest.raises(VendorError):
        await LlmExtractor(FakeClient(down), model="m", registry=default_registry()).extract(FakeConn(), "w", TEXT)
    with pytest.raises(VendorRejectedError):
        await LlmExtractor(FakeClient(bad), model="m", registry=default_registry()).extract(FakeConn(), "w", TEXT)
    garbled = FakeClient({"nope": 1})
    assert await LlmExtractor(garbled, model="m", registry=default_registry()).extract(FakeConn(), "w", TEXT) == []


async def test_probe_is_down_only_for_what_extraction_would_retry() -> None:
    req = httpx.Request("POST", "http://x")
    calls: list[dict[str, Any]] = []

    def client(exc: Exception | None) -> Any:
        async def create(**kwargs: Any) -> Any:
            calls.append(kwargs)
            if exc is not None:
                raise exc
            return SimpleNamespace(choices=[])

        return SimpleNamespace(chat=SimpleNamespace(completions=SimpleNamespace(create=create)))

    down = openai.InternalServerError("boom", response=httpx.Response(503, request=req), body=None)  # type: ignore[arg-type]
    limited = openai.RateLimitError("slow", response=httpx.Response(429, request=req), body=None)  # type: ignore[arg-type]
    bad = openai.BadRequestError("no", response=httpx.Response(400, request=req), body=None)  # type: ignore[arg-type]
    unreachable = openai.APIConnectionError(request=req)  # type: ignore[arg-type]
    for exc in (down, limited, unreachable):
        with pytest.raises(VendorError):
            await LlmExtractor(client(exc), model="m", registry=default_registry()).probe()
    await LlmExtractor(client(bad), model="m", registry=default_registry()).probe()  # it answers: it is up
    await LlmExtractor(client(None), model="m", registry=default_registry()).probe()
    assert all(c["max_tokens"] == 1 for c in calls) and len(calls) == 5
