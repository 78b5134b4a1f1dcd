"""The taxonomy registry: Org Memory's closed ontology, loaded and validated at boot.

The registry is versioned JSON (``registry.v1.json`` next to this module) listing entity
types and typed predicates. Extraction, structured fields and promotions bind to it: a link
whose predicate is unknown, or whose subject/object types the predicate does not allow, is
never written.

Loading is fail-closed. ``load_registry`` checks, in order:

1. the file exists and is JSON;
2. it validates against ``registry.meta.schema.json`` (JSON Schema draft 2020-12);
3. semantic rules the schema cannot express:
   - entity type names are unique; predicate names are unique;
   - every subject type is a declared entity type (``literal`` is never a subject);
   - object types are declared entity types, or exactly ``["literal"]`` (a value claim);
   - an ``inverse`` names a declared predicate, is not set on a literal predicate, and the
     inverse's subject types cover this predicate's object types (and vice versa);
   - ``exclusive`` predicates have ``cardinality: "one"``;
   - a ``structured_field`` is bound to at most one predicate.

Any failure raises ``ConfigurationError`` naming the file and the offending entry, so the
process refuses to start on an invalid registry.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from types import MappingProxyType
from typing import Any, Literal

from jsonschema import Draft202012Validator

from services.errors import ConfigurationError, PermanentError

LITERAL = "literal"
"""Object type of a value claim (``has_title``, ``located_in``): the object is a string, not an entity."""

DEFAULT_REGISTRY_PATH = Path(__file__).with_name("registry.v1.json")
META_SCHEMA_PATH = Path(__file__).with_name("registry.meta.schema.json")

Cardinality = Literal["one", "many"]


class UnknownPredicateError(PermanentError):
    """A predicate outside the registry was asked for; nothing may be written for it."""


@dataclass(frozen=True, slots=True)
class PredicateSpec:
    """One typed predicate. ``object_types == ("literal",)`` marks a value claim."""

    name: str
    subject_types: tuple[str, ...]
    object_types: tuple[str, ...]
    exclusive: bool
    cardinality: Cardinality
    freshness_half_life_days: float | None
    inverse: str | None = None
    structured_field: str | None = None
    description: str = ""
    platform_binding: str | None = None  # host ontology field (title, manager, team): field-value proposals

    @property
    def is_literal(self) -> bool:
        """True when the object is a literal value rather than an entity."""
        return self.object_types == (LITERAL,)


@dataclass(frozen=True, slots=True)
class Registry:
    """A validated, immutable ontology. Build it with ``load_registry`` or ``registry_from_dict``.

    Equality and hashing use ``version``, ``entity_types`` and ``predicates``; the lookup
    indexes are derived and excluded.
    """

    version: int
    entity_types: tuple[str, ...]
    predicates: tuple[PredicateSpec, ...]
    _by_name: Mapping[str, PredicateSpec] = field(
        default_factory=lambda: MappingProxyType({}), compare=False, hash=False, repr=False
    )
    _by_field: Mapping[str, PredicateSpec] = field(
        default_factory=lambda: MappingProxyType({}), compare=False, hash=False, repr=False
    )

    @classmethod
    def build(cls, version: int, entity_types: Iterable[str], predicates: Iterable[PredicateSpec]) -> Registry:
        """Assemble a registry and its indexes. Does not validate; ``registry_from_dict`` does."""
        preds = tuple(predicates)
        return cls(
            version=version,
            entity_types=tuple(entity_types),
            predicates=preds,
            _by_name=MappingProxyType({p.name: p for p in preds}),
            _by_field=MappingProxyType({p.structured_field: p for p in preds if p.structured_field}),
        )

    def predicate(self, name: str) -> PredicateSpec:
        """The spec for ``name``; raises ``UnknownPredicateError`` outside the registry."""
        spec = self._by_name.get(name)
        if spec is None:
            raise UnknownPredicateError(
                f"predicate {name!r} is not in taxonomy registry v{self.version}",
                predicate=name,
                registry_version=self.version,
            )
        return spec

    def has_predicate(self, name: str) -> bool:
        return name in self._by_name

    def has_entity_type(self, name: str) -> bool:
        return name in self.entity_types

    @property
    def predicate_names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.predicates)

    @property
    def structured_fields(self) -> tuple[str, ...]:
        """Structured field names bound to a predicate, in registry order."""
        return tuple(self._by_field)

    def is_exclusive(self, name: str) -> bool:
        """True when a newer value of ``name`` for the same subject closes the older one."""
        return self.predicate(name).exclusive

    def allows(self, predicate: str, subject_type: str, object_type: str) -> bool:
        """True when ``subject_type -predicate-> object_type`` is in the ontology.

        ``object_type`` is ``"literal"`` for value claims. Unknown predicates are not allowed.
        """
        spec = self._by_name.get(predicate)
        if spec is None:
            return False
        return subject_type in spec.subject_types and object_type in spec.object_types

    def platform_bound(self) -> dict[str, PredicateSpec]:
        """Host ontology field (``platform_binding``) -> its predicate: the slots that get proposals."""
        return {p.platform_binding: p for p in self.predicates if p.platform_binding}

    def structured_field_predicate(self, field_name: str) -> PredicateSpec | None:
        """The predicate a structured field (``title``, ``manager``, ``team`` …) binds to, or None."""
        return self._by_field.get(field_name)

    def half_life(self, predicate: str) -> float | None:
        """Freshness half-life in days for ranking active facts; None = never goes stale."""
        return self.predicate(predicate).freshness_half_life_days


def load_registry(path: str | Path | None = None) -> Registry:
    """Read, schema-validate and semantically check a registry file (default: ``registry.v1.json``).

    Raises ``ConfigurationError`` naming the file and the problem; never returns a partial registry.
    """
    source = Path(path) if path is not None else DEFAULT_REGISTRY_PATH
    try:
        raw = source.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigurationError(f"taxonomy registry {source} cannot be read: {exc}", path=str(source)) from exc
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ConfigurationError(
            f"taxonomy registry {source} is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}",
            path=str(source),
        ) from exc
    return registry_from_dict(data, source=str(source))


@lru_cache(maxsize=1)
def default_registry() -> Registry:
    """The packaged registry, loaded once per process."""
    return load_registry()


@lru_cache(maxsize=1)
def _meta_validator() -> Draft202012Validator:
    try:
        schema = json.loads(META_SCHEMA_PATH.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise ConfigurationError(f"taxonomy meta-schema {META_SCHEMA_PATH} is unreadable: {exc}") from exc
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema)


def registry_from_dict(data: Any, *, source: str = "<dict>") -> Registry:
    """Validate decoded registry JSON and build the ``Registry``; raises ``ConfigurationError``."""
    errors = sorted(_meta_validator().iter_errors(data), key=lambda e: [str(p) for p in e.absolute_path])
    if errors:
        shown = "; ".join(f"{_json_path(e.absolute_path)}: {e.message}" for e in errors[:5])
        more = f" (+{len(errors) - 5} more)" if len(errors) > 5 else ""
        raise ConfigurationError(
            f"taxonomy registry {source} violates the meta-schema: {shown}{more}",
            path=source,
            errors=len(errors),
        )
    entity_types = [str(t["name"]) for t in data["entity_types"]]
    predicates = [_predicate_from_json(p) for p in data["predicates"]]
    problems = semantic_problems(entity_types, predicates)
    if problems:
        raise ConfigurationError(
            f"taxonomy registry {source} is inconsistent: " + "; ".join(problems),
            path=source,
            errors=len(problems),
        )
    return Registry.build(int(data["version"]), entity_types, predicates)


def semantic_problems(entity_types: list[str], predicates: list[PredicateSpec]) -> list[str]:
    """Every rule the meta-schema cannot express, as human-readable problems (empty = valid)."""
    problems: list[str] = []
    problems += [f"entity type {n!r} is declared more than once" for n in _duplicates(entity_types)]
    problems += [f"predicate {n!r} is declared more than once" for n in _duplicates([p.name for p in predicates])]
    known = set(entity_types)
    by_name = {p.name: p for p in predicates}
    fields: dict[str, str] = {}
    for p in predicates:
        for t in p.subject_types:
            if t not in known:
                problems.append(f"predicate {p.name!r} has unknown subject type {t!r}")
        if LITERAL in p.object_types and len(p.object_types) > 1:
            problems.append(f"predicate {p.name!r} mixes 'literal' with entity object types")
        for t in p.object_types:
            if t != LITERAL and t not in known:
                problems.append(f"predicate {p.name!r} has unknown object type {t!r}")
        if p.exclusive and p.cardinality != "one":
            problems.append(f"predicate {p.name!r} is exclusive but has cardinality {p.cardinality!r}")
        if p.structured_field is not None:
            if p.structured_field in fields:
                problems.append(
                    f"structured field {p.structured_field!r} is bound to both "
                    f"{fields[p.structured_field]!r} and {p.name!r}"
                )
            fields.setdefault(p.structured_field, p.name)
        if p.inverse is not None:
            problems += _inverse_problems(p, by_name)
    return problems


def _inverse_problems(p: PredicateSpec, by_name: Mapping[str, PredicateSpec]) -> list[str]:
    inv = by_name.get(p.inverse or "")
    if inv is None:
        return [f"predicate {p.name!r} names unknown inverse {p.inverse!r}"]
    if p.is_literal or inv.is_literal:
        return [f"predicate {p.name!r} has inverse {inv.name!r} but literal predicates cannot be inverted"]
    problems = []
    if not set(p.object_types) <= set(inv.subject_types):
        problems.append(f"inverse {inv.name!r} of {p.name!r} does not accept subject types {list(p.object_types)}")
    if not set(p.subject_types) <= set(inv.object_types):
        problems.append(f"inverse {inv.name!r} of {p.name!r} does not accept object types {list(p.subject_types)}")
    return problems


def _predicate_from_json(p: Mapping[str, Any]) -> PredicateSpec:
    half_life = p["freshness_half_life_days"]
    return PredicateSpec(
        name=str(p["name"]),
        subject_types=tuple(p["subject_types"]),
        object_types=tuple(p["object_types"]),
        exclusive=bool(p["exclusive"]),
        cardinality="one" if p["cardinality"] == "one" else "many",
        freshness_half_life_days=None if half_life is None else float(half_life),
        inverse=p.get("inverse"),
        structured_field=p.get("structured_field"),
        description=str(p.get("description", "")),
        platform_binding=p.get("platform_binding"),
    )


def _duplicates(names: list[str]) -> list[str]:
    seen: set[str] = set()
    dups: list[str] = []
    for n in names:
        if n in seen and n not in dups:
            dups.append(n)
        seen.add(n)
    return dups


def _json_path(parts: Iterable[Any]) -> str:
    out = "$"
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else f".{part}"
    return out
