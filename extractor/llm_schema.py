"""Optional LLM extraction, the pure half: request shape and output parsing (no network).

The caller sends ``build_messages(window.text, registry)`` with
``response_format=response_format(registry)`` to any OpenAI-compatible chat endpoint, one
call per window from ``extractor.windows.split_windows``, then feeds each reply to
``parse_llm_output`` and merges windows with ``dedup_links``.

Rules:
- The JSON schema is bound to the registry: ``predicate`` and entity ``type`` are enums of
  registry names; every property is required and ``additionalProperties`` is false (OpenAI
  strict mode). Optional parts are nullable instead.
- Parsing trusts nothing: an item is dropped, with a reason, when its predicate or types are
  outside the registry, the object/value shape does not fit the predicate (literal ⇒ value,
  else object), a name is empty/stopword-only/longer than 200 characters, or the item is
  malformed. At most ``MAX_LINKS`` (200) items per reply are read.
- Confidence is clamped to [0, ``LLM_CONFIDENCE_CAP``] (0.9: never above the explicit
  structured sources); missing or non-numeric → 0.5.
- Span: the evidence quote's position in the window text, else the subject name's, else the
  whole window; ``offset`` moves it to document coordinates.
- Unparseable JSON or a reply without a ``links`` array raises ``InvalidPayloadError``.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from extractor.links import EntityRef, ExtractedLink, dedup_links, link_allowed
from extractor.mentions import herb_person
from services.errors import InvalidPayloadError
from services.names import clean_name, eid_of
from services.taxonomy.registry import LITERAL, Registry

logger = logging.getLogger(__name__)

RESPONSE_NAME = "org_memory_links"
MAX_LINKS = 200
MAX_NAME_CHARS = 200
LLM_CONFIDENCE_CAP = 0.9
DEFAULT_CONFIDENCE = 0.5


@dataclass(frozen=True, slots=True)
class LlmRejection:
    index: int
    reason: str


@dataclass(frozen=True, slots=True)
class LlmParse:
    links: tuple[ExtractedLink, ...]
    rejected: tuple[LlmRejection, ...]


def link_schema(registry: Registry) -> dict[str, Any]:
    """Schema of one reply: ``{"links": [{subject, predicate, object, value, confidence, evidence}]}``."""
    entity = {
        "type": "object",
        "additionalProperties": False,
        "required": ["type", "name"],
        "properties": {
            "type": {"type": "string", "enum": list(registry.entity_types)},
            "name": {"type": "string"},
        },
    }
    item = {
        "type": "object",
        "additionalProperties": False,
        "required": ["subject", "predicate", "object", "value", "confidence", "evidence"],
        "properties": {
            "subject": {"$ref": "#/$defs/entity"},
            "predicate": {"type": "string", "enum": list(registry.predicate_names)},
            "object": {"anyOf": [{"$ref": "#/$defs/entity"}, {"type": "null"}]},
            "value": {"type": ["string", "null"]},
            "confidence": {"type": "number"},
            "evidence": {"type": "string"},
        },
    }
    return {
        "type": "object",
        "additionalProperties": False,
        "required": ["links"],
        "properties": {"links": {"type": "array", "items": item}},
        "$defs": {"entity": entity},
    }


def response_format(registry: Registry) -> dict[str, Any]:
    """The ``response_format`` argument for an OpenAI-compatible ``chat.completions.create`` call."""
    return {
        "type": "json_schema",
        "json_schema": {"name": RESPONSE_NAME, "strict": True, "schema": link_schema(registry)},
    }


def system_prompt(registry: Registry) -> str:
    """Instructions listing every predicate with its allowed subject → object types."""
    lines = [
        "Extract facts about people, teams, organizations, projects, products, meetings and terms.",
        "Use ONLY these predicates and types; skip anything else. Precision over recall.",
        "For predicates whose object is 'literal', set object to null and put the text in value;",
        "otherwise set value to null. evidence = the shortest exact quote that states the fact.",
        f"Entity types: {', '.join(registry.entity_types)}.",
        "Predicates:",
    ]
    for spec in registry.predicates:
        target = "literal value" if spec.is_literal else "|".join(spec.object_types)
        lines.append(f"- {spec.name}: {'|'.join(spec.subject_types)} -> {target}. {spec.description}".rstrip())
    return "\n".join(lines)


def build_messages(text: str, registry: Registry) -> list[dict[str, str]]:
    return [
        {"role": "system", "content": system_prompt(registry)},
        {"role": "user", "content": text},
    ]


def parse_llm_output(
    obj: object, registry: Registry, *, text: str | None = None, offset: int = 0
) -> list[ExtractedLink]:
    """Registry-allowed links from one reply; each dropped item is logged with its reason."""
    parsed = inspect_llm_output(obj, registry, text=text, offset=offset)
    for rejection in parsed.rejected:
        logger.warning(
            "llm link dropped",
            extra={
                "item_index": rejection.index,
                "reason": rejection.reason,
                "registry_version": registry.version,
            },
        )
    return list(parsed.links)


def inspect_llm_output(obj: object, registry: Registry, *, text: str | None = None, offset: int = 0) -> LlmParse:
    """Like ``parse_llm_output`` but returns the rejections instead of logging them."""
    data = _decode(obj)
    items = data.get("links")
    if not isinstance(items, list):
        raise InvalidPayloadError("LLM reply has no 'links' array", field="links")
    links: list[ExtractedLink] = []
    rejected: list[LlmRejection] = []
    for index, item in enumerate(items[:MAX_LINKS]):
        try:
            links.append(_link(item, registry, text, offset))
        except ValueError as exc:
            rejected.append(LlmRejection(index, str(exc)))
    if len(items) > MAX_LINKS:
        rejected.append(LlmRejection(MAX_LINKS, f"{len(items) - MAX_LINKS} items beyond the {MAX_LINKS}-item cap"))
    return LlmParse(tuple(dedup_links(links)), tuple(rejected))


def _decode(obj: object) -> Mapping[str, Any]:
    if isinstance(obj, str | bytes):
        try:
            obj = json.loads(obj)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise InvalidPayloadError(f"LLM reply is not JSON: {exc}", field="links") from exc
    if not isinstance(obj, Mapping):
        raise InvalidPayloadError("LLM reply is not a JSON object", field="links")
    return obj


def _link(item: object, registry: Registry, text: str | None, offset: int) -> ExtractedLink:
    if not isinstance(item, Mapping):
        raise ValueError("item is not an object")
    predicate = item.get("predicate")
    if not isinstance(predicate, str) or not registry.has_predicate(predicate):
        raise ValueError(f"predicate {predicate!r} is not in the registry")
    spec = registry.predicate(predicate)
    subject = _entity(item.get("subject"), registry, "subject")
    raw_object, raw_value = item.get("object"), item.get("value")
    obj: EntityRef | None = None
    value: str | None = None
    if spec.is_literal:
        if not isinstance(raw_value, str) or not raw_value.strip():
            raise ValueError(f"predicate {predicate!r} needs a literal value")
        value = " ".join(raw_value.split())[:MAX_NAME_CHARS]
    else:
        obj = _entity(raw_object, registry, "object")
    link = ExtractedLink(subject, predicate, obj, value, _confidence(item.get("confidence")), (0, 0), "llm")
    if not link_allowed(link, registry):
        target = LITERAL if obj is None else obj.type
        raise ValueError(f"registry does not allow {subject.type} -{predicate}-> {target}")
    return link.shifted(0) if text is None else _with_span(link, item.get("evidence"), text, offset)


def _entity(raw: object, registry: Registry, role: str) -> EntityRef:
    if not isinstance(raw, Mapping):
        raise ValueError(f"{role} is not an entity object")
    entity_type, name = raw.get("type"), raw.get("name")
    if not isinstance(entity_type, str) or not registry.has_entity_type(entity_type):
        raise ValueError(f"{role} type {entity_type!r} is not in the registry")
    if not isinstance(name, str) or len(name) > MAX_NAME_CHARS:
        raise ValueError(f"{role} name is missing or longer than {MAX_NAME_CHARS} characters")
    eid = eid_of(name)
    if eid is not None:
        if entity_type != "person":
            raise ValueError(f"{role} {eid} is a person id but typed {entity_type!r}")
        return herb_person(eid)
    cleaned = clean_name(" ".join(name.split()))
    if cleaned is None:
        raise ValueError(f"{role} name {name!r} is not an entity name")
    return EntityRef(entity_type, cleaned)


def _confidence(raw: object) -> float:
    if isinstance(raw, bool) or not isinstance(raw, int | float):
        return DEFAULT_CONFIDENCE
    return min(max(float(raw), 0.0), LLM_CONFIDENCE_CAP)


def _with_span(link: ExtractedLink, evidence: object, text: str, offset: int) -> ExtractedLink:
    """``link`` spanning where its evidence (else its subject's name) first occurs in ``text``, else all of it."""
    for needle in (evidence, link.subject.name):
        if isinstance(needle, str) and needle.strip():
            at = text.find(needle.strip())
            if at != -1:
                return replace(link, span=(offset + at, offset + at + len(needle.strip())))
    return replace(link, span=(offset, offset + len(text)))
