"""Shared bits of the admin API tests: headers and an in-process client over a started runtime."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx

from services.api.app import create_app

ADMIN_ID = f"user:{uuid.uuid4()}"
ADMIN = {"X-Api-Key": "test-key", "X-Principal-Roles": "admin", "X-Principal-Id": ADMIN_ID}
NOT_ADMIN = {"X-Api-Key": "test-key", "X-Principal-Id": ADMIN_ID}


@asynccontextmanager
async def api_client(rt: Any) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=create_app(rt)), base_url="http://t", timeout=60
    ) as client:
        yield client
