"""Ordered, versioned SQL migrations (``services/db/migrations/NNNN_name.sql``).

``orgmem migrate`` applies the missing ones, each in its own transaction, recording them in
``<schema>.schema_migrations``. Services call ``check_schema`` at boot and refuse to start on an
unmigrated database or on one migrated by newer code.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

import asyncpg

from services.db.pool import quote_ident
from services.errors import SchemaVersionError

MIGRATIONS_DIR = Path(__file__).parent / "migrations"
_NAME = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")
_LOCK_ID = 727_001  # pg advisory lock serialising concurrent `migrate` runs


@dataclass(frozen=True, slots=True)
class Migration:
    version: int
    name: str
    sql: str

    @property
    def checksum(self) -> str:
        return hashlib.sha256(self.sql.encode()).hexdigest()[:16]


def load_migrations(directory: Path = MIGRATIONS_DIR) -> list[Migration]:
    found: list[Migration] = []
    for path in sorted(directory.glob("*.sql")):
        m = _NAME.match(path.name)
        if not m:
            raise SchemaVersionError(f"migration file name not NNNN_name.sql: {path.name}")
        found.append(Migration(int(m.group(1)), m.group(2), path.read_text()))
    versions = [m.version for m in found]
    if versions != list(range(1, len(found) + 1)):
        raise SchemaVersionError(f"migrations must be numbered 1..n without gaps, found {versions}")
    return found


def code_version() -> int:
    return len(load_migrations())


async def _applied(conn: asyncpg.Connection, schema: str) -> dict[int, str]:
    exists = await conn.fetchval(
        "SELECT 1 FROM information_schema.tables WHERE table_schema = $1 AND table_name = 'schema_migrations'",
        schema,
    )
    if not exists:
        return {}
    rows = await conn.fetch(f"SELECT version, checksum FROM {quote_ident(schema)}.schema_migrations")
    return {r["version"]: r["checksum"] for r in rows}


async def migrate(dsn: str, schema: str) -> list[Migration]:
    """Apply pending migrations to ``schema``; returns the ones applied now."""
    conn = await asyncpg.connect(dsn)
    applied_now: list[Migration] = []
    try:
        await conn.execute("SELECT pg_advisory_lock($1)", _LOCK_ID)
        await conn.execute("CREATE EXTENSION IF NOT EXISTS vector WITH SCHEMA public")
        # trigram similarity for name resolution where the server ships it (the embedded Postgres 18 does);
        # optional on user DSNs, so its absence is not an error
        if await conn.fetchval("SELECT 1 FROM pg_available_extensions WHERE name = 'pg_trgm'"):
            await conn.execute("CREATE EXTENSION IF NOT EXISTS pg_trgm WITH SCHEMA public")
        await conn.execute(f"CREATE SCHEMA IF NOT EXISTS {quote_ident(schema)}")
        await conn.execute(
            f"CREATE TABLE IF NOT EXISTS {quote_ident(schema)}.schema_migrations ("
            " version integer PRIMARY KEY, name text NOT NULL, checksum text NOT NULL,"
            " applied_at timestamptz NOT NULL DEFAULT now())"
        )
        applied = await _applied(conn, schema)
        migrations = load_migrations()
        newest = max(applied, default=0)
        if newest > len(migrations):
            raise SchemaVersionError(
                f"schema {schema} is at version {newest}, newer than this code ({len(migrations)})"
            )
        for mig in migrations:
            if mig.version in applied:
                continue
            async with conn.transaction():
                await conn.execute(f"SET LOCAL search_path TO {quote_ident(schema)}, public")
                await conn.execute(mig.sql)
                await conn.execute(
                    f"INSERT INTO {quote_ident(schema)}.schema_migrations (version, name, checksum)"
                    " VALUES ($1, $2, $3)",
                    mig.version,
                    mig.name,
                    mig.checksum,
                )
            applied_now.append(mig)
    finally:
        try:
            await conn.execute("SELECT pg_advisory_unlock($1)", _LOCK_ID)
        finally:
            await conn.close()
    return applied_now


async def check_schema(conn: asyncpg.Connection, schema: str) -> int:
    """Raise ``SchemaVersionError`` unless ``schema`` is exactly at the code's migration version."""
    applied = await _applied(conn, schema)
    want = code_version()
    have = max(applied, default=0)
    if have < want:
        raise SchemaVersionError(
            f"database schema {schema} is at version {have}, code needs {want}: run `orgmem migrate`",
            schema=schema,
        )
    if have > want:
        raise SchemaVersionError(
            f"database schema {schema} is at version {have}, newer than this code ({want})", schema=schema
        )
    return have
