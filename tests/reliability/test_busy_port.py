"""Issue 20 §4: a second ``orgmem up`` on a port already in use exits non-zero at once with a message naming
the port — before any stage starts — instead of lingering headless (stages running, no API)."""

from __future__ import annotations

import socket
import subprocess
import sys
import time

import pytest

from services.settings import Settings
from tests.integration.conftest import REPO
from tests.integration.helpers import settings_env


@pytest.mark.timeout(90)
def test_orgmem_up_on_a_busy_port_exits_with_a_clear_message(settings: Settings) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        start = time.monotonic()
        proc = subprocess.Popen(
            [sys.executable, "-m", "services.cli", "up", "--host", "127.0.0.1", "--port", str(port)],
            cwd=REPO,
            env=settings_env(settings),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        try:
            _, err = proc.communicate(timeout=45)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            pytest.fail("orgmem up lingered on a busy port instead of exiting")
        took = time.monotonic() - start
    message = err.decode(errors="replace")
    assert proc.returncode not in (0, None), message
    assert f"127.0.0.1:{port}" in message and "in use" in message, message
    assert "running stages" not in message  # it refused before starting anything
    print(f"\nexit {proc.returncode} after {took:.1f}s: {message.strip().splitlines()[-1]}")


@pytest.mark.timeout(120)
def test_the_api_still_serves_on_the_socket_it_bound_first(settings: Settings) -> None:
    import httpx

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    proc = subprocess.Popen(
        [sys.executable, "-m", "services.cli", "run", "api", "--host", "127.0.0.1", "--port", str(port)],
        cwd=REPO,
        env=settings_env(settings),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 90
        while True:
            assert proc.poll() is None, "the API process exited"
            try:
                r = httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2)
                break
            except httpx.TransportError:
                assert time.monotonic() < deadline, "the API never answered"
                time.sleep(0.5)
        assert r.status_code == 200 and r.json() == {"status": "ok"}
    finally:
        proc.terminate()
        proc.wait(30)
