"""Registry-bound ``structured_fields`` → person ground-truth claims (no subject yet).

A source may attach structured fields to an envelope (``{"title": "VP of Engineering",
"manager": "eid_9b023657", "team": ["Platform"]}``). Each field name must be bound to a
predicate by the registry (``structured_field``); the claim's subject is the envelope's
author, resolved to a person by the caller. An unresolved author is the caller's
``UnresolvedAuthorError`` — this module never writes a partial set.

Rules:
- Unknown field (no registry predicate binds it: a connector's ``priority: p1``) → not a claim and not an
  error: the document keeps it (``documents.structured_fields``), extraction lists it in ``ignored`` and
  counts it (``orgmem_structured_fields_ignored_total``). It never dead-letters the document.
- ``None`` → rejected (a retraction is not a structured-field write).
- Literal predicates (``has_title``, ``located_in``) take a string or number; whitespace is
  collapsed; empty or longer than ``MAX_VALUE_CHARS`` (500) is rejected.
- Entity predicates take a name string, an ``eid_…`` (HERB person id, ``herb_eid`` identity),
  an e-mail (``email`` identity, lower-cased), or ``{"type", "name", "identity": [ns, key]}``.
  A plain name takes the predicate's first object type; an explicit type must be allowed.
- A list is accepted only for ``cardinality: "many"`` predicates (1..``MAX_LIST`` = 50 items);
  duplicates within a field collapse.
- A *bound* field with a value its predicate cannot take is rejected: ``structured_claims`` raises
  ``InvalidPayloadError`` naming every rejected field; ``partition_structured_fields`` returns claims,
  rejections and ignored fields for callers that report them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from extractor.links import HERB_EID_NAMESPACE, EntityRef
from services.errors import InvalidPayloadError
from services.metrics import STRUCTURED_IGNORED
from services.taxonomy.registry import PredicateSpec, Registry

MAX_VALUE_CHARS = 500
MAX_LIST = 50

_EID = re.compile(r"eid_[0-9a-f]{6,12}")
_EMAIL = re.compile(r"[^@\s]{1,64}@[^@\s]{1,255}\.[A-Za-z]{2,24}")


@dataclass(frozen=True, slots=True)
class StructuredClaim:
    """``<author> -predicate-> object|value`` from field ``field``."""

    field: str
    predicate: str
    object: EntityRef | None
    value: str | None


@dataclass(frozen=True, slots=True)
class RejectedField:
    field: str
    reason: str


@dataclass(frozen=True, slots=True)
class StructuredResult:
    claims: tuple[StructuredClaim, ...]
    rejected: tuple[RejectedField, ...]
    ignored: tuple[str, ...] = ()  # fields no predicate binds: kept with the document, no claim


class _Reject(Exception):
    pass


def structured_claims(fields: Mapping[str, object], registry: Registry) -> list[StructuredClaim]:
    """Claims for every bound field; raises ``InvalidPayloadError`` if a bound field's value is rejected.
    Unbound fields are ignored (counted)."""
    result = partition_structured_fields(fields, registry)
    if result.ignored:
        STRUCTURED_IGNORED.inc(len(result.ignored))
    if result.rejected:
        detail = "; ".join(f"{r.field}: {r.reason}" for r in result.rejected)
        raise InvalidPayloadError(
            f"structured_fields rejected: {detail}",
            field=f"structured_fields.{result.rejected[0].field}",
            rejected=[r.field for r in result.rejected],
            registry_version=registry.version,
        )
    return list(result.claims)


def partition_structured_fields(fields: Mapping[str, object], registry: Registry) -> StructuredResult:
    """Split fields into claims, rejections (with reasons) and ignored (unbound) fields, in field order."""
    claims: list[StructuredClaim] = []
    rejected: list[RejectedField] = []
    ignored: list[str] = []
    for name, raw in fields.items():
        spec = registry.structured_field_predicate(name)
        if spec is None:
            ignored.append(name)
            continue
        try:
            claims.extend(_claims(name, spec, raw))
        except _Reject as exc:
            rejected.append(RejectedField(name, str(exc)))
    return StructuredResult(tuple(claims), tuple(rejected), tuple(ignored))


def _claims(name: str, spec: PredicateSpec, raw: object) -> list[StructuredClaim]:
    if raw is None:
        raise _Reject("null is not a value; retract facts through a correction, not a structured field")
    items: list[object]
    if isinstance(raw, list | tuple):
        if spec.cardinality != "many":
            raise _Reject(f"predicate {spec.name!r} has cardinality 'one'; a list is not allowed")
        if not raw or len(raw) > MAX_LIST:
            raise _Reject(f"a list must hold 1..{MAX_LIST} items, got {len(raw)}")
        items = list(raw)
    else:
        items = [raw]
    out: list[StructuredClaim] = []
    for item in items:
        if spec.is_literal:
            claim = StructuredClaim(name, spec.name, None, _literal(item))
        else:
            claim = StructuredClaim(name, spec.name, _entity(item, spec), None)
        if claim not in out:
            out.append(claim)
    return out


def _literal(item: object) -> str:
    if isinstance(item, bool) or not isinstance(item, str | int | float):
        raise _Reject(f"expected a string or number, got {type(item).__name__}")
    value = " ".join(str(item).split())
    if not value:
        raise _Reject("empty value")
    if len(value) > MAX_VALUE_CHARS:
        raise _Reject(f"value longer than {MAX_VALUE_CHARS} characters")
    return value


def _entity(item: object, spec: PredicateSpec) -> EntityRef:
    if isinstance(item, Mapping):
        return _entity_from_mapping(item, spec)
    if not isinstance(item, str):
        raise _Reject(f"expected a name, id or object, got {type(item).__name__}")
    text = " ".join(item.split())
    if not text or len(text) > MAX_VALUE_CHARS:
        raise _Reject(f"a name must be 1..{MAX_VALUE_CHARS} characters")
    if _EID.fullmatch(text.lower()) or _EMAIL.fullmatch(text):
        if "person" not in spec.object_types:
            raise _Reject(f"a person id is not a valid object of {spec.name!r} ({list(spec.object_types)})")
        key = text.lower()
        namespace = HERB_EID_NAMESPACE if _EID.fullmatch(key) else "email"
        return EntityRef("person", key, (namespace, key))
    return EntityRef(spec.object_types[0], text)


def _entity_from_mapping(item: Mapping[object, object], spec: PredicateSpec) -> EntityRef:
    entity_type = item.get("type", spec.object_types[0])
    name = item.get("name")
    if not isinstance(entity_type, str) or entity_type not in spec.object_types:
        raise _Reject(f"type {entity_type!r} is not an object type of {spec.name!r} ({list(spec.object_types)})")
    identity_raw = item.get("identity")
    identity: tuple[str, str] | None = None
    if identity_raw is not None:
        if not (
            isinstance(identity_raw, list | tuple)
            and len(identity_raw) == 2
            and all(isinstance(part, str) and part for part in identity_raw)
        ):
            raise _Reject("identity must be [namespace, key]")
        identity = (str(identity_raw[0]), str(identity_raw[1]))
    if not isinstance(name, str) or not name.strip():
        if identity is None:
            raise _Reject("an object needs a name or an identity")
        name = identity[1]
    return EntityRef(entity_type, " ".join(name.split()), identity)
