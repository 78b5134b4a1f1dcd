"""Replay mode: a context flag that makes stages re-apply events they already processed.

Normal consumption skips an event whose key is in ``processed_events`` (exactly-once effect on
redelivery). A replay (``orgmem replay <stage>``) deliberately re-applies the log — every stage's
apply logic is idempotent, so replaying twice leaves the projection unchanged.
"""

from __future__ import annotations

from contextvars import ContextVar

REPLAYING: ContextVar[bool] = ContextVar("orgmem_replaying", default=False)
