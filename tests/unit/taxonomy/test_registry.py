"""The taxonomy registry: the packaged v1 loads, bad registries are refused with a clear message."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from services.errors import ConfigurationError
from services.taxonomy import (
    LITERAL,
    Registry,
    UnknownPredicateError,
    default_registry,
    load_registry,
    registry_from_dict,
)

REQUIRED_PREDICATES = {
    "founded",
    "invested_in",
    "advises",
    "partner_of",
    "competitor_of",
    "attended",
    "works_at",
    "has_title",
    "reports_to",
    "manages",
    "member_of",
    "works_on",
    "owns",
    "mentioned",
    "located_in",
}
REQUIRED_TYPES = {
    "person",
    "team",
    "division",
    "organization",
    "project",
    "product",
    "glossary_term",
    "meeting",
    "document",
}


def _v1() -> dict[str, Any]:
    path = Path(__file__).resolve().parents[3] / "services" / "taxonomy" / "registry.v1.json"
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data


def _write(tmp_path: Path, data: object) -> Path:
    path = tmp_path / "registry.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def _pred(data: dict[str, Any], name: str) -> dict[str, Any]:
    found: dict[str, Any] = next(p for p in data["predicates"] if p["name"] == name)
    return found


def test_packaged_registry_loads_with_required_vocabulary() -> None:
    registry = load_registry()
    assert registry.version == 1
    assert set(registry.entity_types) >= REQUIRED_TYPES
    assert set(registry.predicate_names) >= REQUIRED_PREDICATES


def test_lookups() -> None:
    registry = load_registry()
    assert registry.is_exclusive("reports_to")
    assert not registry.is_exclusive("mentioned")
    assert registry.allows("reports_to", "person", "person")
    assert not registry.allows("reports_to", "person", "team")
    assert registry.allows("has_title", "person", LITERAL)
    assert not registry.allows("no_such_predicate", "person", "person")
    spec = registry.structured_field_predicate("title")
    assert spec is not None and spec.name == "has_title" and spec.is_literal
    manager = registry.structured_field_predicate("manager")
    assert manager is not None and manager.name == "reports_to"
    team = registry.structured_field_predicate("team")
    assert team is not None and team.name == "member_of"
    assert registry.structured_field_predicate("shoe_size") is None
    assert registry.half_life("mentioned") == 90.0
    assert registry.half_life("founded") is None
    assert registry.predicate("reports_to").inverse == "manages"


def test_unknown_predicate_raises_permanent_error_naming_it() -> None:
    with pytest.raises(UnknownPredicateError, match="likes"):
        load_registry().predicate("likes")


def test_registry_is_frozen_and_hashable() -> None:
    a, b = load_registry(), load_registry()
    assert a == b and hash(a) == hash(b)
    assert len({a, b}) == 1
    with pytest.raises(AttributeError):
        a.version = 2  # type: ignore[misc]
    assert default_registry() is default_registry()
    assert isinstance(default_registry(), Registry)


def test_missing_file_is_a_configuration_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="cannot be read"):
        load_registry(tmp_path / "absent.json")


def test_invalid_json_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "registry.json"
    path.write_text('{"version": 1,\n "entity_types": [}', encoding="utf-8")
    with pytest.raises(ConfigurationError, match=r"not valid JSON.*line 2"):
        load_registry(path)


def _mutations() -> list[tuple[str, Any, str]]:
    def drop_version(d: dict[str, Any]) -> None:
        del d["version"]

    def bad_cardinality(d: dict[str, Any]) -> None:
        _pred(d, "founded")["cardinality"] = "several"

    def negative_half_life(d: dict[str, Any]) -> None:
        _pred(d, "founded")["freshness_half_life_days"] = -3

    def extra_key(d: dict[str, Any]) -> None:
        _pred(d, "founded")["colour"] = "red"

    def bad_name(d: dict[str, Any]) -> None:
        _pred(d, "founded")["name"] = "Founded By"

    def literal_entity_type(d: dict[str, Any]) -> None:
        d["entity_types"].append({"name": "literal"})

    def duplicate_type(d: dict[str, Any]) -> None:
        d["entity_types"].append({"name": "person"})

    def duplicate_predicate(d: dict[str, Any]) -> None:
        d["predicates"].append(copy.deepcopy(_pred(d, "founded")))

    def unknown_subject_type(d: dict[str, Any]) -> None:
        _pred(d, "founded")["subject_types"] = ["robot"]

    def unknown_object_type(d: dict[str, Any]) -> None:
        _pred(d, "works_at")["object_types"] = ["company"]

    def literal_subject(d: dict[str, Any]) -> None:
        _pred(d, "has_title")["subject_types"] = ["literal"]

    def mixed_literal(d: dict[str, Any]) -> None:
        _pred(d, "has_title")["object_types"] = ["literal", "person"]

    def unknown_inverse(d: dict[str, Any]) -> None:
        _pred(d, "reports_to")["inverse"] = "is_boss_of"

    def literal_inverse(d: dict[str, Any]) -> None:
        _pred(d, "has_title")["inverse"] = "has_title"

    def inverse_types(d: dict[str, Any]) -> None:
        _pred(d, "manages")["subject_types"] = ["team"]

    def exclusive_many(d: dict[str, Any]) -> None:
        _pred(d, "reports_to")["cardinality"] = "many"

    def shared_field(d: dict[str, Any]) -> None:
        _pred(d, "located_in")["structured_field"] = "title"

    return [
        ("version", drop_version, r"meta-schema.*'version' is a required property"),
        ("cardinality", bad_cardinality, r"meta-schema.*predicates\[\d+\]\.cardinality"),
        ("half-life", negative_half_life, r"freshness_half_life_days"),
        ("extra key", extra_key, r"Additional properties.*colour"),
        ("bad name", bad_name, r"predicates\[\d+\]\.name"),
        ("literal type", literal_entity_type, r"entity_types\[\d+\]\.name"),
        ("dup type", duplicate_type, r"entity type 'person' is declared more than once"),
        ("dup predicate", duplicate_predicate, r"predicate 'founded' is declared more than once"),
        ("subject type", unknown_subject_type, r"'founded' has unknown subject type 'robot'"),
        ("object type", unknown_object_type, r"'works_at' has unknown object type 'company'"),
        ("literal subject", literal_subject, r"'has_title' has unknown subject type 'literal'"),
        ("mixed literal", mixed_literal, r"'has_title' mixes 'literal'"),
        ("unknown inverse", unknown_inverse, r"'reports_to' names unknown inverse 'is_boss_of'"),
        ("literal inverse", literal_inverse, r"literal predicates cannot be inverted"),
        ("inverse types", inverse_types, r"inverse 'manages' of 'reports_to' does not accept subject types"),
        ("exclusive many", exclusive_many, r"'reports_to' is exclusive but has cardinality 'many'"),
        (
            "shared field",
            shared_field,
            r"structured field 'title' is bound to both 'has_title' and 'located_in'",
        ),
    ]


@pytest.mark.parametrize(("label", "mutate", "message"), _mutations(), ids=[m[0] for m in _mutations()])
def test_invalid_registries_are_refused(tmp_path: Path, label: str, mutate: Any, message: str) -> None:
    data = _v1()
    mutate(data)
    path = _write(tmp_path, data)
    with pytest.raises(ConfigurationError, match=message) as caught:
        load_registry(path)
    assert str(path) in str(caught.value), label


def test_registry_from_dict_accepts_a_minimal_registry() -> None:
    registry = registry_from_dict(
        {
            "version": 7,
            "entity_types": [{"name": "person"}],
            "predicates": [
                {
                    "name": "knows",
                    "subject_types": ["person"],
                    "object_types": ["person"],
                    "exclusive": False,
                    "cardinality": "many",
                    "freshness_half_life_days": None,
                    "inverse": "knows",
                }
            ],
        }
    )
    assert registry.version == 7 and registry.allows("knows", "person", "person")
    assert registry.structured_fields == ()
