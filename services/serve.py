"""Run stages (and optionally the HTTP API) in this process until SIGINT/SIGTERM.

Shutdown drains: subscribers stop fetching, the in-flight batch finishes (its transaction commits
and offsets are committed) within ``DRAIN_TIMEOUT_S``, then the pool closes. A batch cut short
rolls back and is redelivered — at-least-once, never lost.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import signal
import socket
from typing import Any

import uvicorn

from embedder.repository import ensure_hnsw_index
from services import generations, tracing
from services.api.app import create_app
from services.api.server import uvicorn_config
from services.consolidation.run import periodic_consolidation
from services.errors import ConfigurationError
from services.kafka.topics import ensure_topics
from services.ops.retention import periodic_retention
from services.runtime import Runtime, build_runtime
from services.settings import Settings
from services.stages import clients_needed, register_stages
from services.wiring import clients_for

log = logging.getLogger("orgmem.serve")
DRAIN_TIMEOUT_S = 30.0


async def start_runtime(settings: Settings, stages: list[str], *, api: bool = True) -> Runtime:
    """Build the runtime with the clients ``stages`` (and, with ``api``, the HTTP tools) need; register them."""
    await ensure_topics(settings)
    rt = await build_runtime(settings, clients_for(clients_needed(stages, api=api)))
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


async def _follow_generation(base: Settings, stages: list[str], holder: dict[str, Runtime], app: Any) -> None:
    """Restart the runtime on the new projection generation when `orgmem rebuild` switches it."""
    while True:
        await asyncio.sleep(generations.POLL_S)
        try:
            wanted = await generations.resolve(base)
        except Exception as exc:  # a transient DB error must not kill the watcher
            log.warning("cannot read the active generation: %s", exc)
            continue
        current = holder["rt"]
        if wanted.db_schema == current.settings.db_schema:
            continue
        log.info(
            "projection generation switched to %s (%s): restarting stages",
            wanted.generation,
            wanted.db_schema,
        )
        fresh = await start_runtime(wanted, stages, api=app is not None)
        holder["rt"] = fresh
        if app is not None:
            app.state.runtime = fresh
        await stop_runtime(current)


def bind_api_socket(host: str, port: int) -> socket.socket:
    """The API's listening socket, bound before anything else starts: a busy port stops the process at once
    (``ConfigurationError``, exit 2, naming the address) instead of leaving stages running without an API."""
    try:
        family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
    except OSError as exc:
        raise ConfigurationError(f"API host {host!r} does not resolve ({exc})", setting="API_HOST") from None
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn does: TIME_WAIT is not "in use"
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        reason = "in use" if exc.errno == errno.EADDRINUSE else f"not available ({exc.strerror})"
        raise ConfigurationError(
            f"API address {host}:{port} is {reason}: is another `orgmem up` running? stop it, or set API_PORT / --port",
            setting="API_PORT",
        ) from None
    sock.set_inheritable(True)
    return sock


async def serve(base: Settings, stages: list[str], *, api: bool, host: str, port: int) -> None:
    # the API needs no SERVICE_API_KEY: without it only scoped keys (``orgmem keys``) are accepted
    sock: socket.socket | None = None
    if api:
        sock = bind_api_socket(host, port)
    if tracing.configure(base):
        log.info("tracing: exporting spans over OTLP")
    settings = await generations.resolve(base)
    rt = await start_runtime(settings, stages, api=api)
    holder = {"rt": rt}
    log.info(
        "running stages %s%s on schema %s",
        ", ".join(stages) or "(none)",
        f" + API on {host}:{port}" if api else "",
        settings.db_schema,
    )
    app = create_app(rt) if api else None
    watcher = asyncio.create_task(_follow_generation(base, stages, holder, app))
    retention_task = (
        asyncio.create_task(periodic_retention(settings, lambda: (holder["rt"].pool, holder["rt"].store)))
        if set(stages) >= {"ingest"}
        else None
    )
    consolidation_task = (
        asyncio.create_task(periodic_consolidation(settings, lambda: holder["rt"].pool))
        if settings.consolidation_enabled and set(stages) >= {"ingest"}
        else None
    )
    try:
        if app is not None:
            config = uvicorn_config(app, settings, host=host, port=port)
            await uvicorn.Server(config).serve(sockets=[sock] if sock is not None else None)
        else:
            stop = asyncio.Event()
            loop = asyncio.get_running_loop()
            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.add_signal_handler(sig, stop.set)
            await stop.wait()
    finally:
        if sock is not None:
            sock.close()
        watcher.cancel()
        for task in (retention_task, consolidation_task):
            if task is not None:
                task.cancel()
        await stop_runtime(holder["rt"])
