"""Collaboration decay, written once: a contribution made at ``t`` is worth ``w * 0.5 ** ((now - t) / half_life)``.

``decay_sql`` is the one SQL spelling (the collaboration stage's edge refresh and ranking, the person card's
viewer-scoped collaborators); ``decay_factor`` / ``decayed`` are the same rule in Python (it clamps a
negative age — clock skew — to 0; the SQL relies on ``event_time`` being at most a day ahead).
"""

from __future__ import annotations

from datetime import datetime, timedelta

HALF_LIFE_DAYS = 90.0


def decay_sql(weight: str, later: str, earlier: str, half_life_days: str) -> str:
    """``weight`` decayed from ``earlier`` to ``later`` (SQL expressions; ``half_life_days`` a parameter)."""
    return f"{weight} * power(0.5, extract(epoch FROM {later} - {earlier}) / 86400.0 / {half_life_days})"


def decay_factor(age: timedelta, half_life_days: float = HALF_LIFE_DAYS) -> float:
    days = max(age.total_seconds(), 0.0) / 86400.0
    return float(0.5 ** (days / half_life_days))


def decayed(weight_at_last: float, last_seen: datetime, now: datetime, half_life_days: float = HALF_LIFE_DAYS) -> float:
    return weight_at_last * decay_factor(now - last_seen, half_life_days)
