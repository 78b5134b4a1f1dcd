"""``orgmem demo load`` loads the demo's directory memberships with its corpus, so the doors that send only
a user id (MCP's default config, ADK, bearer tokens) see the demo data as that person — and nothing the
person's groups do not hold."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from orgmem_sdk.client import OrgMemoryClient
from services.api.app import create_app
from services.eval.cli import cmd_demo
from services.eval.dataset_queries import event_visibility
from services.eval.datasets import group_principal
from services.eval.directory_data import directory_people
from services.settings import Settings
from tests.integration.agents_helpers import serve_app
from tests.integration.helpers import eventually, fetchval

DEMO = Path(__file__).resolve().parents[2] / "deploy" / "demo"


async def test_demo_load_brings_its_directory(settings_factory: Any, pipeline: Any) -> None:
    s: Settings = await settings_factory(org_hierarchy_path=DEMO / "org_hierarchy.json")
    rt = await pipeline("ingest", "embed", "retrieve", settings_override=s)
    workspace = "default"  # the test's schema and topics are its own
    assert await cmd_demo(s, argparse.Namespace(dataset=str(DEMO), workspace=workspace)) == 0
    people = directory_people(DEMO)
    priya, search = people["priya.raman@northwind.example"], group_principal("northwind", "team-search")

    async def loaded() -> int:
        return int(await fetchval(s, "SELECT count(*) FROM documents WHERE workspace = $1", workspace))

    await eventually(loaded, until=lambda n: n >= 90, timeout=110, interval=1)
    visible = event_visibility(DEMO)
    async with serve_app(create_app(rt)) as url, OrgMemoryClient.http(url, "test-key") as om:
        me = await om.whoami(principal_id=priya)  # only the user id: the groups come from the loaded directory
        held = {search, group_principal("northwind", "div-engineering"), group_principal("northwind", "org-northwind")}
        assert set(me.groups) == held
        lee = await om.whoami(principal_id=people["lee.okafor@northwind.example"])
        assert search in lee.groups and group_principal("northwind", "team-platform") not in lee.groups
        ctx = await om.retrieve_context(
            {"query": "What is the success metric for Project Atlas?", "workspace": workspace}, principal_id=priya
        )
        ids = [p.external_id for p in ctx.passages]
        assert "nw/doc/atlas-design" in ids
        assert all(visible[i] & held for i in ids), "a passage Priya's groups do not hold"
        secret = await om.retrieve_context(
            {"query": "acquisition talks with Fabrikam Analytics Project Heron", "workspace": workspace},
            principal_id=priya,
        )
        exec_only = group_principal("northwind", "exec-private")
        assert all(visible[p.external_id] != frozenset({exec_only}) for p in secret.passages)
        marcus = await om.retrieve_context(
            {"query": "acquisition talks with Fabrikam Analytics Project Heron", "workspace": workspace},
            principal_id=people["marcus.bell@northwind.example"],
        )
        assert any(visible[p.external_id] == frozenset({exec_only}) for p in marcus.passages)
