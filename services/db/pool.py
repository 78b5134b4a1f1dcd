"""asyncpg pool bound to the projection schema, with pgvector codecs registered."""

from __future__ import annotations

import contextlib
from typing import Any

import asyncpg
from pgvector.asyncpg import register_vector

from services.errors import TransientError
from services.settings import Settings


def quote_ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


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
            # a startup parameter, so the pool's RESET ALL on release keeps it
            server_settings={"search_path": f"{quote_ident(target)}, public"},
            command_timeout=kwargs.pop("command_timeout", 60),
            **kwargs,
        )
    except (OSError, asyncpg.PostgresError) as exc:
        raise TransientError("cannot connect to Postgres", error=type(exc).__name__) from exc
    assert pool is not None
    return pool
