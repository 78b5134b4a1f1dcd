"""HERB through the graph pipeline (ingest -> extract -> conflicts -> collab) and what it yields.

Usage: ``.venv/bin/python bench/herb_graph.py --path ../shared/data/herb [--limit N]``

Data are read from ``--path`` (never copied). Steps:
1. a directory envelope per person of ``people.jsonl`` (author = that person; registry-bound structured
   fields ``title`` = role, ``manager`` = the ``org_relations.jsonl`` manager, ``location``), ingested first;
2. every product event through ``services.eval.datasets.iter_envelopes``; people keys (``herb`` namespace)
   also get the verified ``herb_eid`` key mentions and structured managers use;
3. measurements: (1) the ``reports_to`` edges as current facts + a path walk from each engineer reaching
   the top of their chain; (2) lead-in-top-5-collaborators recall@5; (3) share of ``@eid_`` mentions and
   meeting-roster names resolved to the right person; (4) zero-LLM extraction documents/s (pure CPU, and
   the extract stage's wall time inside the pipeline); (5) Worldbuilder: the share of person profiles
   (``worldbuilder_lookup``'s deterministic assembly, as the directory viewer) whose manager matches
   ``org_relations.jsonl`` and whose team matches the person's HERB ``org`` (sent as the ``team``
   structured field with ``--directory-team``), and lead-in-top-5 collaborators when person↔project
   edges count too (co-work on a shared project adds the smaller of the two people's project weights).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from common import isolated_settings, write_result  # type: ignore[import-not-found]

from extractor.assemble import DocInfo, document_ref, meeting_ref, participant_ids
from extractor.links import HERB_EID_NAMESPACE
from extractor.mentions import attendance_links
from extractor.patterns import extract_links
from retriever.graph import reads
from schemas.envelope import ChangeEnvelope
from services.collaboration import repository as collab_repo
from services.db.pool import create_pool
from services.decay import HALF_LIFE_DAYS
from services.eval.datasets import group_principal, iter_envelopes
from services.producer import EnvelopeProducer
from services.serve import start_runtime, stop_runtime
from services.settings import Settings
from services.taxonomy import default_registry

WS = "herb"
DIRECTORY_TIME = datetime(2023, 1, 2, tzinfo=UTC)
_EID = re.compile(r"eid_[0-9a-f]{6,12}")
_EMP = re.compile(r"EMP_\d{3,12}")


def _with_eid(person: dict[str, Any] | None) -> dict[str, Any] | None:
    """Add the verified key text mentions use: ``herb_eid`` for ``eid_…``, ``herb_emp`` for ``EMP_…``."""
    if person is None:
        return None
    ids = person.get("identities") or []
    for value in [str(i.get("value", "")) for i in ids]:
        namespace = HERB_EID_NAMESPACE if _EID.fullmatch(value) else "herb_emp" if _EMP.fullmatch(value) else None
        if namespace and not any(i["namespace"] == namespace for i in ids):
            ids.append({"namespace": namespace, "value": value, "verified": True})
    return person


def herb_envelopes(path: Path, limit: int | None) -> Iterator[ChangeEnvelope]:
    for env in iter_envelopes(path, workspace=WS, limit=limit, on_future="clamp"):
        body = env.model_dump(mode="json")
        body["author"] = _with_eid(body.get("author"))
        body["participants"] = [_with_eid(p) for p in body.get("participants", [])]
        yield ChangeEnvelope.model_validate(body)


def directory_envelopes(path: Path, team: bool = False) -> list[ChangeEnvelope]:
    people = [json.loads(line) for line in (path / "people.jsonl").read_text().splitlines() if line.strip()]
    managers = {
        r["subject"]: r["object"]
        for r in map(json.loads, (path / "org_relations.jsonl").read_text().splitlines())
        if r.get("relation") == "reports_to"
    }
    out = []
    for p in people:
        fields: dict[str, Any] = {"title": p["role"], "location": p["location"]}
        if p["id"] in managers:
            fields["manager"] = managers[p["id"]]
        if team and p.get("org"):
            fields["team"] = p["org"]
        out.append(
            ChangeEnvelope.model_validate(
                {
                    "envelope_id": str(uuid.uuid5(uuid.NAMESPACE_URL, f"herb-directory/{WS}/{p['id']}")),
                    "workspace": WS,
                    "source": {"system": "herb-directory", "external_id": p["id"]},
                    "event_time": DIRECTORY_TIME.isoformat(),
                    "document": {
                        "kind": "document",
                        "title": f"{p['name']} ({p['role']})",
                        "text": f"{p['name']} is {p['role']} in {p.get('org', '')}, in {p['location']}.",
                    },
                    "author": {
                        "display_name": p["name"],
                        "identities": [
                            {"namespace": "herb", "value": p["id"]},
                            {"namespace": HERB_EID_NAMESPACE, "value": p["id"], "verified": True},
                        ],
                    },
                    "acl": {"principals": [group_principal("herb", "directory")]},
                    "structured_fields": fields,
                }
            )
        )
    return out


def pure_throughput(envs: list[ChangeEnvelope]) -> float:
    registry = default_registry()
    start = time.perf_counter()
    for env in envs:
        if env.document is None:
            continue
        info = DocInfo(uuid.uuid4(), WS, env.key, env.document.kind.value, env.document.title, 1, env.event_time, None)
        extract_links(env.document.text, registry=registry, document=document_ref(info))
        if info.kind == "meeting":
            attendance_links(
                env.document.text,
                meeting_ref(info),
                registry=registry,
                participants=participant_ids(env, HERB_EID_NAMESPACE),
            )
    return len(envs) / (time.perf_counter() - start)


async def produce_all(settings: Settings, envs: list[ChangeEnvelope]) -> None:
    async with EnvelopeProducer(settings.kafka_bootstrap_servers, topic=settings.topic("envelopes")) as p:
        for i in range(0, len(envs), 2000):
            await p.send_many(envs[i : i + 2000])


async def wait_for(rt: Any, name: str, attr: str, n: int, limit_s: float = 3600) -> None:
    deadline = time.monotonic() + limit_s
    last, still = -1, 0
    while time.monotonic() < deadline:
        value = getattr(rt.handlers[name], attr)
        value = value.documents if attr == "stats" else value
        if value >= n:
            return
        still = still + 1 if value == last else 0
        last = value
        if still > 60:  # a minute without progress
            raise RuntimeError(f"{name} stalled at {value}/{n}")
        await asyncio.sleep(1)
    raise RuntimeError(f"{name} did not reach {n}")


async def measure(settings: Settings, path: Path, root_principals: list[str]) -> dict[str, Any]:
    pool = await create_pool(settings)
    out: dict[str, Any] = {}
    people = {p["id"]: p for p in map(json.loads, (path / "people.jsonl").read_text().splitlines())}
    relations = [
        r
        for r in map(json.loads, (path / "org_relations.jsonl").read_text().splitlines())
        if r.get("relation") == "reports_to"
    ]
    async with pool.acquire() as conn:
        pid = {
            r["value"]: r["person_id"]
            for r in await conn.fetch(
                "SELECT a.value, COALESCE(p.merged_into, p.id) AS person_id FROM person_aliases a JOIN"
                " people p"
                " ON p.id = a.person_id WHERE a.workspace = $1 AND a.namespace = 'herb_eid'",
                WS,
            )
        }
        current = {
            (r["subject_id"], r["object_id"])
            for r in await conn.fetch(
                "SELECT subject_id, object_id FROM facts WHERE workspace = $1 AND predicate = 'reports_to'"
                " AND invalidated_at IS NULL AND valid_to IS NULL",
                WS,
            )
        }
        ok = sum((pid.get(r["subject"]), pid.get(r["object"])) in current for r in relations)
        out["reports_to_current"] = {"expected": len(relations), "current": ok}
        managers = {r["subject"]: r["object"] for r in relations}

        def top(e: str) -> str:
            seen = set()
            while e in managers and e not in seen:
                seen.add(e)
                e = managers[e]
            return e

        engineers = [e for e, p in people.items() if "engineer" in p["role"].lower() and e in managers]
        reached = 0
        for e in engineers:
            depth = 1
            chain = e
            while chain in managers:
                chain, depth = managers[chain], depth + 1
            paths = await reads.query_paths(
                conn,
                workspace=WS,
                viewer=root_principals,
                seeds=[("person", pid[e])],
                max_depth=max(2, depth - 1),
                max_fanout=20,
                limit=200,
            )
            reached += any(n.id == pid.get(top(e)) for p in paths for n in p.nodes)
        out["path_engineer_reaches_top"] = {"engineers": len(engineers), "reached": reached}
        hits = 0
        now = datetime.now(UTC)
        for e in engineers:
            best = await collab_repo.top_collaborators(conn, WS, pid[e], now, HALF_LIFE_DAYS, 5)
            hits += pid.get(managers[e]) in best
        out["lead_in_top5_collaborators"] = {
            "engineers": len(engineers),
            "hits": hits,
            "recall_at_5": round(hits / max(1, len(engineers)), 4),
        }
        out["mentions"] = await mention_accuracy(conn, path, pid)
        out["worldbuilder"] = await worldbuilder_accuracy(conn, people, managers, pid, engineers, root_principals)
        out["counts"] = dict(
            await conn.fetchrow(
                "SELECT (SELECT count(*) FROM facts) AS facts, (SELECT count(*) FROM entities) AS entities,"
                " (SELECT count(*) FROM people WHERE merged_into IS NULL) AS people,"
                " (SELECT count(*) FROM person_merge_proposals) AS proposals,"
                " (SELECT count(*) FROM collaboration_edges) AS collab_edges"
            )
        )
    await pool.close()
    return out


async def worldbuilder_accuracy(
    conn: Any,
    people: dict[str, dict[str, Any]],
    managers: dict[str, str],
    pid: dict[str, uuid.UUID],
    engineers: list[str],
    viewer: list[str],
) -> dict[str, Any]:
    """Worldbuilder person profiles against HERB's directory truth, and collaborators with project edges."""
    from retriever.graph import worldbuilder
    from retriever.graph.projects import person_projects, project_people
    from schemas.graph import EntityBrief

    manager_ok = team_ok = with_manager = profiles = 0
    start = time.perf_counter()
    for eid, person in people.items():
        if eid not in pid:
            continue
        brief = EntityBrief(type="person", id=pid[eid], name=person["name"])
        profile = await worldbuilder.assemble(conn, workspace=WS, viewer=viewer, entity=brief)
        profiles += 1
        if eid in managers:
            with_manager += 1
            got = profile.manager.entity.id if profile.manager and profile.manager.entity else None
            manager_ok += got == pid.get(managers[eid])
        team = (profile.team.value if profile.team else "") or ""
        team_ok += team.casefold() == str(person.get("org", "")).casefold()
    per_profile_ms = (time.perf_counter() - start) * 1000 / max(1, profiles)
    hits = hits_projects = with_projects = 0
    for e in engineers:
        me = pid[e]
        scores: dict[uuid.UUID, float] = {}
        for r in await conn.fetch(
            "SELECT CASE WHEN a_id = $2 THEN b_id ELSE a_id END AS other, weight FROM collaboration_edges"
            " WHERE workspace = $1 AND (a_id = $2 OR b_id = $2)",
            WS,
            me,
        ):
            scores[r["other"]] = scores.get(r["other"], 0.0) + float(r["weight"])
        base = sorted(scores, key=lambda k: (-scores[k], str(k)))[:5]
        hits += pid.get(managers[e]) in base
        mine = await person_projects(conn, workspace=WS, viewer=viewer, person=me, limit=20)
        with_projects += bool(mine)
        for link in mine:
            for other in await project_people(conn, workspace=WS, viewer=viewer, entity=link.entity.id, limit=50):
                if other.entity.id != me:
                    scores[other.entity.id] = scores.get(other.entity.id, 0.0) + min(link.weight, other.weight)
        best = sorted(scores, key=lambda k: (-scores[k], str(k)))[:5]
        hits_projects += pid.get(managers[e]) in best
    n = max(1, len(engineers))
    return {
        "profiles": profiles,
        "manager_match": {
            "with_manager": with_manager,
            "matched": manager_ok,
            "share": round(manager_ok / max(1, with_manager), 4),
        },
        "team_match": {"profiles": profiles, "matched": team_ok, "share": round(team_ok / max(1, profiles), 4)},
        "profile_assembly_ms": round(per_profile_ms, 1),
        "lead_in_top5": {
            "engineers": len(engineers),
            "collab_edges_only": round(hits / n, 4),
            "with_project_edges": round(hits_projects / n, 4),
            "engineers_with_projects": with_projects,
        },
        "unresolved_people": len([e for e in people if e not in pid]),
    }


async def mention_accuracy(conn: Any, path: Path, pid: dict[str, uuid.UUID]) -> dict[str, Any]:
    from services.eval.datasets import iter_raw_events
    from services.ids import document_id

    docs_eids: dict[uuid.UUID, set[str]] = {}
    rosters: dict[uuid.UUID, list[str]] = {}
    loaded = {r["id"] for r in await conn.fetch("SELECT id FROM documents WHERE workspace = $1", WS)}
    for _, raw in iter_raw_events(path):
        key = f"{WS}/herb/{raw.id}"
        if document_id(key) not in loaded:
            continue
        found = set(re.findall(r"@'?(eid_[0-9a-f]{6,12})", raw.text))
        if found:
            docs_eids[document_id(key)] = found
        if raw.kind == "meeting_transcript" and raw.meta.get("participants"):
            rosters[document_id(key)] = list(raw.meta["participants"])
    mentioned = {
        (r["document_id"], r["object_id"])
        for r in await conn.fetch(
            "SELECT f.subject_id AS document_id, f.object_id FROM facts f WHERE f.workspace = $1"
            " AND f.predicate = 'mentioned' AND f.invalidated_at IS NULL",
            WS,
        )
    }
    total = sum(len(v) for v in docs_eids.values())
    right = sum((d, pid.get(e)) in mentioned for d, eids in docs_eids.items() for e in eids)
    attended = {
        (r["person"], r["document_id"])
        for r in await conn.fetch(
            "SELECT f.subject_id AS person, e.document_id FROM facts f JOIN fact_evidence e ON e.fact_id ="
            " f.id"
            " WHERE f.workspace = $1 AND f.predicate = 'attended' AND f.invalidated_at IS NULL",
            WS,
        )
    }
    roster_total = sum(len(v) for v in rosters.values())
    roster_right = sum((pid.get(e), d) in attended for d, eids in rosters.items() for e in eids)
    return {
        "eid_mentions": {"total": total, "resolved_right": right, "share": round(right / max(1, total), 4)},
        "roster_names": {
            "total": roster_total,
            "resolved_right": roster_right,
            "share": round(roster_right / max(1, roster_total), 4),
        },
    }


async def main(path: Path, limit: int | None, team: bool = False) -> dict[str, Any]:
    settings = await isolated_settings("herb", ingest_batch_size=1000)
    directory = directory_envelopes(path, team)
    envs = list(herb_envelopes(path, limit))
    result: dict[str, Any] = {
        "documents": len(envs),
        "directory": len(directory),
        "pure_extract_docs_per_s": round(pure_throughput(envs), 1),
    }
    rt = await start_runtime(settings, ["ingest", "extract", "conflicts", "collab"])
    try:
        await produce_all(settings, directory)
        await wait_for(rt, "conflicts", "applied", len(directory))
        start = time.perf_counter()
        await produce_all(settings, envs)
        expected = len(directory) + len({e.key for e in envs})
        await wait_for(rt, "extract", "stats", expected)
        extract_done = time.perf_counter() - start
        await wait_for(rt, "conflicts", "applied", expected)
        await wait_for(rt, "collab", "documents", expected)
        result["pipeline_seconds"] = round(time.perf_counter() - start, 1)
        result["extract_stage_docs_per_s"] = round(len(envs) / extract_done, 1)
    finally:
        await stop_runtime(rt)
    groups = sorted({p for e in [*directory, *envs] for p in e.acl.principals})
    result.update(await measure(settings, path, groups))
    result["schema"] = settings.db_schema
    return result


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--path", type=Path, required=True)
    parser.add_argument("--limit", type=int, default=None)
    parser.add_argument(
        "--directory-team", action="store_true", help="send HERB's org as the directory's team structured field"
    )
    args = parser.parse_args()
    res = asyncio.run(main(args.path, args.limit, args.directory_team))
    print(json.dumps(res, indent=2, default=str))
    print(write_result("herb_graph", res))
