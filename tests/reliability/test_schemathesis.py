"""schemathesis (4.x) against the OpenAPI document the running API serves: generated valid and invalid
requests for every operation, for a bounded number of examples — no 5xx, and every status code,
content type and body conforms to the document (errors included, in the project's shape)."""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
import schemathesis
import uvicorn
from hypothesis import HealthCheck, Phase, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st
from schemathesis.checks import not_a_server_error
from schemathesis.core.failures import FailureGroup
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from services.api.app import create_app
from services.settings import Settings

PORT = int(os.environ.get("ORGMEM_TEST_API_PORT", "8020"))
EXAMPLES = int(os.environ.get("ORGMEM_SCHEMATHESIS_EXAMPLES", "300"))
HEADERS = {"X-Api-Key": "test-key", "X-Principal-Groups": f"group:{uuid.uuid4()}"}
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
    response_headers_conformance,
]


@pytest.fixture
async def served(settings: Settings, pipeline: Any) -> AsyncIterator[str]:
    rt = await pipeline("ingest")
    server = uvicorn.Server(uvicorn.Config(create_app(rt), host="127.0.0.1", port=PORT, log_level="warning"))
    task = asyncio.create_task(server.serve())
    base = f"http://127.0.0.1:{PORT}"
    async with httpx.AsyncClient() as c:
        for _ in range(100):
            try:
                if (await c.get(f"{base}/healthz")).status_code == 200:
                    break
            except httpx.TransportError:
                await asyncio.sleep(0.05)
    try:
        yield base
    finally:
        server.should_exit = True
        await task


def run_schemathesis(base: str, examples: int) -> tuple[int, list[str]]:
    """Blocking (schemathesis calls with requests): run in a thread while the server runs in the loop."""
    schema = schemathesis.openapi.from_url(f"{base}/openapi.json")
    strategy = st.one_of(
        schema.as_strategy(headers=HEADERS),
        schema.as_strategy(schemathesis.GenerationMode.NEGATIVE, headers=HEADERS),
    )
    failures: list[str] = []
    calls = 0
    statuses: dict[str, int] = {}

    @hsettings(
        max_examples=examples,
        deadline=None,
        database=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(strategy)
    def one(case: Any) -> None:
        nonlocal calls
        response = case.call(base_url=base, headers=HEADERS, timeout=30)
        calls += 1
        key = f"{case.method} {case.path} {response.status_code}"
        statuses[key] = statuses.get(key, 0) + 1
        try:
            case.validate_response(response, checks=CHECKS, headers=HEADERS)
        except FailureGroup as group:
            failures.append(f"{case.method} {case.path} -> {response.status_code}: {str(group)[:600]}")

    one()
    print("schemathesis calls by operation and status:", sorted(statuses.items()))
    return calls, failures


# schemathesis draws with ``random`` inside its strategies (its business, not ours)
QUIET = pytest.mark.filterwarnings("ignore::hypothesis.errors.HypothesisDeprecationWarning")


@QUIET
async def test_schemathesis_finds_no_5xx_and_no_schema_violation(served: str) -> None:
    calls, failures = await asyncio.to_thread(run_schemathesis, served, EXAMPLES)
    assert calls >= EXAMPLES // 2, calls
    assert not failures, f"{len(failures)} of {calls} calls failed:\n" + "\n\n".join(failures[:10])


@QUIET
@pytest.mark.slow
@pytest.mark.skipif(os.environ.get("ORGMEM_FUZZ_LONG") != "1", reason="long budget: make test-reliability")
async def test_schemathesis_long_budget(served: str) -> None:
    calls, failures = await asyncio.to_thread(run_schemathesis, served, 10 * EXAMPLES)
    assert not failures, f"{len(failures)} of {calls} calls failed:\n" + "\n\n".join(failures[:10])
