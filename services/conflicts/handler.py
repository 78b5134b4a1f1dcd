"""Conflicts handler: ``om.graph.v1`` batch -> entities, facts and evidence, in ONE transaction.

Per batch (only the last event of each document counts: every event carries the document's full state):
1. claim the graph event ids (``services.unit_of_work``: redeliveries and replays of an unchanged document
   are skipped);
2. identity merges from the envelope people's strong keys (``resolution.plan_merges``);
3. entities: people by identity key (created when unseen), bare person names by the document's own
   people first, then a workspace-unique display name, else a name-only person plus merge proposals
   (a single unresolved first name is dropped: precision first); other entities by normalized name;
4. facts: re-evidence or insert (``resolution.find_reusable``), replace the documents' evidence,
   retract facts left without evidence, then settle every touched exclusive slot
   (``resolution.resolve_exclusive``).
Nothing is published downstream: reads query the projection.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Sequence
from typing import Any

import asyncpg

from schemas.graph import ExtractedEntity, GraphEvent
from services.conflicts import repository as repo
from services.conflicts.resolution import (
    KeyOwner,
    SlotFact,
    find_reusable,
    name_similarity,
    plan_merges,
    resolve_exclusive,
    target_key,
)
from services.ids import entity_uuid, fact_uuid
from services.ids import person_id as person_uuid
from services.kafka.delivery import DeadLetters
from services.kafka.records import Record
from services.names import normalize_name
from services.people import resolve_keys as resolve_person_keys
from services.taxonomy import proposals
from services.taxonomy.proposals import Webhook
from services.taxonomy.registry import LITERAL, Registry
from services.unit_of_work import Claim, Decoded, Outcome, Transactional, decoded

log = logging.getLogger("orgmem.conflicts")
NAME_NAMESPACE = "name"


Item = Decoded[GraphEvent]


class ConflictsHandler(Transactional[Item]):
    def __init__(
        self, *, pool: asyncpg.Pool, dead_letters: DeadLetters, registry: Registry, webhook: Webhook | None = None
    ) -> None:
        super().__init__(stage=repo.STAGE, pool=pool, dead_letters=dead_letters)
        self.webhook = webhook
        self.proposals = 0
        self.registry = registry
        self.exclusive = [p.name for p in registry.predicates if p.exclusive]
        self.applied = 0

    def parse(self, record: Record) -> Item:
        return decoded(record, GraphEvent)

    def key(self, item: Item) -> str:
        return str(item.value.event_id)

    async def apply(self, conn: asyncpg.Connection, claim: Claim[Item], prepared: None) -> Outcome:
        """The fresh events only (a redelivered one is already applied), the last of each document."""
        last: dict[uuid.UUID, GraphEvent] = {i.value.document_id: i.value for i in claim.fresh}
        by_ws: dict[str, list[GraphEvent]] = {}
        for e in last.values():
            by_ws.setdefault(e.workspace, []).append(e)
        for workspace, batch in sorted(by_ws.items()):
            await self._merges(conn, workspace, batch)
            await self._apply(conn, workspace, batch)
            # taxonomy write-back: knowledge that differs from the host's ground truth -> proposals
            touched = await proposals.subjects_of_documents(
                conn, self.registry, workspace, [e.document_id for e in batch]
            )
            self.proposals += len(await proposals.refresh_subjects(conn, self.registry, workspace, touched))
        return Outcome(done=lambda: self._committed(len(last)))

    async def _committed(self, applied: int) -> None:
        self.applied += applied
        if self.webhook is not None:  # after the commit; failures are logged per attempt, never fatal
            try:
                await self.webhook.deliver_pending(self.pool)
            except (asyncpg.PostgresError, OSError) as exc:
                log.warning("proposal webhook delivery skipped: %s", exc)

    # --- identity ----------------------------------------------------------------------------

    async def _merges(self, conn: asyncpg.Connection, workspace: str, events: Sequence[GraphEvent]) -> None:
        groups = [g for e in events for g in e.identities if len(g.keys) > 1]
        if not groups:
            return
        owners = await resolve_person_keys(conn, workspace, [(k.namespace, k.value) for g in groups for k in g.keys])
        current = await repo.current_people(conn, [g.person_id for g in groups if g.person_id])
        plan = plan_merges(
            (
                current.get(g.person_id) if g.person_id else None,
                [KeyOwner(k.namespace, k.value, k.verified, owners.get((k.namespace, k.value))) for k in g.keys],
            )
            for g in groups
        )
        if plan:
            await repo.lock_slots(conn, [f"person:{m.source}" for m in plan] + [f"person:{m.target}" for m in plan])
        for m in plan:
            log.info("merging person %s into %s (%s)", m.source, m.target, m.reason)
            await repo.merge_person(conn, workspace, m.source, m.target, m.reason, self.exclusive)
            await self._settle(conn, [(m.target, p) for p in self.exclusive])

    # --- entities ----------------------------------------------------------------------------

    async def _entities(
        self, conn: asyncpg.Connection, workspace: str, events: Sequence[GraphEvent]
    ) -> dict[tuple[uuid.UUID, int], uuid.UUID]:
        """(document id, entity ref) -> entity id; unresolvable refs are absent."""
        out: dict[tuple[uuid.UUID, int], uuid.UUID] = {}
        people: dict[tuple[uuid.UUID, int], uuid.UUID] = {}
        keyed = [
            (e, x)
            for e in events
            for x in e.entities
            if x.type == "person" and x.person_id is None and x.identity is not None
        ]
        owners = await resolve_person_keys(
            conn, workspace, [(x.identity.namespace, x.identity.value) for _, x in keyed if x.identity]
        )
        new_people: list[tuple[uuid.UUID, str, str, str, bool]] = []
        for e, x in keyed:
            assert x.identity is not None
            key = (x.identity.namespace, x.identity.value)
            if key not in owners:
                owners[key] = person_uuid(workspace, *key)
                new_people.append((owners[key], x.name, key[0], key[1], x.identity.verified))
            people[(e.document_id, x.ref)] = owners[key]
        for e in events:
            for x in e.entities:
                if x.type == "person" and x.person_id is not None:
                    people[(e.document_id, x.ref)] = x.person_id
        proposals = await self._bare_names(conn, workspace, events, people, new_people)
        await repo.create_people(conn, workspace, new_people)
        # an extracted identity key is derived from its document: that document is a source of the alias
        # (resolved by the extractor or not: every document that carried the key is one of its sources)
        await repo.add_alias_sources(
            conn,
            workspace,
            [
                (x.identity.namespace, x.identity.value, e.document_id)
                for e in events
                for x in e.entities
                if x.type == "person" and x.identity is not None
            ],
        )
        if new_people:  # another writer may have claimed a key first: its owner wins
            winners = await resolve_person_keys(conn, workspace, [(ns, v) for _, _, ns, v, _ in new_people])
            moved = {
                pid: winners[(ns, v)]
                for pid, _, ns, v, _ in new_people
                if (ns, v) in winners and winners[(ns, v)] != pid
            }
            people = {k: moved.get(v, v) for k, v in people.items()}
        await repo.propose_merges(conn, workspace, proposals)
        current = await repo.current_people(conn, people.values())
        people = {k: current.get(v, v) for k, v in people.items()}
        # authors and participants get an entity row too (person cards, person↔project edges)
        ctx_ids = {p for e in events for p in e.context_person_ids}
        ctx_current = await repo.current_people(conn, ctx_ids)
        await repo.ensure_person_entities(
            conn, workspace, [*people.values(), *(ctx_current.get(p, p) for p in ctx_ids)]
        )
        out.update(people)
        rows: list[tuple[uuid.UUID, str, str, str]] = []
        named: list[tuple[uuid.UUID, ExtractedEntity, str]] = []
        for e in events:
            for x in e.entities:
                if x.type == "person":
                    continue
                if x.entity_id is not None:
                    out[(e.document_id, x.ref)] = x.entity_id
                    rows.append((x.entity_id, x.type, x.name, normalize_name(x.name, x.type)))
                else:
                    norm = normalize_name(x.name, x.type)
                    if norm:
                        named.append((e.document_id, x, norm))
        known = await repo.aliases(conn, workspace, [(x.type, norm) for _, x, norm in named])
        for doc_id, x, norm in named:
            eid = known.get((x.type, norm)) or entity_uuid(workspace, x.type, norm)
            known[(x.type, norm)] = eid
            rows.append((eid, x.type, x.name, norm))
            out[(doc_id, x.ref)] = eid
        await repo.ensure_entities(conn, workspace, rows)
        return out

    async def _bare_names(
        self,
        conn: asyncpg.Connection,
        workspace: str,
        events: Sequence[GraphEvent],
        people: dict[tuple[uuid.UUID, int], uuid.UUID],
        new_people: list[tuple[uuid.UUID, str, str, str, bool]],
    ) -> list[tuple[uuid.UUID, uuid.UUID, str, float]]:
        """Resolve bare person names into ``people``; returns the merge proposals to file."""
        bare = [
            (e, x)
            for e in events
            for x in e.entities
            if x.type == "person" and x.person_id is None and x.identity is None
        ]
        if not bare:
            return []
        named = await repo.people_named(conn, workspace, [x.name for _, x in bare])
        context_ids = {p for e, _ in bare for p in e.context_person_ids}
        current = await repo.current_people(conn, context_ids)
        proposals: list[tuple[uuid.UUID, uuid.UUID, str, float]] = []
        for e, x in bare:
            norm = normalize_name(x.name)
            candidates = named.get(norm, [])
            context = {current.get(p, p) for p in e.context_person_ids}
            local = [c for c in candidates if c in context]
            if len(local) == 1 or len(candidates) == 1:
                people[(e.document_id, x.ref)] = (local or candidates)[0]
                continue
            if " " not in norm:
                continue  # a lone unresolved first name: not an entity (precision first)
            pid = person_uuid(workspace, NAME_NAMESPACE, norm)
            people[(e.document_id, x.ref)] = pid
            new_people.append((pid, x.name, NAME_NAMESPACE, norm, False))
            proposals += [(pid, c, "same_name", name_similarity(x.name, x.name)) for c in candidates if c != pid]
        return proposals

    # --- facts -------------------------------------------------------------------------------

    async def _apply(self, conn: asyncpg.Connection, workspace: str, events: Sequence[GraphEvent]) -> None:
        ids = await self._entities(conn, workspace, events)
        types = {(e.document_id, x.ref): x.type for e in events for x in e.entities}
        wanted: list[tuple[GraphEvent, Any, uuid.UUID, uuid.UUID | None]] = []
        for e in events:
            for f in e.facts:
                s = ids.get((e.document_id, f.subject))
                o = ids.get((e.document_id, f.object)) if f.object is not None else None
                if s is None or (f.object is not None and o is None) or s == o:
                    continue
                otype = types[(e.document_id, f.object)] if f.object is not None else LITERAL
                if not self.registry.allows(f.predicate, types[(e.document_id, f.subject)], otype):
                    continue
                wanted.append((e, f, s, o))
        slots = {(s, f.predicate) for _, f, s, _ in wanted}
        await repo.lock_slots(conn, [f"{s}:{p}" for s, p in slots])
        active, dead = await repo.slot_facts(conn, slots)
        new_rows: list[tuple[Any, ...]] = []
        evidence: list[tuple[Any, ...]] = []
        exclusive_touched: set[tuple[uuid.UUID, str]] = set()
        for e, f, s, o in wanted:
            target = target_key(o, f.value)
            exclusive = self.registry.is_exclusive(f.predicate)
            slot = active[(s, f.predicate)]
            hit = find_reusable(slot, target, e.event_time, exclusive=exclusive)
            if hit is None:
                gen = dead.get((s, f.predicate, target, e.event_time), 0)
                fid = fact_uuid(workspace, s, f.predicate, target, e.event_time, gen)
                slot.append(SlotFact(fid, target, e.event_time, None, None, e.event_time))
                new_rows.append(
                    (
                        fid,
                        workspace,
                        s,
                        f.predicate,
                        o,
                        f.value if o is None else None,
                        e.event_time,
                        e.time_grain,
                        f.confidence,
                        f.source,
                    )
                )
                if exclusive:
                    exclusive_touched.add((s, f.predicate))
            else:
                fid = hit.id
            ev = f.evidence
            evidence.append((fid, e.document_id, ev.chunk_id, ev.span_start, ev.span_end, f.rule, f.confidence))
        await repo.insert_facts(conn, new_rows)
        evidence = list({(r[0], r[1], r[3], r[4]): r for r in evidence}.values())
        lost = await repo.replace_evidence(conn, [e.document_id for e in events], evidence)
        retracted = await repo.retract_unevidenced(conn, lost)
        exclusive_touched |= {
            slot for slot in retracted if self.registry.has_predicate(slot[1]) and self.registry.is_exclusive(slot[1])
        }
        await self._settle(conn, sorted(exclusive_touched))
        live = {e.document_id for e in events if not e.deleted}
        await repo.replace_entity_evidence(
            conn, [e.document_id for e in events], sorted({(v, d) for (d, _), v in ids.items() if d in live})
        )

    async def _settle(self, conn: asyncpg.Connection, slots: Sequence[tuple[uuid.UUID, str]]) -> None:
        if not slots:
            return
        active, _ = await repo.slot_facts(conn, slots)
        updates = [u for facts in active.values() if len(facts) > 0 for u in resolve_exclusive(facts)]
        await repo.apply_slot_updates(conn, updates)
