"""Long-horizon agent-memory benchmark (issue "self-improvement"): a generated stream of agent memory writes over
simulated months, scored with consolidation and fabric on vs off.

    .venv/bin/python bench/longhorizon.py [--users 6] [--months 12] [--seed 7] [--embedder hash|local|bge]

The stream (deterministic in ``--seed``, no LLM): per user, preferences that change (the latest value and every
past value are known), each statement written several times in different phrasings; team decisions that are
reversed; private notes carrying a secret token; a teammate who joins a team and later leaves it. Memories are
built by the product's own write path (``services.memories.memory_envelope`` — the envelope ``POST /v1/memories``
produces — with the simulated time as the event time) and produced to Kafka; the real ingest and embed stages
load them into an isolated namespace.

Gold queries, each as its viewer:
- ``latest``: "which <topic> does <user> prefer?" — correct when the top memory states the current value;
- ``as_of``: the same at a past time (``as_of``) — correct when the top memory states the value then current;
- ``decision``: a team's latest decision, asked by a member;
- ``leak``: private notes and a left team's memories asked by someone who may not see them — any hit is a leak.

Reported per category, for ``off`` (consolidation off, ``vector_first``), ``consolidated`` (after
``consolidate --apply``), ``fabric`` (mode fabric, consolidated) and ``undone`` (every merge undone: its rankings
must equal ``off`` exactly): correct@1, correct@3, stale@1 (the top memory states an outdated value) and the leak
rate. One JSON object on stdout and in ``bench/results/longhorizon-<timestamp>.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sys
import time
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import common
from schemas.memory import RememberRequest
from schemas.tools import RetrieveContextRequest
from services.memories import Caller, memory_envelope
from services.viewer import Viewer

START = datetime(2025, 1, 6, 9, 0, tzinfo=UTC)
NAMES = ["Alice", "Bruno", "Chen", "Dara", "Emeka", "Fatima", "Goran", "Hana"]
TOPICS = {  # topic -> (noun, values)
    "theme": ("theme", ["dark", "light", "solarized", "high-contrast"]),
    "editor": ("editor", ["vim", "emacs", "vscode", "helix"]),
    "standup": ("standup slot", ["morning", "noon", "afternoon"]),
    "notes": ("notes format", ["markdown", "outline", "bullet"]),
}
PHRASES = [
    "{n} prefers the {v} {noun}",
    "{n} prefers the {v} {noun}.",
    "Note: {n} prefers the {v} {noun} now",
    "{n} prefers the {v} {noun} for everything at work these days",
]
DECISIONS = ["Friday", "Tuesday", "Thursday", "Monday"]


@dataclass
class Written:
    memory_id: str
    text: str
    when: datetime
    value: str | None = None  # the preference / decision value it states


@dataclass
class Query:
    category: str
    text: str
    viewer: Viewer
    correct: str | None = None  # the value a correct top memory states
    stale: set[str] = field(default_factory=set)  # values that are outdated for this query
    secrets: set[str] = field(default_factory=set)  # memory ids the viewer must never get
    as_of: datetime | None = None


def generate(users: int, months: int, seed: int) -> tuple[list[Any], list[Query], dict[str, Written]]:
    rnd = random.Random(seed)
    people = [(NAMES[i], f"user:{uuid.UUID(int=rnd.getrandbits(128))}") for i in range(users)]
    teams = [f"group:{uuid.UUID(int=rnd.getrandbits(128))}" for _ in range(2)]
    member = {p: teams[i % 2] for i, (_, p) in enumerate(people)}
    envelopes: list[Any] = []
    written: dict[str, Written] = {}
    queries: list[Query] = []
    end = START + timedelta(days=30 * months)

    def write(principal: str, text: str, when: datetime, scope: str, value: str | None, event: str) -> Written:
        holds = frozenset({principal, member[principal], *([scope] if scope != "user" else [])})
        req = RememberRequest(
            text=text,
            kind="preference",
            scope=scope,
            source={"agent": "assistant", "session_id": event, "event_id": "e"},
        )
        env = memory_envelope(req, Caller(principal, holds), now=when)
        envelopes.append(env)
        w = Written(env.source.external_id, text, when, value)
        written[w.memory_id] = w
        return w

    for name, principal in people:
        viewer = Viewer.of(principal, [member[principal]])
        for topic, (noun, values) in TOPICS.items():
            changes = sorted(rnd.sample(range(1, months), k=min(2, months - 1)))
            history: list[tuple[datetime, str]] = []
            value = rnd.choice(values)
            for step, month in enumerate([0, *changes]):
                if step:
                    value = rnd.choice([v for v in values if v != value])
                when = START + timedelta(days=30 * month, hours=rnd.randrange(0, 48))
                history.append((when, value))
                for k in range(rnd.randint(1, 3)):  # restated in different phrasings
                    text = rnd.choice(PHRASES).format(n=name, v=value, noun=noun)
                    write(principal, text, when + timedelta(hours=k * 5), "user", value, f"{name}-{topic}-{step}-{k}")
            latest = history[-1][1]
            queries.append(
                Query("latest", f"Which {noun} does {name} prefer?", viewer, latest, {v for _, v in history} - {latest})
            )
            if len(history) > 1:
                (t0, v0), (t1, _) = history[0], history[1]
                probe = t0 + (t1 - t0) / 2
                queries.append(
                    Query(
                        "as_of",
                        f"Which {noun} did {name} prefer?",
                        viewer,
                        v0,
                        {v for t, v in history if v != v0 and t <= probe},
                        as_of=probe,
                    )
                )
        secret = write(
            principal,
            f"Private note: {name}'s locker code is {rnd.randrange(10**6):06d}",
            START,
            "user",
            None,
            f"{name}-secret",
        )
        for _, other in people:
            if other != principal and member[other] == member[principal]:
                queries.append(
                    Query(
                        "leak",
                        f"What is {name}'s locker code?",
                        Viewer.of(other, [member[other]]),
                        secrets={secret.memory_id},
                    )
                )
                break

    for t, team in enumerate(teams):
        owner = next(p for _, p in people if member[p] == team)
        day = DECISIONS[0]
        history = []
        for step, month in enumerate(sorted({0, months // 3, 2 * months // 3})):
            if step:
                day = DECISIONS[(DECISIONS.index(day) + 1) % len(DECISIONS)]
            when = START + timedelta(days=30 * month)
            history.append(day)
            write(owner, f"The team {t} deploy day is {day}", when, team, day, f"team{t}-{step}")
        reader = next(p for _, p in people if member[p] == team and p != owner)
        queries.append(
            Query("decision", f"What is the team {t} deploy day?", Viewer.of(reader, [team]), day, set(history) - {day})
        )
        # a teammate who left: no longer holds the team group, so the team's memories are not theirs to see
        leaver = next(p for _, p in people if member[p] != team)
        team_ids = {w.memory_id for w in written.values() if f"team {t} deploy day" in w.text}
        queries.append(
            Query("leak", f"What is the team {t} deploy day?", Viewer.of(leaver, [member[leaver]]), secrets=team_ids)
        )
    assert max(e.event_time for e in envelopes) < end + timedelta(days=30)
    return envelopes, queries, written


def judge(q: Query, ranked: list[str], written: dict[str, Written]) -> dict[str, float]:
    if q.category == "leak":
        return {"leak": float(bool(q.secrets & set(ranked)))}
    values = [written[m].value if m in written else None for m in ranked]

    def states(v: str | None) -> bool:
        return v == q.correct

    return {
        "correct@1": float(bool(values) and states(values[0])),
        "correct@3": float(any(states(v) for v in values[:3])),
        "stale@1": float(bool(values) and values[0] in q.stale),
    }


async def run(args: argparse.Namespace) -> dict[str, Any]:
    from retriever.wiring import get_service
    from services.consolidation.run import consolidate, undo_consolidation
    from services.ops.teardown import drop_namespace
    from services.producer import EnvelopeProducer
    from services.serve import start_runtime, stop_runtime

    envelopes, queries, written = generate(args.users, args.months, args.seed)
    settings = await common.isolated_settings("lh", topic_partitions=3, embedding_provider=args.embedder)
    rt = await start_runtime(settings, ["ingest", "embed", "extract", "conflicts"])
    try:
        async with EnvelopeProducer(settings.kafka_bootstrap_servers, topic=settings.topic("envelopes")) as p:
            await p.send_many(envelopes)
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            n = await rt.pool.fetchval(
                "SELECT count(DISTINCT document_id) FROM chunks WHERE NOT is_parent AND embedding IS NOT NULL"
            )
            if n >= len(written):
                break
            await asyncio.sleep(0.5)
        service = get_service(rt)
        service.access.record = lambda chunk_ids: None  # type: ignore[method-assign]  # frozen, as in evaluation

        async def rankings(mode: str) -> list[list[str]]:
            out = []
            for q in queries:
                req = RetrieveContextRequest(query=q.text, limit=10, as_of=q.as_of, mode=mode)  # type: ignore[arg-type]
                resp = await service.retrieve_context(req, q.viewer)
                out.append([p.external_id for p in resp.passages])
            return out

        runs: dict[str, list[list[str]]] = {"off": await rankings("vector_first")}
        report = await consolidate(rt.pool, "default", sim=settings.consolidation_sim, apply=True, actor="bench")
        runs["consolidated"] = await rankings("vector_first")
        runs["fabric"] = await rankings("fabric")
        for m in report.merges:
            if m.consolidation_id:
                await undo_consolidation(rt.pool, m.consolidation_id, principal_id=None, principals=[], is_admin=True)
        runs["undone"] = await rankings("vector_first")
    finally:
        await stop_runtime(rt)
        await drop_namespace(
            settings.database_url,
            settings.kafka_bootstrap_servers,
            schema=settings.db_schema,
            namespace=settings.topic_namespace,
        )
    table: dict[str, dict[str, dict[str, float]]] = {}
    for name, ranked in runs.items():
        cats: dict[str, dict[str, list[float]]] = {}
        for q, r in zip(queries, ranked, strict=True):
            for metric, v in judge(q, r, written).items():
                cats.setdefault(q.category, {}).setdefault(metric, []).append(v)
        table[name] = {c: {m: round(sum(v) / len(v), 3) for m, v in ms.items()} for c, ms in cats.items()}
    reasons: dict[str, int] = {}
    for m in report.merges:
        reasons[m.reason] = reasons.get(m.reason, 0) + 1
    return {
        "benchmark": "longhorizon",
        "users": args.users,
        "months": args.months,
        "seed": args.seed,
        "embedder": args.embedder,
        "memories": len(written),
        "queries": {c: sum(q.category == c for q in queries) for c in sorted({q.category for q in queries})},
        "merges": reasons,
        "results": table,
        "undo_restores_rankings_exactly": runs["undone"] == runs["off"],
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--users", type=int, default=6)
    ap.add_argument("--months", type=int, default=12)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--embedder", default="hash", choices=["hash", "local", "bge"])
    result = asyncio.run(run(ap.parse_args()))
    common.write_result("longhorizon", result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
