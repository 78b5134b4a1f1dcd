from __future__ import annotations

import pytest

from services.hierarchy import Group, OrgHierarchy

CONFIG = {
    "groups": {
        "org1": {"level": "org", "parent": None, "name": "Acme"},
        "div1": {"level": "division", "parent": "org1", "name": "Engineering"},
        "div2": {"level": "division", "parent": "org1", "name": "Sales"},
        "team1": {"level": "team", "parent": "div1", "name": "Platform"},
        "team2": {"level": "team", "parent": "div1", "name": "Data"},
        "team3": {"level": "team", "parent": "div2", "name": "EMEA"},
        "team4": {"level": "team", "parent": "org1", "name": "Office of the CEO"},
    }
}


@pytest.fixture
def org() -> OrgHierarchy:
    return OrgHierarchy.from_config(CONFIG)


def test_expand_adds_ancestors(org: OrgHierarchy) -> None:
    assert org.expand(["user:u1", "group:team1"]) == frozenset({"user:u1", "group:team1", "group:div1", "group:org1"})


def test_expand_skips_levels_and_keeps_unknown(org: OrgHierarchy) -> None:
    assert org.expand(["group:team4"]) == frozenset({"group:team4", "group:org1"})
    assert org.expand(["group:nope", "user:x"]) == frozenset({"group:nope", "user:x"})
    assert org.expand([]) == frozenset()


def test_expand_never_adds_descendants_or_siblings(org: OrgHierarchy) -> None:
    expanded = org.expand(["group:div1"])
    assert "group:team1" not in expanded
    assert "group:div2" not in expanded
    assert expanded == frozenset({"group:div1", "group:org1"})


def test_ancestors_nearest_first(org: OrgHierarchy) -> None:
    assert org.ancestors("team1") == ("div1", "org1")
    assert org.ancestors("org1") == ()
    assert org.ancestors("missing") == ()
    assert "team1" in org and "missing" not in org
    assert org.group("div2") == Group("div2", "division", "org1", "Sales")


@pytest.mark.parametrize(
    ("doc", "viewer", "expected"),
    [
        (["user:u1", "group:org1"], ["user:u1", "group:team1"], "user"),
        (["group:team1"], ["user:u1", "group:team1"], "team"),
        (["group:div1"], ["user:u1", "group:team1"], "division"),
        (["group:org1"], ["user:u1", "group:team1"], "org"),
        (["group:org1", "group:div1", "group:team1"], ["group:team1"], "team"),  # tightest wins
        (["group:org1", "group:div1"], ["group:team2"], "division"),
        (["group:team2"], ["user:u1", "group:team1"], "other"),  # sibling team: no leak upward
        (["group:team3"], ["group:team1"], "other"),
        (["user:u2"], ["user:u1", "group:team1"], "other"),
        (["group:ghost"], ["group:ghost"], "other"),  # shared but not in the hierarchy
        ([], ["user:u1"], "other"),
    ],
)
def test_scope_of(org: OrgHierarchy, doc: list[str], viewer: list[str], expected: str) -> None:
    assert org.scope_of(doc, viewer) == expected


def test_from_config_accepts_missing_or_null_parent() -> None:
    org = OrgHierarchy.from_config({"groups": {"o": {"level": "org"}, "d": {"level": "division", "parent": "null"}}})
    assert org.ancestors("d") == ()
    assert OrgHierarchy.from_config({}).expand(["group:x"]) == frozenset({"group:x"})


@pytest.mark.parametrize(
    "groups",
    [
        {"a": {"level": "squad", "parent": None}},
        {"a": {"level": "team", "parent": "zzz"}},
        {"a": {"level": "team", "parent": "b"}, "b": {"level": "team", "parent": "a"}},
        {"t": {"level": "team", "parent": None}, "d": {"level": "division", "parent": "t"}},
    ],
    ids=["bad-level", "unknown-parent", "cycle", "parent-below-child"],
)
def test_invalid_configs_rejected(groups: dict[str, dict[str, object]]) -> None:
    with pytest.raises(ValueError):
        OrgHierarchy.from_config({"groups": groups})


def test_groups_must_be_mapping() -> None:
    with pytest.raises(ValueError):
        OrgHierarchy.from_config({"groups": ["a", "b"]})
