"""Derived-data ACL: the one rule every row derived from documents is read under.

A derived row — a fact, an identity alias, a taxonomy proposal, a profile field — records the documents
it came from (its *sources*). A viewer sees it only when it still has at least one live (not deleted,
not purged) source and EVERY live source shares a principal with the viewer ("all-visible"). Deleted
and purged sources no longer vouch for the row and no longer hide it; a row whose sources are all gone
is invisible (and retention deletes it). The rule is evaluated in SQL at every read, against today's
``documents.principals`` / ``deleted_at``, so an ACL change, a delete or a purge takes effect at once.

``all_visible_sql`` is the only place the rule is written; the per-table helpers below only say where a
row's sources are.
"""

from __future__ import annotations


def all_visible_sql(sources: str, viewer: str) -> str:
    """WHERE fragment: the viewer (``viewer`` = a ``text[]`` parameter such as ``$2``) sees every live
    source document of the row, and there is at least one. ``sources`` is a (correlated) SELECT of one
    uuid column: the row's source document ids."""
    live = f"SELECT 1 FROM ({sources}) src(id) JOIN documents dv ON dv.id = src.id WHERE dv.deleted_at IS NULL"
    return f"(EXISTS ({live}) AND NOT EXISTS ({live} AND NOT (dv.principals && {viewer}::text[])))"


def array_sources(column: str) -> str:
    """Sources kept as a ``uuid[]`` column of the row (``taxonomy_proposals.evidence``)."""
    return f"SELECT unnest({column})"


def fact_sources(fact_id: str) -> str:
    return f"SELECT ev.document_id FROM fact_evidence ev WHERE ev.fact_id = {fact_id}"


def alias_sources(alias: str = "a") -> str:
    """Sources of a ``person_aliases`` row (``person_alias_sources``, migration 0011)."""
    return (
        f"SELECT pas.document_id FROM person_alias_sources pas WHERE pas.workspace = {alias}.workspace"
        f" AND pas.namespace = {alias}.namespace AND pas.value = {alias}.value"
    )


def alias_visible_sql(viewer: str, alias: str = "a") -> str:
    """A person alias (email, platform user id, handle) the viewer may see and resolve."""
    return all_visible_sql(alias_sources(alias), viewer)
