"""The viewer: whom a read is for, and the principals it may see.

One type everywhere a read is scoped. A ``Viewer`` is built by a door from authenticated transport state
(gateway headers, the RPC envelope's ``viewer``, a configured principal) — never from a tool argument.
``Viewer.expand(hierarchy)`` is the one principal expansion: the viewer's own principals plus every
ancestor group of the groups it holds, sorted. That tuple (``Principals``) is what every SQL read filters
on (``principals && $viewer``); an empty one sees nothing.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import NewType

from services.hierarchy import OrgHierarchy

Principals = NewType("Principals", tuple[str, ...])
"""A viewer's EXPANDED principals, sorted: the ACL input of every viewer-scoped SQL read. A distinct type, so
a read cannot be handed unexpanded principals by mistake: ``Viewer.expand`` is where they come from."""


@dataclass(frozen=True, slots=True)
class Viewer:
    principal_id: str | None
    groups: tuple[str, ...]
    roles: frozenset[str] = frozenset()

    @classmethod
    def of(cls, principal_id: str | None, groups: Iterable[str], roles: Iterable[str] = ()) -> Viewer:
        """Lower-cased principal, groups de-duplicated and sorted (the form every door hands on)."""
        return cls(
            principal_id.lower() if principal_id else None,
            tuple(sorted({g.lower() for g in groups})),
            frozenset(roles),
        )

    @property
    def principals(self) -> list[str]:
        """The viewer's own principals (groups unexpanded; see ``expand``)."""
        return ([self.principal_id] if self.principal_id else []) + list(self.groups)

    @property
    def is_admin(self) -> bool:
        return "admin" in self.roles

    def expand(self, hierarchy: OrgHierarchy) -> Principals:
        """Own principals plus ``group:<ancestor>`` of every group held, sorted."""
        return Principals(tuple(sorted(hierarchy.expand(self.principals))))
