"""The demo's org directory (``deploy/demo/memberships.jsonl``): valid membership envelopes over the demo's
own groups, deterministic ids, and — replayed in time order — the groups ``deploy/demo/README.md``'s
people table gives each person today."""

from __future__ import annotations

import json
from pathlib import Path

from services.eval.datasets import group_principal
from services.eval.directory_data import directory_people, iter_memberships, user_principal

DEMO = Path(__file__).resolve().parents[3] / "deploy" / "demo"
NOW = {  # the README's table after the 2024-09 reorganisation (direct groups)
    "lee.okafor": {"org-northwind", "div-engineering", "team-search"},
    "dana.whitfield": {"org-northwind", "div-engineering"},
    "omar.haddad": {"org-northwind", "div-engineering", "team-search", "dm-ana-omar"},
    "ana.souza": {"org-northwind", "div-go-to-market", "team-growth", "dm-ana-omar"},
    "marcus.bell": {"org-northwind", "exec-private"},
    "priya.raman": {"org-northwind", "div-engineering", "team-search"},
}


def _current() -> dict[str, set[str]]:
    names = {
        group_principal("northwind", g["name"]): g["name"]
        for g in json.loads((DEMO / "org_hierarchy.json").read_text())["groups"].values()
    }
    held: dict[str, set[str]] = {}
    for env in sorted(iter_memberships(DEMO, workspace="default"), key=lambda e: e.event_time):
        assert env.membership is not None
        group = names[env.membership.group]  # every group is one of the demo's
        for p in env.membership.added:
            held.setdefault(p, set()).add(group)
        for p in env.membership.removed:
            held.setdefault(p, set()).discard(group)
    return held


def test_memberships_replay_to_the_readme_table() -> None:
    held = _current()
    people = directory_people(DEMO)
    assert len(people) == 12
    for person, groups in NOW.items():
        assert held[people[f"{person}@northwind.example"]] == groups, person


def test_ids_are_deterministic_and_per_workspace() -> None:
    a = [e.envelope_id for e in iter_memberships(DEMO, workspace="default")]
    assert a == [e.envelope_id for e in iter_memberships(DEMO, workspace="default")]
    assert set(a).isdisjoint(e.envelope_id for e in iter_memberships(DEMO, workspace="other"))
    assert (
        user_principal("northwind", "Priya.Raman@northwind.example ")
        == directory_people(DEMO)["priya.raman@northwind.example"]
    )


def test_no_memberships_file_means_none(tmp_path: Path) -> None:
    (tmp_path / "events.jsonl").write_text("")
    assert list(iter_memberships(tmp_path, workspace="default")) == []
