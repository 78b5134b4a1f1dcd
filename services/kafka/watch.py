"""Telling an infrastructure outage from a poison record, and waiting the outage out.

A stage's ``DependencyWatch`` holds one probe per dependency it uses (Postgres, object store, broker, and
the embedding vendor for a stage that embeds: one tiny embedding call).
When a batch fails after its retry budget the delivery layer asks the watch: if a probe fails, the failure
is an outage, not the record's fault — the stage stops consuming (its handler does not return, so no
offset moves), re-probes with capped, jittered backoff for as long as the dependency is down, and then
retries the batch with a fresh budget. Nothing is dead-lettered because a dependency was away.
``state()`` is what ``/readyz`` shows. The stage's fetch loop (``services.kafka.consumer``) also reports here a
partition it cannot fetch (``fetch_fault``: held, never skipped) until it fetches again (``fetch_ok``): the
stage is then not ready either (``kafka_fetch``).
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass

log = logging.getLogger("orgmem.delivery")
Probe = Callable[[], Awaitable[object]]
PROBE_TIMEOUT_S = 5.0


@dataclass(frozen=True, slots=True)
class Outage:
    dependency: str
    detail: str


class DependencyWatch:
    def __init__(
        self,
        stage: str,
        probes: Mapping[str, Probe],
        *,
        base_delay: float = 0.5,
        max_delay: float = 5.0,
        probe_timeout: float = PROBE_TIMEOUT_S,
        vendors: frozenset[str] = frozenset(),
    ) -> None:
        self.stage = stage
        self.probes = dict(probes)
        # the probes (by name) that reach a vendor: a vendor error is then judged like any other outage
        self.vendors = vendors & self.probes.keys()
        self.base_delay = base_delay
        self.max_delay = max_delay
        self.probe_timeout = probe_timeout
        self.outages: list[Outage] = []
        self.paused_since: float | None = None
        self.pauses = 0
        self.paused_seconds = 0.0
        self._hold_delay = base_delay
        self.fetch_faults: dict[str, str] = {}  # partition (or "*": not isolated yet) -> what the fetch raised
        self._fetch_fault_since: float | None = None

    async def _probe(self, name: str, probe: Probe) -> Outage | None:
        try:
            await asyncio.wait_for(probe(), self.probe_timeout)
            return None
        except Exception as exc:  # a probe reports every failure, whatever its type
            return Outage(name, f"{type(exc).__name__}: {exc}"[:300])

    async def check(self) -> list[Outage]:
        """Run every probe concurrently; the dependencies that are down now."""
        found = await asyncio.gather(*(self._probe(n, p) for n, p in self.probes.items()))
        return [o for o in found if o is not None]

    async def wait_while_down(self, what: str) -> bool:
        """Return False at once if every dependency is up; else pause until all are up again, then True."""
        outages = await self.check()
        if not outages:
            return False
        self.outages = outages
        self.paused_since = time.monotonic()
        self.pauses += 1
        log.warning("%s: paused, %s down (%s)", what, ", ".join(o.dependency for o in outages), outages[0].detail)
        delay = self.base_delay
        try:
            while outages:
                await asyncio.sleep(random.uniform(delay / 2, delay))
                delay = min(self.max_delay, delay * 2)
                outages = await self.check()
                self.outages = outages or self.outages
            waited = time.monotonic() - self.paused_since
            log.warning("%s: dependencies back after %.1fs, resuming", what, waited)
        finally:
            if self.paused_since is not None:
                self.paused_seconds += time.monotonic() - self.paused_since
            self.paused_since = None
            self.outages = []
        return True

    async def hold(self, what: str, error: BaseException) -> None:
        """The probes pass but the work still fails with an infrastructure error: pause one backoff step
        (growing, capped) and stay marked paused until ``resume``."""
        dependency = _dependency_of(error)
        detail = f"{type(error).__name__}: {error}"[:300]
        if self.paused_since is None:
            self.paused_since = time.monotonic()
            self.pauses += 1
            self._hold_delay = self.base_delay
            log.warning("%s: paused, %s failing (%s)", what, dependency, detail)
        self.outages = [Outage(dependency, detail)]
        await asyncio.sleep(random.uniform(self._hold_delay / 2, self._hold_delay))
        self._hold_delay = min(self.max_delay, self._hold_delay * 2)

    def resume(self, what: str) -> None:
        """The work succeeded: clear a pause ``hold`` set."""
        if self.paused_since is not None:
            waited = time.monotonic() - self.paused_since
            self.paused_seconds += waited
            log.warning(
                "%s: %s works again after %.1fs, resumed", what, ", ".join(o.dependency for o in self.outages), waited
            )
            self.paused_since = None
            self.outages = []

    def fetch_fault(self, where: str, detail: str) -> None:
        """The fetch loop cannot fetch ``where`` (a partition, or ``*``): the stage is wedged there until
        ``fetch_ok``."""
        if not self.fetch_faults:
            self._fetch_fault_since = time.monotonic()
            self.pauses += 1
        self.fetch_faults[where] = detail

    def fetch_ok(self, where: str | None = None) -> None:
        """``where`` (default: every partition) fetches again."""
        if where is None:
            self.fetch_faults.clear()
        else:
            self.fetch_faults.pop(where, None)
        if not self.fetch_faults:
            self._fetch_fault_since = None

    @property
    def paused(self) -> bool:
        return self.paused_since is not None or bool(self.fetch_faults)

    def state(self) -> dict[str, object]:
        since = min((t for t in (self.paused_since, self._fetch_fault_since) if t is not None), default=None)
        down = [o.dependency for o in self.outages]
        detail = {o.dependency: o.detail for o in self.outages}
        if self.fetch_faults:
            down.append("kafka_fetch")
            detail["kafka_fetch"] = "; ".join(f"{k}: {v}" for k, v in sorted(self.fetch_faults.items()))
        return {
            "paused": self.paused,
            "down": down,
            "detail": detail,
            "paused_for_s": round(time.monotonic() - since, 1) if since is not None else 0.0,
            "pauses": self.pauses,
        }


def _dependency_of(error: BaseException) -> str:
    """Which dependency an infrastructure error points at (for ``/readyz``)."""
    module = type(error).__module__
    if module.startswith("asyncpg"):
        return "postgres"
    if module.startswith("aiokafka"):
        return "kafka"
    if type(error).__name__ == "ObjectStoreError":
        return "object_store"
    return "unknown"
