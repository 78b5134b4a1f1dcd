"""``python -m services.waitready URL --timeout S``: poll until the URL answers 200 (used by ``make up``)."""

from __future__ import annotations

import argparse
import sys
import time

import httpx


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("url")
    ap.add_argument("--timeout", type=float, default=120)
    args = ap.parse_args()
    deadline = time.monotonic() + args.timeout
    last = ""
    while time.monotonic() < deadline:
        try:
            r = httpx.get(args.url, timeout=5)
            if r.status_code == 200:
                return 0
            last = f"{r.status_code} {r.text[:300]}"
        except httpx.HTTPError as exc:
            last = f"{type(exc).__name__}: {exc}"
        time.sleep(0.5)
    print(f"{args.url} not ready after {args.timeout:.0f}s: {last}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
