"""Closed taxonomy registry: entity types and typed predicates that extraction binds to."""

from __future__ import annotations

from services.taxonomy.registry import (
    DEFAULT_REGISTRY_PATH,
    LITERAL,
    PredicateSpec,
    Registry,
    UnknownPredicateError,
    default_registry,
    load_registry,
    registry_from_dict,
)

__all__ = [
    "DEFAULT_REGISTRY_PATH",
    "LITERAL",
    "PredicateSpec",
    "Registry",
    "UnknownPredicateError",
    "default_registry",
    "load_registry",
    "registry_from_dict",
]
