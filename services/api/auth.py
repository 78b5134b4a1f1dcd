"""Caller authentication and the viewer's principals.

- ``X-Api-Key``: the calling service's key (``services/credentials.py``): a scoped key from ``api_keys``
  (or ``SERVICE_API_KEY`` in single-key development mode, which has every scope). Unknown or revoked ->
  401; a key without the scope a route needs -> 403 naming the scope (``ingest`` for ``/ingress/*``,
  ``agent`` for tools, memory writes, graph reads and MCP, ``admin`` for operator routes).
- ``X-Principal-Id`` (``user:<uuid>``) and ``X-Principal-Groups`` (comma-separated ``group:<uuid>``):
  the human the agent acts for, asserted by the trusted gateway holding the key. No principal -> no
  private data (the viewer sees only documents shared with a group it holds — with no groups, nothing).
- ``X-Principal-Roles: admin`` for admin routes (403 otherwise); only a key with the ``admin`` scope may
  send it (403 naming the header otherwise: an agent key cannot make its caller an admin).
- A viewer with ``X-Principal-Id`` and no ``X-Principal-Groups`` header is expanded to their groups
  from the org directory (``services/directory.py``) on every request, so a removed member loses access
  at once; an explicit ``X-Principal-Groups`` always wins.
- A key with a workspace acts only there: ``RequestLimits`` refuses a request naming another workspace.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Header, HTTPException, Request, status

from schemas.envelope import PRINCIPAL_RE
from services import directory
from services.credentials import Credential, CredentialError, KeyStore, missing_scope
from services.viewer import Viewer

MAX_GROUPS = 512
CREDENTIAL_STATE = "orgmem_credential"


def http_error(exc: CredentialError) -> HTTPException:
    return HTTPException(exc.status, detail=exc.detail())


def unauthenticated() -> HTTPException:
    return HTTPException(
        status.HTTP_401_UNAUTHORIZED,
        detail={"field": "X-Api-Key", "msg": "missing, unknown or revoked X-Api-Key", "type": "unauthenticated"},
    )


async def credential_of(request: Request, api_key: str | None) -> Credential:
    """The request's credential: the one the door (``RequestLimits``) resolved, else resolved here (401)."""
    state = request.scope.get("state") or {}
    cred = state.get(CREDENTIAL_STATE)
    if isinstance(cred, Credential):
        return cred
    keys: KeyStore = request.app.state.keys
    found = await keys.authenticate(api_key)
    if found is None:
        raise unauthenticated()
    request.scope.setdefault("state", {})[CREDENTIAL_STATE] = found
    return found


async def _scoped(request: Request, api_key: str | None, scope: str) -> Credential:
    cred = await credential_of(request, api_key)
    if not cred.has(scope):
        raise http_error(missing_scope(scope))
    return cred


def checked_principal(value: str, field: str, kind: str) -> str:
    """``value`` as a canonical ``<kind>:<uuid>`` (lower-cased), else 422 naming ``field`` (a header or a
    query parameter)."""
    v = value.strip().lower()
    if not PRINCIPAL_RE.match(v) or not v.startswith(kind + ":"):
        raise HTTPException(
            status.HTTP_422_UNPROCESSABLE_CONTENT,
            detail={"field": field, "msg": f"expected {kind}:<uuid>, got {value[:80]!r}"},
        )
    return v


async def require_service(request: Request, x_api_key: str | None = Header(default=None)) -> Credential:
    """The connector door (``/ingress/*``): a key with the ``ingest`` scope."""
    return await _scoped(request, x_api_key, "ingest")


async def viewer_for(
    request: Request,
    cred: Credential,
    x_principal_id: str | None,
    x_principal_groups: str | None,
    x_principal_roles: str | None,
) -> Viewer:
    """The viewer the gateway names for an authenticated ``cred`` (groups from the directory when absent)."""
    pid = checked_principal(x_principal_id, "X-Principal-Id", "user") if x_principal_id else None
    raw_groups = [g for g in (x_principal_groups or "").split(",") if g.strip()]
    if len(raw_groups) > MAX_GROUPS:
        raise HTTPException(
            status.HTTP_422_UNPROCESSABLE_CONTENT,
            detail={"field": "X-Principal-Groups", "msg": f"at most {MAX_GROUPS} groups"},
        )
    groups = tuple(sorted({checked_principal(g, "X-Principal-Groups", "group") for g in raw_groups}))
    if pid and x_principal_groups is None:
        groups = await directory_groups(request, pid)
    roles = frozenset(r.strip().lower() for r in (x_principal_roles or "").split(",") if r.strip())
    if "admin" in roles and not cred.has("admin"):
        raise http_error(missing_scope("admin", "X-Principal-Roles"))
    return Viewer(pid, groups, roles)


@dataclass(frozen=True, slots=True)
class CallerHeaders:
    """The headers naming a caller (the key, and the human the gateway asserts): one declaration for the
    viewer and the admin dependencies, and what the MCP door reads from its raw headers."""

    x_api_key: str | None = Header(default=None)
    x_principal_id: str | None = Header(default=None)
    x_principal_groups: str | None = Header(default=None)
    x_principal_roles: str | None = Header(default=None)

    async def viewer(self, request: Request, scope: str) -> Viewer:
        """The viewer of a key holding ``scope`` (401 / 403 otherwise)."""
        cred = await _scoped(request, self.x_api_key, scope)
        return await viewer_for(request, cred, self.x_principal_id, self.x_principal_groups, self.x_principal_roles)


async def require_viewer(request: Request, caller: Annotated[CallerHeaders, Depends()]) -> Viewer:
    """Agent routes (tools, memory writes, graph reads): a key with the ``agent`` scope."""
    return await caller.viewer(request, "agent")


async def directory_groups(request: Request, principal_id: str) -> tuple[str, ...]:
    """The groups the org directory gives ``principal_id`` now (log-fed table + hierarchy ``members``)."""
    static: dict[str, frozenset[str]] = getattr(request.app.state, "static_members", {})
    return await directory.directory_groups(request.app.state.runtime.pool, static, principal_id)


async def require_admin(request: Request, caller: Annotated[CallerHeaders, Depends()]) -> Viewer:
    """Operator routes: a key with the ``admin`` scope, and the ``admin`` role for the human."""
    viewer = await caller.viewer(request, "admin")
    if not viewer.is_admin:
        raise HTTPException(status.HTTP_403_FORBIDDEN, detail="admin route: X-Principal-Roles: admin required")
    return viewer
