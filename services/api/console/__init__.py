"""The operator console at ``/console``: server-rendered pages (Jinja2, autoescaped) and one small script.

Three routers:
- ``pages``: ``/console/<page>`` (the HTML shells, no data — public) and ``/console/static/<file>``;
- ``admin``: the JSON admin routes the console needed and the API lacked (``/v1/admin/pipeline``,
  ``/v1/admin/dead-letters/<stage>`` (+ ``/redrive``), ``/v1/admin/replay``, ``/v1/admin/rebuild``,
  ``/v1/admin/jobs``, ``/v1/admin/why-not``), contracts in ``schemas/admin.py``;
- ``fragments``: ``/v1/admin/console/*``, the same data rendered as HTML fragments for the pages.

Every data route needs ``X-Api-Key`` and ``X-Principal-Roles: admin`` (the admin dependency of ``/v1/admin/*``);
the page keeps the key in a JavaScript variable and sends it as a header — never in a URL, a cookie or storage.
Every state-changing call is a POST. Pages carry a Content-Security-Policy without inline scripts or styles.
"""

from __future__ import annotations

from importlib import resources

from fastapi import APIRouter, FastAPI, HTTPException, Response, status
from fastapi.responses import HTMLResponse, RedirectResponse

from services.api.console.admin_routes import admin
from services.api.console.fragment_routes import fragments
from services.api.console.render import PAGES, SECURITY_HEADERS, STATIC, _html
from services.stages import CATALOGUE, replayable_stages

pages = APIRouter(prefix="/console", include_in_schema=False)


@pages.get("")
async def console_root() -> RedirectResponse:
    return RedirectResponse("/console/pipeline", headers=SECURITY_HEADERS)


@pages.get("/static/{name}")
async def console_static(name: str) -> Response:
    if name not in STATIC:
        raise HTTPException(status.HTTP_404_NOT_FOUND, detail={"field": "name", "msg": "no such file"})
    body = resources.files("services.api.console").joinpath("static", name).read_bytes()
    return Response(body, media_type=STATIC[name], headers=SECURITY_HEADERS | {"Cache-Control": "no-cache"})


@pages.get("/{page}")
async def console_page(page: str) -> HTMLResponse:
    if page not in PAGES:
        raise HTTPException(status.HTTP_404_NOT_FOUND, detail={"field": "page", "msg": "no such console page"})
    stages = [s.name for s in CATALOGUE if s.name != "retrieve"]
    return _html(
        f"{page}.html", page=page, pages=PAGES, stages=stages, replayable=replayable_stages(), title=PAGES[page]
    )


def install(app: FastAPI) -> None:
    from services.api import errors

    app.include_router(pages)
    app.include_router(admin, responses=errors.responses(403, 404, 409))
    app.include_router(fragments, responses=errors.responses(403, 404, 409))
