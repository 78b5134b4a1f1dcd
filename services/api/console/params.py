"""Request checks shared by the console's admin and fragment routes: the principal, viewer, time and
replay-start parameters (422 naming the field at fault). The admin dependency and the runtime are
``services.api.deps``'."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from fastapi import HTTPException, Request, status

from services.api.auth import checked_principal, directory_groups
from services.viewer import Viewer

WORKSPACE = r"^[A-Za-z0-9_.:\-]{1,128}$"


def _unprocessable(field: str, msg: str) -> HTTPException:
    return HTTPException(status.HTTP_422_UNPROCESSABLE_CONTENT, detail={"field": field, "msg": msg})


def _replay_start(value: str) -> datetime | None:
    from services.ops.replay import parse_from

    try:
        return parse_from(value.strip())
    except ValueError as exc:
        raise _unprocessable("from", str(exc)) from exc


def _principal(value: str | None, field: str, kind: str) -> str | None:
    """An optional principal parameter: blank is ``None``, anything else must be ``<kind>:<uuid>``."""
    if value is None or not value.strip():
        return None
    return checked_principal(value, field, kind)


async def _as_viewer(request: Request, viewer: str | None, groups: str | None) -> Viewer:
    """The viewer the admin asks about: ``viewer`` (user:<uuid>) with ``groups``, or the directory's groups."""
    pid = _principal(viewer, "viewer", "user")
    given = [g for g in (groups or "").split(",") if g.strip()]
    if len(given) > 512:
        raise _unprocessable("groups", "at most 512 groups")
    held = tuple(sorted({str(_principal(g, "groups", "group")) for g in given}))
    if pid and not given:
        held = await directory_groups(request, pid)
    return Viewer(pid, held, frozenset())


def _aware(value: datetime | None, field: str) -> datetime | None:
    if value is not None and value.tzinfo is None:
        raise _unprocessable(field, "timestamp needs a timezone offset")
    return value


Mode = Literal["vector_first", "graph_first", "joint"]


def _as_of(value: str | None) -> datetime | None:
    if not value or not value.strip():
        return None
    try:
        t = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError as exc:
        raise _unprocessable("as_of", "not an ISO time") from exc
    return _aware(t, "as_of")
