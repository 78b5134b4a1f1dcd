"""What the HTTP routers share: the viewer and admin dependencies, the workspace query parameter, and the
runtime and expanded principals of a request — one definition each, so a route file holds only its routes."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Query, Request

from services.api.auth import require_admin, require_viewer
from services.runtime import Runtime
from services.viewer import Principals, Viewer

ViewerDep = Annotated[Viewer, Depends(require_viewer)]
AdminDep = Annotated[Viewer, Depends(require_admin)]
WORKSPACE_PATTERN = r"^[A-Za-z0-9_.\-]+$"
WorkspaceQuery = Annotated[str, Query(max_length=64, pattern=WORKSPACE_PATTERN)]


def runtime_of(request: Request) -> Runtime:
    """The process's runtime (``app.state.runtime``, set by ``services.api.app``)."""
    rt: Runtime = request.app.state.runtime
    return rt


def principals_of(request: Request, viewer: Viewer) -> Principals:
    """The viewer's principals expanded through the org hierarchy: what every ACL check in SQL takes."""
    return viewer.expand(runtime_of(request).hierarchy)
