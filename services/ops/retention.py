"""``orgmem retention run [--apply]`` and the periodic run inside ``orgmem up``.

The CLI is a dry run unless ``--apply``: it prints what the policies make due (and what a legal hold
keeps); with ``--apply`` it purges in bounded batches, each audited with the acting operator.
"""

from __future__ import annotations

import argparse
import asyncio
import getpass
import json
import logging
from collections.abc import Callable
from typing import Any

from services.collaboration import repository as collab
from services.db.pool import create_pool
from services.decay import HALF_LIFE_DAYS
from services.governance.retention import PurgeHook, run_retention
from services.objectstore import ObjectStore, build_object_store
from services.settings import Settings

log = logging.getLogger("orgmem.retention")


async def forget_collaboration(conn: Any, ids: list[Any]) -> None:
    """Drop the purged documents' collaboration contributions and recompute the edges they fed."""
    pairs = await collab.replace_contributions(conn, ids, [])
    await collab.refresh_edges(conn, pairs, HALF_LIFE_DAYS)


PURGE_HOOKS: tuple[PurgeHook, ...] = (forget_collaboration,)


async def cmd_retention(settings: Settings, args: argparse.Namespace) -> int:
    pool = await create_pool(settings, min_size=1, max_size=2)
    store = build_object_store(settings)
    try:
        report = await run_retention(
            pool,
            store,
            actor=f"cli:{getpass.getuser()}",
            apply=args.apply,
            workspace=args.workspace,
            batch_size=args.batch_size,
            hooks=PURGE_HOOKS,
        )
    finally:
        await store.close()
        await pool.close()
    print(json.dumps(report.as_dict(), indent=2, default=str))
    if not args.apply and report.due:
        print(f"dry run: {report.due} documents would be purged; rerun with --apply", flush=True)
    return 0


def add_retention_commands(sub: Any) -> None:
    r = sub.add_parser("retention", help="retention policies: purge expired and long-tombstoned documents")
    r.add_argument("action", choices=["run"])
    r.add_argument("--apply", action="store_true", help="purge (default: dry run)")
    r.add_argument("--workspace")
    r.add_argument("--batch-size", type=int, default=200)
    r.set_defaults(handler=cmd_retention)


async def periodic_retention(settings: Settings, clients: Callable[[], tuple[Any, ObjectStore]]) -> None:
    """Run (and apply) retention every ``RETENTION_INTERVAL_S`` inside ``orgmem up`` (``clients()`` gives
    the current runtime's pool and store: a generation switch replaces them)."""
    interval = settings.retention_interval_s
    if interval <= 0:
        return
    while True:
        await asyncio.sleep(interval)
        try:
            pool, store = clients()
            report = await run_retention(
                pool, store, actor="scheduler", apply=True, batch_size=settings.retention_batch_size, hooks=PURGE_HOOKS
            )
            if report.batches or report.held:
                log.info(
                    "retention run %s: purged %d documents, %d kept by holds",
                    report.run_id,
                    sum(b.counts.get("documents", 0) for b in report.batches),
                    report.held,
                )
        except Exception as exc:  # the scheduler keeps going; the next run retries
            log.warning("retention run failed: %s: %s", type(exc).__name__, exc)
