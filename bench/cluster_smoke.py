"""Acceptance smoke on a running `make cluster-up`: N envelopes posted across both API processes, one broker
SIGKILLed mid-stream (then restarted), every document in the projection exactly once, searchable, and the search
answered from the replica. usage: python bench/cluster_smoke.py [--n 500] [--kill-broker 2]"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import time
import uuid
from pathlib import Path

import asyncpg
import httpx

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.integration.helpers import envelope


def _env() -> dict[str, str]:
    out = {}
    for line in (REPO / ".state/cluster/cluster.env").read_text().splitlines():
        k, _, v = line.partition("=")
        out[k] = v
    return out


async def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=500)
    ap.add_argument("--kill-broker", type=int, default=2)
    args = ap.parse_args()
    env = _env()
    key = env["SERVICE_API_KEY"]
    group = f"group:{uuid.uuid4()}"
    run = uuid.uuid4().hex[:8]
    ports = [8000, 8001]
    sent, started = 0, time.monotonic()
    async with httpx.AsyncClient(timeout=60) as http:
        for i in range(args.n):
            env_i = envelope(f"smoke-{run}-{i}", f"cluster smoke {run} record {i} about zebras", principals=[group])
            body = json.loads(env_i.model_dump_json())
            for _attempt in range(30):
                try:
                    r = await http.post(
                        f"http://127.0.0.1:{ports[i % 2]}/ingress/envelope", json=body, headers={"X-Api-Key": key}
                    )
                    if r.status_code == 202:
                        break
                    print("retry", r.status_code, r.text[:200])
                except httpx.HTTPError as exc:
                    print("retry", type(exc).__name__)
                await asyncio.sleep(0.5)
            else:
                print("FAILED to post", i)
                return 1
            sent += 1
            if i == args.n // 2 and args.kill_broker:
                subprocess.run([str(REPO / "deploy/cluster.sh"), "kill-broker", str(args.kill_broker)], check=True)
                print(f"SIGKILLed broker {args.kill_broker} after {i + 1} envelopes")
        post_s = time.monotonic() - started
        conn = await asyncpg.connect(env["DATABASE_URL"])
        try:
            deadline = time.monotonic() + 180
            while True:
                rows = await conn.fetch(
                    "SELECT external_id, count(*) AS c FROM orgmem.documents WHERE external_id LIKE $1 GROUP BY 1",
                    f"smoke-{run}-%",
                )
                if len(rows) >= args.n or time.monotonic() > deadline:
                    break
                await asyncio.sleep(1)
        finally:
            await conn.close()
        dup = [r["external_id"] for r in rows if r["c"] != 1]
        print(f"posted {sent} in {post_s:.1f}s; projected {len(rows)} distinct, duplicated {len(dup)}")
        if args.kill_broker:
            subprocess.run([str(REPO / "deploy/cluster.sh"), "start-broker", str(args.kill_broker)], check=True)
        r = await http.post(
            "http://127.0.0.1:8001/tools/search_knowledge_base",
            json={"query": f"cluster smoke {run} zebras", "limit": 50},
            headers={"X-Api-Key": key, "X-Principal-Id": f"user:{uuid.uuid4()}", "X-Principal-Groups": group},
        )
        print(
            "search",
            r.status_code,
            "passages",
            len(r.json().get("passages", [])),
            "reads",
            r.json().get("diagnostics", {}).get("reads"),
        )
    return 0 if len(rows) == args.n and not dup else 1


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
