"""asyncpg pool bound to the projection schema, with pgvector codecs registered."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar
from typing import Any

import asyncpg
from pgvector.asyncpg import register_vector

from services.errors import TransientError
from services.settings import Settings


def quote_ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


# Per-request database time budget (ms): set by the HTTP door for the route being served, applied to
# every connection the request acquires (``SET statement_timeout``; the pool's RESET ALL on release
# clears it). ``None`` = the server default (stages, CLI).
STATEMENT_BUDGET_MS: ContextVar[int | None] = ContextVar("orgmem_statement_budget_ms", default=None)


@contextlib.contextmanager
def statement_budget(ms: int | None) -> Iterator[None]:
    """Bound every statement run on connections acquired inside the block to ``ms`` milliseconds."""
    token = STATEMENT_BUDGET_MS.set(ms)
    try:
        yield
    finally:
        STATEMENT_BUDGET_MS.reset(token)


async def _apply_budget(conn: asyncpg.Connection) -> None:
    ms = STATEMENT_BUDGET_MS.get()
    if ms is not None:
        await conn.execute(f"SET statement_timeout = {int(ms)}")


async def _init_connection(conn: asyncpg.Connection) -> None:
    with contextlib.suppress(ValueError):  # no vector extension yet (unmigrated database)
        await register_vector(conn)


async def create_pool(settings: Settings, *, schema: str | None = None, **kwargs: Any) -> asyncpg.Pool:
    """Pool whose connections see ``schema`` (default: the settings' projection schema) then public."""
    target = schema or settings.db_schema

    try:
        pool = await asyncpg.create_pool(
            settings.database_url,
            min_size=kwargs.pop("min_size", settings.db_pool_min),
            max_size=kwargs.pop("max_size", settings.db_pool_max),
            init=_init_connection,
            setup=_apply_budget,
            # a startup parameter, so the pool's RESET ALL on release keeps it
            server_settings={"search_path": f"{quote_ident(target)}, public"},
            command_timeout=kwargs.pop("command_timeout", 60),
            **kwargs,
        )
    except (OSError, asyncpg.PostgresError) as exc:
        raise TransientError("cannot connect to Postgres", error=type(exc).__name__) from exc
    assert pool is not None
    return pool
