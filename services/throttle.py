"""Write throttle for agent memory writes: a cooldown and a cap per (principal, session).

``try_claim`` checks the cap first, then the cooldown; a refusal says which limit and how many seconds
until a retry can succeed (``None`` when the cap is exhausted for the session: only a new session helps).
In-process state: each API process throttles the writes it serves (put sticky routing in front of
several API processes if the cap must be global).
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from services.metrics import RATE_LIMITED

MAX_TRACKED = 100_000


@dataclass(frozen=True, slots=True)
class Refusal:
    reason: str  # "cap" | "cooldown"
    retry_after_s: float | None
    message: str


@dataclass
class _Slot:
    count: int
    last: float


class WriteThrottle:
    def __init__(self, *, cooldown_s: float, cap: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.cooldown_s = max(0.0, cooldown_s)
        self.cap = cap
        self._clock = clock
        self._slots: OrderedDict[tuple[str, str], _Slot] = OrderedDict()

    def try_claim(self, principal: str, session: str | None) -> Refusal | None:
        key = (principal, session or "-")
        now = self._clock()
        slot = self._slots.get(key)
        if slot is not None:
            if slot.count >= self.cap:
                RATE_LIMITED.labels("memory_write_cap").inc()
                return Refusal("cap", None, f"at most {self.cap} memory writes per session")
            wait = slot.last + self.cooldown_s - now
            if wait > 0:
                RATE_LIMITED.labels("memory_write_cooldown").inc()
                return Refusal("cooldown", wait, f"wait {self.cooldown_s:g}s between memory writes of a session")
            slot.count += 1
            slot.last = now
            self._slots.move_to_end(key)
        else:
            self._slots[key] = _Slot(1, now)
            while len(self._slots) > MAX_TRACKED:
                self._slots.popitem(last=False)
        return None
