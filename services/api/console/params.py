"""Request helpers shared by the console's admin and fragment routes: the admin dependency, the runtime, and
the checks of the principal, viewer, time and replay-start parameters (422 naming the field at fault)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from fastapi import Depends, HTTPException, Request, status

from schemas.envelope import PRINCIPAL_RE
from services.api.auth import directory_groups, require_admin
from services.viewer import Viewer

Admin = Annotated[Viewer, Depends(require_admin)]


WORKSPACE = r"^[A-Za-z0-9_.:\-]{1,128}$"


def _rt(request: Request) -> Any:
    return request.app.state.runtime


def _unprocessable(field: str, msg: str) -> HTTPException:
    return HTTPException(status.HTTP_422_UNPROCESSABLE_CONTENT, detail={"field": field, "msg": msg})


def _replay_start(value: str) -> datetime | None:
    from services.ops.replay import parse_from

    try:
        return parse_from(value.strip())
    except ValueError as exc:
        raise _unprocessable("from", str(exc)) from exc


def _principal(value: str | None, field: str, kind: str) -> str | None:
    if value is None or not value.strip():
        return None
    v = value.strip().lower()
    if not PRINCIPAL_RE.match(v) or not v.startswith(kind + ":"):
        raise _unprocessable(field, f"expected {kind}:<uuid>, got {value[:80]!r}")
    return v


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
