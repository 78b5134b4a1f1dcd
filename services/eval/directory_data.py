"""The org directory of a data set in the common JSONL layout: the demo hierarchy spec, ``memberships.jsonl`` as
directory envelopes (``services.eval.datasets`` maps the events), and the people the directory names."""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Mapping
from datetime import datetime
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from schemas.envelope import ChangeEnvelope
from services.eval.datasets import NAMESPACE, _format_error, envelope_uuid, group_principal, system_name, to_utc

Level = Literal["user", "team", "division", "org"]

HierarchySpec = Mapping[str, tuple[Level, str | None]]


"""group name → (level, parent group name or None)."""


DEMO_DATASET = "northwind"


DEMO_HIERARCHY_SPEC: dict[str, tuple[Level, str | None]] = {
    "org-northwind": ("org", None),
    "div-engineering": ("division", "org-northwind"),
    "div-go-to-market": ("division", "org-northwind"),
    "team-platform": ("team", "div-engineering"),
    "team-search": ("team", "div-engineering"),
    "team-growth": ("team", "div-go-to-market"),
    "exec-private": ("team", "org-northwind"),
    "dm-ana-omar": ("user", None),
}


def hierarchy_from_spec(dataset: str, spec: HierarchySpec) -> dict[str, dict[str, dict[str, str | None]]]:
    """``{"groups": {uuid: {level, parent, name}}}`` with the loader's group uuids.

    Levels are team ⊂ division ⊂ org; ``user`` marks person-level private groups (DMs) that sit
    outside the tree. Every parent must itself be in the spec.
    """
    groups: dict[str, dict[str, str | None]] = {}
    for name, (level, parent) in spec.items():
        if parent is not None and parent not in spec:
            raise ValueError(f"group {name!r}: parent {parent!r} is not in the spec")
        groups[group_principal(dataset, name).removeprefix("group:")] = {
            "level": level,
            "parent": group_principal(dataset, parent).removeprefix("group:") if parent else None,
            "name": name,
        }
    return {"groups": groups}


class RawMembership(BaseModel):
    """One line of ``memberships.jsonl``: people (by email) added to / removed from a group at a time."""

    model_config = ConfigDict(extra="forbid")
    dataset: str
    group: str
    timestamp: datetime
    added: list[str] = []
    removed: list[str] = []


def user_principal(dataset: str, email: str) -> str:
    """A person's user principal: ``user:{uuid5(NAMESPACE, f"user:{dataset}:{email}")}`` (email lower-cased)."""
    return f"user:{uuid.uuid5(NAMESPACE, f'user:{dataset}:{email.strip().lower()}')}"


def iter_memberships(path: str | Path, *, workspace: str) -> Iterator[ChangeEnvelope]:
    """The org directory of a data set: one ``op: membership`` envelope per line of ``memberships.jsonl``
    beside ``events.jsonl`` (none when the file is absent). Groups map like events' groups, people to
    ``user_principal``; envelope ids are uuid5 of (workspace, dataset, line), so a reload is a redelivery."""
    folder = Path(path)
    file = (folder if folder.is_dir() else folder.parent) / "memberships.jsonl"
    if not file.exists():
        return
    for n, text in enumerate(file.read_text().splitlines(), 1):
        if not text.strip():
            continue
        try:
            raw = RawMembership.model_validate_json(text)
        except ValidationError as exc:
            raise _format_error(exc, "membership", file, n) from None
        yield ChangeEnvelope.model_validate(
            {
                "envelope_id": str(envelope_uuid(workspace, raw.dataset, f"membership/{n}")),
                "workspace": workspace,
                "op": "membership",
                "source": {"system": "directory", "external_id": f"{system_name(raw.dataset)}/{raw.group}"},
                "event_time": to_utc(raw.timestamp).isoformat(),
                "membership": {
                    "group": group_principal(raw.dataset, raw.group),
                    "added": [user_principal(raw.dataset, e) for e in raw.added],
                    "removed": [user_principal(raw.dataset, e) for e in raw.removed],
                },
            }
        )


def directory_people(path: str | Path) -> dict[str, str]:
    """Email → user principal of everyone in a data set's ``memberships.jsonl``."""
    out: dict[str, str] = {}
    folder = Path(path)
    file = (folder if folder.is_dir() else folder.parent) / "memberships.jsonl"
    if file.exists():
        for text in file.read_text().splitlines():
            if text.strip():
                raw = RawMembership.model_validate_json(text)
                for email in raw.added + raw.removed:
                    out[email.lower()] = user_principal(raw.dataset, email)
    return dict(sorted(out.items()))
