"""Run stages (and optionally the HTTP API) in this process until SIGINT/SIGTERM.

Shutdown drains: subscribers stop fetching, the in-flight batch finishes (its transaction commits
and offsets are committed) within ``DRAIN_TIMEOUT_S``, then the pool closes. A batch cut short
rolls back and is redelivered — at-least-once, never lost.
"""

from __future__ import annotations

import asyncio
import logging
import signal

import uvicorn

from embedder.repository import ensure_hnsw_index
from services.api.app import create_app
from services.kafka.topics import ensure_topics
from services.runtime import Runtime, build_runtime
from services.settings import Settings
from services.stages import register_stages

log = logging.getLogger("orgmem.serve")
DRAIN_TIMEOUT_S = 30.0


async def start_runtime(settings: Settings, stages: list[str]) -> Runtime:
    await ensure_topics(settings)
    rt = await build_runtime(settings)
    try:
        register_stages(rt, stages)
        if "embed" in stages:
            async with rt.pool.acquire() as conn:
                await ensure_hnsw_index(conn, rt.embedding.model, rt.embedding.dim)
        await rt.start()
    except BaseException:
        await rt.close()
        raise
    return rt


async def stop_runtime(rt: Runtime) -> None:
    try:
        await asyncio.wait_for(rt.broker.stop(), DRAIN_TIMEOUT_S)
    except TimeoutError:
        log.warning("broker did not drain within %.0fs", DRAIN_TIMEOUT_S)
    finally:
        await rt.close()


async def serve(settings: Settings, stages: list[str], *, api: bool, host: str, port: int) -> None:
    if api:
        settings.require_api_key()  # fail at boot, naming the setting
    rt = await start_runtime(settings, stages)
    log.info("running stages %s%s", ", ".join(stages) or "(none)", f" + API on {host}:{port}" if api else "")
    try:
        if api:
            config = uvicorn.Config(create_app(rt), host=host, port=port, log_level="warning", access_log=False,
                                    lifespan="off")
            await uvicorn.Server(config).serve()
        else:
            stop = asyncio.Event()
            loop = asyncio.get_running_loop()
            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.add_signal_handler(sig, stop.set)
            await stop.wait()
    finally:
        await stop_runtime(rt)
