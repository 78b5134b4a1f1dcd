"""An ingest process killed with SIGKILL mid-stream loses nothing and duplicates nothing."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
from typing import Any

import pytest

from services.settings import Settings
from tests.integration.conftest import REPO
from tests.integration.helpers import envelope, eventually, fetchval, later, principal, produce, settings_env

N = 3000


def _start_ingest(settings: Settings, log: Any) -> subprocess.Popen[bytes]:
    # ``python -m services.cli`` from the checkout under test (the ``orgmem`` script would import whichever
    # checkout the shared venv's editable install points at)
    return subprocess.Popen(
        [sys.executable, "-m", "services.cli", "run", "ingest"],
        cwd=REPO,
        env=settings_env(settings),
        stdout=log,
        stderr=subprocess.STDOUT,
    )


@pytest.mark.slow
@pytest.mark.timeout(300)
async def test_sigkill_mid_batch_then_restart_no_loss_no_duplicates(settings_factory: Any, tmp_path: Any) -> None:
    settings: Settings = await settings_factory(ingest_batch_size=100)
    groups = [principal() for _ in range(4)]
    envs = [
        envelope(
            f"K/{i}",
            f"crash test document {i} mentions project {i % 13}",
            principals=[groups[i % 4]],
            event_time=later(i % 600),
        )
        for i in range(N)
    ]
    await produce(settings, *envs)
    log = (tmp_path / "ingest.log").open("wb")
    proc = _start_ingest(settings, log)
    try:
        await eventually(
            lambda: fetchval(settings, "SELECT count(*) FROM processed_events"),
            until=lambda v: v >= 300,
            timeout=90,
        )
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        done_at_kill = await fetchval(settings, "SELECT count(*) FROM processed_events")
        assert done_at_kill < N, "the kill should land mid-stream"
        proc = _start_ingest(settings, log)
        await eventually(
            lambda: fetchval(settings, "SELECT count(*) FROM processed_events"),
            until=lambda v: v == N,
            timeout=180,
        )
        await asyncio.sleep(1.0)  # anything redelivered after the restart has been applied by now
        assert await fetchval(settings, "SELECT count(*) FROM documents") == N
        assert await fetchval(settings, "SELECT count(*) FROM document_versions") == N
        assert await fetchval(settings, "SELECT count(DISTINCT document_id) FROM chunks WHERE NOT is_parent") == N
        assert await fetchval(settings, "SELECT count(*) FROM chunks WHERE NOT is_parent") == N
    finally:
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()
