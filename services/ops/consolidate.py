"""``orgmem consolidate [--apply]``: plan (dry run, the default) or apply memory consolidation in a workspace.
Prints the report as JSON; every applied merge is recorded and can be undone (``POST /v1/consolidations/{id}/undo``)."""

from __future__ import annotations

import argparse
import getpass
from typing import Any

from services.consolidation.run import consolidate
from services.db.pool import create_pool
from services.settings import Settings


async def cmd_consolidate(settings: Settings, args: argparse.Namespace) -> int:
    pool = await create_pool(settings, min_size=1, max_size=2)
    try:
        report = await consolidate(
            pool,
            args.workspace,
            sim=args.sim if args.sim is not None else settings.consolidation_sim,
            source_systems=args.source_system or ["agent"],
            apply=args.apply,
            actor=f"cli:{getpass.getuser()}",
        )
    finally:
        await pool.close()
    print(report.model_dump_json(indent=2), flush=True)
    if not args.apply and report.merges:
        print(f"dry run: {len(report.merges)} merges planned; rerun with --apply", flush=True)
    return 0


def add_consolidate_commands(sub: Any) -> None:
    c = sub.add_parser("consolidate", help="merge duplicate and contradicted memories (supersede, never delete)")
    c.add_argument("--apply", action="store_true", help="apply the merges (default: dry run)")
    c.add_argument("--workspace", default="default")
    c.add_argument("--sim", type=float, help="cosine floor of near-duplicates (default CONSOLIDATION_SIM, 0.92)")
    c.add_argument(
        "--source-system",
        action="append",
        help="also consolidate documents of this source system (repeatable; default: agent memories only)",
    )
    c.set_defaults(handler=cmd_consolidate)
