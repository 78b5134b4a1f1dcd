"""HTTP routes of the agent tools: ``POST /tools/<name>`` for every entry of the tool catalogue
(``services/api/catalogue.py``), generated there — the same tools the MCP server and the Kafka
request/reply door serve. Thin: authenticate (``require_viewer``), validate (pydantic; 422 names the
field), run; an ``OrgMemoryError`` answers with its own status through the app's one exception handler.
"""

from __future__ import annotations

from services.api.catalogue import http_router

router = http_router()
