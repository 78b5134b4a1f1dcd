"""Caller authentication and the viewer's principals.

- ``X-Api-Key``: the calling service; compared in constant time against ``SERVICE_API_KEY`` (401).
- ``X-Principal-Id`` (``user:<uuid>``) and ``X-Principal-Groups`` (comma-separated ``group:<uuid>``):
  the human the agent acts for. No principal -> no private data (the viewer sees only documents
  shared with a group it holds — with no groups, nothing).
- ``X-Principal-Roles: admin`` for admin routes (403 otherwise).
- A viewer with ``X-Principal-Id`` and no ``X-Principal-Groups`` header is expanded to their groups
  from the org directory (``services/directory.py``); an explicit ``X-Principal-Groups`` always wins.
"""

from __future__ import annotations

import hmac

from fastapi import Header, HTTPException, Request, status
from starlette.types import Scope

from schemas.envelope import PRINCIPAL_RE
from services import directory
from services.viewer import Viewer

MAX_GROUPS = 512


def check_key(scope: Scope) -> bool:
    """The door's key check on the raw request headers, before a byte of the body is read
    (``services.api.limits``): ``X-Api-Key`` against the app's key, in constant time."""
    expected = scope["app"].state.api_key.encode()
    for k, v in scope.get("headers", ()):
        if k == b"x-api-key":
            return hmac.compare_digest(v, expected)
    return False


def _check_key(request: Request, api_key: str | None) -> None:
    expected = request.app.state.api_key
    if not api_key or not hmac.compare_digest(api_key.encode(), expected.encode()):
        raise HTTPException(status.HTTP_401_UNAUTHORIZED, detail="missing or invalid X-Api-Key")


def _principal(value: str, header: str, kind: str) -> str:
    v = value.strip().lower()
    if not PRINCIPAL_RE.match(v) or not v.startswith(kind + ":"):
        raise HTTPException(
            status.HTTP_422_UNPROCESSABLE_CONTENT,
            detail={"field": header, "msg": f"expected {kind}:<uuid>, got {value[:80]!r}"},
        )
    return v


async def require_service(request: Request, x_api_key: str | None = Header(default=None)) -> None:
    _check_key(request, x_api_key)


async def require_viewer(
    request: Request,
    x_api_key: str | None = Header(default=None),
    x_principal_id: str | None = Header(default=None),
    x_principal_groups: str | None = Header(default=None),
    x_principal_roles: str | None = Header(default=None),
) -> Viewer:
    _check_key(request, x_api_key)
    pid = _principal(x_principal_id, "X-Principal-Id", "user") if x_principal_id else None
    raw_groups = [g for g in (x_principal_groups or "").split(",") if g.strip()]
    if len(raw_groups) > MAX_GROUPS:
        raise HTTPException(
            status.HTTP_422_UNPROCESSABLE_CONTENT,
            detail={"field": "X-Principal-Groups", "msg": f"at most {MAX_GROUPS} groups"},
        )
    groups = tuple(sorted({_principal(g, "X-Principal-Groups", "group") for g in raw_groups}))
    if pid and x_principal_groups is None:
        groups = await directory_groups(request, pid)
    roles = frozenset(r.strip().lower() for r in (x_principal_roles or "").split(",") if r.strip())
    return Viewer(pid, groups, roles)


async def directory_groups(request: Request, principal_id: str) -> tuple[str, ...]:
    """The groups the org directory gives ``principal_id`` now (log-fed table + hierarchy ``members``)."""
    static: dict[str, frozenset[str]] = getattr(request.app.state, "static_members", {})
    return await directory.directory_groups(request.app.state.runtime.pool, static, principal_id)


async def require_admin(
    request: Request,
    x_api_key: str | None = Header(default=None),
    x_principal_id: str | None = Header(default=None),
    x_principal_groups: str | None = Header(default=None),
    x_principal_roles: str | None = Header(default=None),
) -> Viewer:
    viewer = await require_viewer(request, x_api_key, x_principal_id, x_principal_groups, x_principal_roles)
    if not viewer.is_admin:
        raise HTTPException(status.HTTP_403_FORBIDDEN, detail="admin route: X-Principal-Roles: admin required")
    return viewer
