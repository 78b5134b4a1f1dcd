"""What every fire-and-forget fork of ours (the after-turn judge, the skill curator) shares: the seed's throttle
(per fork type and session, the cap checked first, then the cooldown), the sibling tasks with a capped drain, and
the client started on the first run and closed at shutdown only if the fork started it."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Coroutine
from typing import Any, Literal, Protocol

Skip = Literal["cap", "cooldown"]


class Startable(Protocol):
    async def start(self) -> None: ...

    async def close(self) -> None: ...


class ClientLease:
    """Whether the fork started its client: ``ready`` starts it on the first run (a fork built before the loop
    runs cannot start it earlier); ``release`` closes it only if ``ready`` did, so a host's client stays the host's."""

    def __init__(self) -> None:
        self._started = False

    async def ready(self, client: Startable) -> None:
        if not self._started:
            await client.start()
            self._started = True

    async def release(self, client: Startable) -> None:
        if self._started:
            await client.close()
            self._started = False


class ThrottleLimits(Protocol):
    @property
    def cooldown_s(self) -> float: ...

    @property
    def per_session_cap(self) -> int: ...


class ForkThrottle:
    """Slots per (fork type, session): the cap first, then the cooldown since the last granted slot."""

    def __init__(self, config: ThrottleLimits, clock: Callable[[], float] = time.monotonic) -> None:
        self.config = config
        self.clock = clock
        self._count: dict[tuple[str, str], int] = {}
        self._last: dict[tuple[str, str], float] = {}

    def skip_reason(self, fork: str, session_id: str) -> Skip | None:
        key = (fork, session_id)
        if self._count.get(key, 0) >= self.config.per_session_cap:
            return "cap"
        last = self._last.get(key)
        if last is not None and self.clock() - last < self.config.cooldown_s:
            return "cooldown"
        return None

    def claim(self, fork: str, session_id: str) -> bool:
        """True and the slot is taken; False: skip this turn (no error, no retry)."""
        if self.skip_reason(fork, session_id) is not None:
            return False
        key = (fork, session_id)
        self._count[key] = self._count.get(key, 0) + 1
        self._last[key] = self.clock()
        return True


class Siblings:
    """Fire-and-forget tasks of one fork type: ``spawn`` returns at once; ``drain`` waits up to a cap, then
    cancels what is still running (logged) so a shutdown stays inside ADK's plugin-close budget."""

    def __init__(self, label: str, log: logging.Logger) -> None:
        self.label = label
        self.log = log
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def pending(self) -> int:
        return len(self._tasks)

    def spawn(self, coro: Coroutine[Any, Any, None], name: str) -> None:
        task = asyncio.create_task(coro, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._finished)

    def _finished(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and (exc := task.exception()) is not None:
            self.log.warning("%s run failed: %r", self.label, exc)

    async def drain(self, timeout: float) -> int:  # noqa: ASYNC109 - the drain's cap
        """Wait for in-flight runs up to ``timeout``; cancel and log the rest. Returns how many were cancelled."""
        pending = set(self._tasks)
        if not pending:
            return 0
        _, still = await asyncio.wait(pending, timeout=timeout)
        for task in still:
            self.log.warning("%s: drain timed out, cancelling %s", self.label, task.get_name())
            task.cancel()
        await asyncio.gather(*still, return_exceptions=True)
        return len(still)
