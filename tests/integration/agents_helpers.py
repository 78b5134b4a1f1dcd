"""Helpers for the agent-surface tests: a real uvicorn server for the API app and MCP client sessions."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator
from typing import Any

import httpx2
import uvicorn
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

PORT = 8030  # this branch's port on the shared machine


def free_port(preferred: int = PORT) -> int:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", preferred))
            return preferred
        except OSError:
            s.bind(("127.0.0.1", 0))
            return int(s.getsockname()[1])


@contextlib.asynccontextmanager
async def serve_app(app: Any, port: int | None = None) -> AsyncIterator[str]:
    """Run ``app`` under uvicorn (lifespan on) on 127.0.0.1; yields the base URL."""
    port = port or free_port()
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", access_log=False, lifespan="on")
    )
    task = asyncio.create_task(server.serve())
    for _ in range(200):
        if server.started:
            break
        if task.done():
            task.result()
        await asyncio.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        await asyncio.wait_for(task, 15)


@contextlib.asynccontextmanager
async def mcp_session(url: str, headers: dict[str, str]) -> AsyncIterator[ClientSession]:
    async with (
        httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30.0)) as http,
        streamable_http_client(f"{url}/mcp", http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session
