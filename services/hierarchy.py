"""Org hierarchy (team ⊂ division ⊂ org): group expansion for ACL and the scope tier of a hit.

Principals are ``user:<uuid>`` or ``group:<uuid>``. A viewer holding ``group:<team>`` also holds,
by expansion, every ancestor group of that team (its division, its org). The scope of a document for
a viewer is the tightest relation between them: ``user`` (the document names the viewer), else the
level of the lowest shared group (``user`` < ``team`` < ``division`` < ``org``), else ``other``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

LEVELS: tuple[str, ...] = ("user", "team", "division", "org")
"""Group levels from tightest to widest. A ``user``-level group is a personal space (a DM, a private
channel of one or two people): it scopes its documents like a ``user:`` principal does."""
_RANK = {level: i for i, level in enumerate(LEVELS)}
USER_PREFIX = "user:"
GROUP_PREFIX = "group:"


@dataclass(frozen=True, slots=True)
class Group:
    """One node of the hierarchy."""

    id: str
    level: str
    parent: str | None
    name: str


class OrgHierarchy:
    """Immutable group tree built from ``{"groups": {uuid: {"level", "parent", "name"}}}``.

    Validation (``ValueError``): unknown level, a parent id not in ``groups``, a parent whose level
    is tighter than its child's (a division under a team), or a cycle.
    """

    __slots__ = ("_ancestors", "_groups")

    def __init__(self, groups: Mapping[str, Group]) -> None:
        for g in groups.values():
            if g.level not in _RANK:
                raise ValueError(f"group {g.id}: unknown level {g.level!r}, expected one of {LEVELS}")
            if g.parent is not None:
                parent = groups.get(g.parent)
                if parent is None:
                    raise ValueError(f"group {g.id}: unknown parent {g.parent!r}")
                if parent.level in _RANK and _RANK[parent.level] < _RANK[g.level]:
                    raise ValueError(f"group {g.id}: parent {parent.id} ({parent.level}) is below {g.level}")
        self._groups: dict[str, Group] = dict(groups)
        self._ancestors: dict[str, tuple[str, ...]] = {gid: self._walk(gid) for gid in self._groups}

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> OrgHierarchy:
        """Build from the plain dict config; ``parent`` may be missing or null for roots."""
        raw = config.get("groups") or {}
        if not isinstance(raw, Mapping):
            raise ValueError("config['groups'] must be a mapping of group id -> attributes")
        groups: dict[str, Group] = {}
        for gid, attrs in raw.items():
            if not isinstance(attrs, Mapping):
                raise ValueError(f"group {gid}: attributes must be a mapping")
            parent = attrs.get("parent")
            groups[str(gid)] = Group(
                id=str(gid),
                level=str(attrs.get("level", "")),
                parent=None if parent in (None, "", "null") else str(parent),
                name=str(attrs.get("name") or gid),
            )
        return cls(groups)

    def _walk(self, gid: str) -> tuple[str, ...]:
        chain: list[str] = []
        seen = {gid}
        parent = self._groups[gid].parent
        while parent is not None:
            if parent in seen:
                raise ValueError(f"group {gid}: cycle through {parent}")
            seen.add(parent)
            chain.append(parent)
            parent = self._groups[parent].parent
        return tuple(chain)

    def __contains__(self, group_id: object) -> bool:
        return group_id in self._groups

    def group(self, group_id: str) -> Group | None:
        """The group with this id (no ``group:`` prefix), or None."""
        return self._groups.get(group_id)

    def ancestors(self, group_id: str) -> tuple[str, ...]:
        """Ancestor group ids, nearest first; empty for unknown or root groups."""
        return self._ancestors.get(group_id, ())

    def expand(self, principals: Iterable[str]) -> frozenset[str]:
        """The principals plus ``group:<ancestor>`` for every ``group:<id>`` held. Unknown groups stay."""
        out: set[str] = set()
        for p in principals:
            out.add(p)
            if p.startswith(GROUP_PREFIX):
                out.update(GROUP_PREFIX + a for a in self.ancestors(p[len(GROUP_PREFIX) :]))
        return frozenset(out)

    def scope_of(self, doc_principals: Iterable[str], viewer_principals: Iterable[str]) -> str:
        """``user`` | ``team`` | ``division`` | ``org`` | ``other`` — the tightest shared scope.

        ``user`` when the document lists one of the viewer's ``user:`` principals; else the level of
        the lowest-level group in both the document principals and the viewer's expanded groups;
        else ``other`` (also for shared groups absent from the hierarchy).
        """
        doc = frozenset(doc_principals)
        viewer = self.expand(viewer_principals)
        if any(p.startswith(USER_PREFIX) and p in doc for p in viewer):
            return "user"
        best: int | None = None
        for p in doc & viewer:
            if not p.startswith(GROUP_PREFIX):
                continue
            g = self._groups.get(p[len(GROUP_PREFIX) :])
            if g is not None and (best is None or _RANK[g.level] < best):
                best = _RANK[g.level]
        return "other" if best is None else LEVELS[best]
