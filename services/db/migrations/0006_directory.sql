-- 0004: the org directory (who belongs to which group, and when), fed by envelope op `membership`.
--
-- group_memberships: one row per continuous stay of a member in a group, [valid_from, valid_to)
--   (valid_to NULL = still a member). "Who was in group G at T" is
--   `SELECT member FROM directory_members_at(workspace, G, T)`; a member's groups at T are
--   `directory_groups_at(member, T)`. Event times come from the envelopes (when it happened in the
--   source), recorded_at from the projection (when we learnt it).
-- group_membership_heads: the last applied event per (workspace, group, member), for
--   last-writer-wins: an add/remove older than (or as old as) the head is ignored.
CREATE TABLE group_memberships (
    workspace      text NOT NULL,
    group_id       text NOT NULL,          -- group:<uuid>
    member         text NOT NULL,          -- user:<uuid> or group:<uuid>
    valid_from     timestamptz NOT NULL,
    valid_to       timestamptz,
    added_by       uuid NOT NULL,          -- envelope id that opened the interval
    removed_by     uuid,                   -- envelope id that closed it
    recorded_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (workspace, group_id, member, valid_from),
    CHECK (valid_to IS NULL OR valid_to > valid_from)
);
CREATE UNIQUE INDEX group_memberships_open ON group_memberships (workspace, group_id, member) WHERE valid_to IS NULL;
CREATE INDEX group_memberships_member ON group_memberships (member, valid_from);

CREATE TABLE group_membership_heads (
    workspace      text NOT NULL,
    group_id       text NOT NULL,
    member         text NOT NULL,
    present        boolean NOT NULL,
    event_time     timestamptz NOT NULL,
    envelope_id    uuid NOT NULL,
    PRIMARY KEY (workspace, group_id, member)
);

CREATE FUNCTION directory_members_at(p_workspace text, p_group text, p_at timestamptz)
RETURNS TABLE (member text, valid_from timestamptz, valid_to timestamptz)
LANGUAGE sql STABLE AS $$
    SELECT m.member, m.valid_from, m.valid_to FROM group_memberships m
    WHERE m.workspace = p_workspace AND m.group_id = p_group
      AND m.valid_from <= p_at AND (m.valid_to IS NULL OR m.valid_to > p_at)
$$;

CREATE FUNCTION directory_groups_at(p_member text, p_at timestamptz)
RETURNS TABLE (workspace text, group_id text, valid_from timestamptz, valid_to timestamptz)
LANGUAGE sql STABLE AS $$
    SELECT m.workspace, m.group_id, m.valid_from, m.valid_to FROM group_memberships m
    WHERE m.member = p_member AND m.valid_from <= p_at AND (m.valid_to IS NULL OR m.valid_to > p_at)
$$;
