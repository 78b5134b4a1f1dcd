"""``orgmem`` command line: migrate, topics, up, run, status, keys, dlq, replay, rebuild, eval, demo."""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import sys
from collections.abc import Callable, Coroutine
from typing import Any

from services.errors import ConfigurationError, OrgMemoryError
from services.settings import Settings, load_settings

Command = Callable[[Settings, argparse.Namespace], Coroutine[Any, Any, int]]


async def cmd_migrate(settings: Settings, args: argparse.Namespace) -> int:
    from embedder.repository import ensure_hnsw_index
    from services import generations
    from services.db.migrate import code_version, migrate
    from services.db.pool import create_pool
    from services.embedding_config import embedding_config

    applied = await migrate(settings.database_url, settings.db_schema)
    for m in applied:
        print(f"applied {m.version:04d}_{m.name}")
    active = await generations.resolve(settings)
    if active.db_schema != settings.db_schema:  # the rebuilt generation in use must be migrated too
        for m in await migrate(settings.database_url, active.db_schema):
            print(f"applied {m.version:04d}_{m.name} to {active.db_schema}")
        settings = active
    pool = await create_pool(settings, min_size=1, max_size=1)
    try:
        emb = embedding_config(settings)
        async with pool.acquire() as conn:
            index = await ensure_hnsw_index(conn, emb.model, emb.dim)
    finally:
        await pool.close()
    print(f"schema {settings.db_schema} at version {code_version()}; vector index {index} ({emb.model})")
    return 0


async def cmd_topics(settings: Settings, args: argparse.Namespace) -> int:
    from services.kafka.topics import apply_topics, describe_topics

    if args.action == "create":
        result = await apply_topics(settings)
        created, updated = result.created, result.updated
        print(f"created {len(created)} topic(s)" + (": " + ", ".join(created) if created else ""))
        print(f"updated the configs of {len(updated)} topic(s)" + (": " + ", ".join(updated) if updated else ""))
    for t in await describe_topics(settings):
        print(f"{t['topic']:32} {'ok' if t['exists'] else 'MISSING':8} partitions={t['partitions']}")
    return 0


async def cmd_serve(settings: Settings, args: argparse.Namespace) -> int:
    from services.serve import serve
    from services.stages import available_stages

    if args.command == "up":
        stages, api = available_stages(), not args.no_api
    else:
        chosen = [*([args.stage] if args.stage else []), *(args.stages or [])]
        if not chosen:
            raise SystemExit("orgmem run: name a stage (orgmem run <stage>, or --stage <name> [--stage ...])")
        known = set(available_stages())
        unknown = [s for s in chosen if s != "api" and s not in known]
        if unknown:
            raise SystemExit(f"orgmem run: unknown stage {', '.join(unknown)} (known: api, {', '.join(sorted(known))})")
        api = args.with_api or "api" in chosen
        stages = list(dict.fromkeys(s for s in chosen if s != "api"))
    await serve(settings, stages, api=api, host=args.host or settings.api_host, port=args.port or settings.api_port)
    return 0


async def cmd_status(settings: Settings, args: argparse.Namespace) -> int:
    from services.db.pool import create_pool
    from services.health import check_kafka, check_postgres, check_store
    from services.objectstore import build_object_store
    from services.stages import available_stages, stage_lag

    rows: dict[str, Any] = {}
    try:
        pool = await create_pool(settings, min_size=1, max_size=1)
        rows["postgres"] = await check_postgres(pool)
        await pool.close()
    except Exception as exc:  # status reports, it does not fail
        rows["postgres"] = f"DOWN {type(exc).__name__}: {exc}"
    for name, coro in (
        ("object_store", check_store(build_object_store(settings))),
        ("kafka", check_kafka(settings.kafka_bootstrap_servers)),
    ):
        try:
            rows[name] = await asyncio.wait_for(coro, 10)
        except Exception as exc:  # status reports, it does not fail
            rows[name] = f"DOWN {type(exc).__name__}: {exc}"
    lags: dict[str, Any] = {}
    if not str(rows["kafka"]).startswith("DOWN"):
        for stage in available_stages():
            try:
                lag = await stage_lag(settings, stage)
                lags[stage] = {"group": lag.group, "topic": lag.topic, "lag": lag.lag}
            except Exception as exc:  # status reports, it does not fail
                lags[stage] = {"error": f"{type(exc).__name__}: {exc}"}
    print(json.dumps({"infrastructure": rows, "consumer_lag": lags}, indent=2, default=str))
    return 0


async def cmd_mcp(settings: Settings, args: argparse.Namespace) -> int:
    """MCP over stdio for desktop clients; the principal is fixed at start (flags or ORGMEM_MCP_* env).

    Without explicit groups the principal's groups are re-read from the org directory on every tool call,
    so a member removed from a team loses its data and its team-scoped writes without a restart."""
    import os

    from services import directory
    from services.api.mcp import build_mcp_server, parse_stdio_principal
    from services.runtime import build_runtime
    from services.viewer import Viewer
    from services.wiring import build_clients

    principal = args.principal or os.environ.get("ORGMEM_MCP_PRINCIPAL")
    raw_groups = args.groups if args.groups is not None else os.environ.get("ORGMEM_MCP_GROUPS")
    pid, groups = parse_stdio_principal(principal, raw_groups)
    rt = await build_runtime(settings, build_clients)  # the retriever needs the embedder
    static = directory.load_static_members(settings.org_hierarchy_path)

    async def viewer_of(_: Any) -> Viewer:
        if groups is not None:
            return Viewer(pid, groups, frozenset())
        return Viewer(pid, await directory.directory_groups(rt.pool, static, pid), frozenset())

    try:
        await rt.publisher.start()
        await build_mcp_server(lambda: rt, viewer_of).run_stdio_async()
    finally:
        await rt.close()
    return 0


async def cmd_keys(settings: Settings, args: argparse.Namespace) -> int:
    """``orgmem keys create|list|revoke``: scoped API keys (``services/credentials.py``)."""
    from services import credentials
    from services.db.pool import create_pool

    pool = await create_pool(settings, min_size=1, max_size=1)
    try:
        async with pool.acquire() as conn:
            if args.action == "create":
                if not args.name or not args.scope:
                    raise ConfigurationError("keys create needs --name and at least one --scope", setting="--scope")
                try:
                    row, key = await credentials.create_key(conn, args.name, args.scope, args.workspace)
                except ValueError as exc:
                    raise ConfigurationError(str(exc), setting="--scope") from None
                print(json.dumps({"id": row.id, "name": row.name, "scopes": row.scopes, "workspace": row.workspace}))
                print(f"key (shown once, store it now): {key}")
            elif args.action == "list":
                for r in await credentials.list_keys(conn):
                    state = f"revoked {r.revoked_at.isoformat()}" if r.revoked_at else "active"
                    ws = r.workspace or "*"
                    print(f"{r.id}  {','.join(r.scopes):32} {ws:16} {state:34} {r.name}")
            else:
                if not args.id:
                    raise ConfigurationError("keys revoke needs the key id", setting="ID")
                found = await credentials.revoke_key(conn, args.id)
                if found is None:
                    print(f"orgmem: no key {args.id}", file=sys.stderr)
                    return 1
                print(f"revoked {found.id} ({found.name}); running processes drop it within seconds")
    finally:
        await pool.close()
    return 0


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="orgmem", description=__doc__)
    sub = ap.add_subparsers(dest="command", required=True)
    sub.add_parser("migrate", help="apply pending schema migrations")
    t = sub.add_parser("topics", help="create or describe Kafka topics")
    t.add_argument("action", choices=["create", "describe"])
    up = sub.add_parser("up", help="run every stage plus the HTTP API in this process")
    up.add_argument("--host")
    up.add_argument("--port", type=int)
    up.add_argument("--no-api", action="store_true")
    run = sub.add_parser("run", help="run chosen stages (or api) in one process")
    run.add_argument("stage", nargs="?")
    run.add_argument("--stage", dest="stages", action="append", metavar="NAME", help="a stage to run (repeatable)")
    run.add_argument("--with-api", action="store_true")
    run.add_argument("--host")
    run.add_argument("--port", type=int)
    sub.add_parser("status", help="infrastructure health and consumer lag per stage")
    m = sub.add_parser("mcp", help="MCP server over stdio, as one fixed principal")
    m.add_argument("--principal", help="user:<uuid> the agent acts for (or ORGMEM_MCP_PRINCIPAL)")
    m.add_argument("--groups", help="comma-separated group:<uuid> (or ORGMEM_MCP_GROUPS); default: the directory")
    k = sub.add_parser("keys", help="create, list or revoke scoped API keys")
    k.add_argument("action", choices=["create", "list", "revoke"])
    k.add_argument("id", nargs="?", help="revoke: the key id")
    k.add_argument("--name", help="create: what the key is for (a connector, a gateway, an operator)")
    k.add_argument(
        "--scope", action="append", choices=["ingest", "directory", "agent", "admin"], help="create: repeatable"
    )
    k.add_argument("--workspace", help="create: the one workspace the key acts in (default: any)")
    from services.eval.cli import add_eval_commands
    from services.ops.cli import add_ops_commands
    from services.ops.consolidate import add_consolidate_commands
    from services.ops.retention import add_retention_commands

    add_ops_commands(sub)
    add_retention_commands(sub)
    add_consolidate_commands(sub)
    add_eval_commands(sub)
    from services.eval.ranker_train import add_ranker_commands

    add_ranker_commands(sub)
    return ap


COMMANDS: dict[str, Command] = {
    "migrate": cmd_migrate,
    "topics": cmd_topics,
    "up": cmd_serve,
    "run": cmd_serve,
    "status": cmd_status,
    "mcp": cmd_mcp,
    "keys": cmd_keys,
}


ON_ACTIVE_GENERATION = {
    "status",
    "dlq",
    "replay",
    "topics",
    "eval",
    "ranker",
    "demo",
    "retention",
    "consolidate",
    "keys",
}


async def _run(handler: Command, settings: Settings, args: argparse.Namespace) -> int:
    """Operator commands act on the active projection generation; `up`/`run` follow it themselves."""
    if args.command in ON_ACTIVE_GENERATION:
        from services import generations

        settings = await generations.resolve(settings)
    return await handler(settings, args)


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("aiokafka").setLevel(logging.WARNING)
    try:
        settings = load_settings()
        from services import logs

        logs.configure(settings.log_level, settings.log_format)
        logging.getLogger("orgmem.faststream").setLevel(logging.WARNING)
        handler = COMMANDS.get(args.command) or getattr(args, "handler", None)
        if handler is None:
            raise SystemExit(f"unknown command {args.command}")
        return asyncio.run(_run(handler, settings, args))
    except ConfigurationError as exc:
        print(f"orgmem: configuration error: {exc}", file=sys.stderr)
        return 2
    except OrgMemoryError as exc:
        print(f"orgmem: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
