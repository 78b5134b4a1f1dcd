"""``orgmem dlq|replay|rebuild`` sub-commands."""

from __future__ import annotations

import argparse
import json
from typing import Any

from services.settings import Settings


async def cmd_dlq(settings: Settings, args: argparse.Namespace) -> int:
    from services.ops.dlq import read_dead_letters, read_stored_letters, redrive

    if args.action == "list":
        letters = await read_dead_letters(settings, args.stage, limit=args.limit)
        stored = await read_stored_letters(settings, args.stage, limit=args.limit)
        for letter in letters + stored:
            print(json.dumps(letter.summary()))
        print(
            f"{len(letters)} dead letter(s) in {settings.topic('dlq.' + args.stage)},"
            f" {len(stored)} kept in Postgres (the broker refused them)"
        )
    elif args.action == "show":
        everything = await read_dead_letters(settings, args.stage) + await read_stored_letters(settings, args.stage)
        for letter in everything:
            if args.position in (
                None,
                letter.record.position,
                f"{letter.record.partition}:{letter.record.offset}",
            ):
                r = letter.record
                print(
                    json.dumps(
                        {
                            **letter.summary(),
                            "headers": {k: v.decode("utf-8", "replace") for k, v in r.headers},
                            "value": r.value.decode("utf-8", "replace"),
                        },
                        indent=2,
                    )
                )
    else:
        n = await redrive(settings, args.stage, error_class=args.error_class, dry_run=args.dry_run)
        print(f"{'would redrive' if args.dry_run else 'redrove'} {n} dead letter(s) of stage {args.stage}")
    return 0


async def cmd_replay(settings: Settings, args: argparse.Namespace) -> int:
    from rich.progress import Progress

    from services.ops.replay import parse_from, replay

    with Progress() as bar:
        task = bar.add_task(f"replay {args.stage}", total=None)

        def progress(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        result = await replay(settings, args.stage, start=parse_from(args.start), progress=progress)
    print(
        json.dumps(
            {
                "stage": result.stage,
                "topic": result.topic,
                "records": result.records,
                "seconds": round(result.seconds, 2),
                "per_second": round(result.per_second, 1),
                "dead_lettered": result.dead_lettered,
            }
        )
    )
    return 0


async def cmd_rebuild(settings: Settings, args: argparse.Namespace) -> int:
    from rich.progress import Progress

    from services.ops.rebuild import rebuild

    with Progress() as bar:
        task = bar.add_task("rebuild (envelopes applied)", total=None)

        def progress(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        result = await rebuild(settings, progress=progress)
    print(
        json.dumps(
            {
                "generation": result.generation,
                "db_schema": result.db_schema,
                "envelopes": result.envelopes,
                "seconds": round(result.seconds, 1),
                "note": "running orgmem processes switch to the new generation within seconds",
            }
        )
    )
    return 0


def add_ops_commands(sub: Any) -> None:
    b = sub.add_parser("rebuild", help="build a fresh projection generation from the log, then switch to it")
    b.set_defaults(handler=cmd_rebuild)
    d = sub.add_parser("dlq", help="list, show or redrive a stage's dead letters")
    d.add_argument("action", choices=["list", "show", "redrive"])
    d.add_argument("stage")
    d.add_argument("--limit", type=int)
    d.add_argument("--position", help="show: partition:offset")
    d.add_argument("--error-class", help="redrive only this error class")
    d.add_argument("--dry-run", action="store_true")
    d.set_defaults(handler=cmd_dlq)
    r = sub.add_parser("replay", help="re-apply a stage's input log (idempotent)")
    r.add_argument("stage")
    r.add_argument("--from", dest="start", default="earliest", help="earliest or an ISO time")
    r.set_defaults(handler=cmd_replay)
