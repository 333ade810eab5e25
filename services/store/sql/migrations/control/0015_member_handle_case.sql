-- A member's handle is one in any case within its workspace (docs/api.md,
-- Members): "bob" and "Bob" could both be members before, and neither people
-- nor the audit log could tell them apart. A new member whose handle differs
-- only in case from one of the workspace's (removed members' too) is refused.
--
-- Members an older database already holds in two cases are left as they were
-- (their tokens, their memories and the audit log name them so): the oldest
-- of each such set keeps the handle's place, the later ones are marked
-- handle_case_twin and stand outside the index, so the migration never fails
-- on them and no new member joins them in yet another case. docs/servers.md,
-- "Handles in any case", lists them and says how to part them. An import of
-- an archive made before keeps its members so too (control.create_member).
ALTER TABLE member ADD COLUMN handle_case_twin boolean NOT NULL DEFAULT false;

UPDATE member m SET handle_case_twin = true
WHERE EXISTS (
    SELECT 1 FROM member o
    WHERE o.workspace_id = m.workspace_id
      AND lower(o.handle) = lower(m.handle)
      AND (o.created_at, o.id) < (m.created_at, m.id)
);

CREATE UNIQUE INDEX member_handle_any_case ON member (workspace_id, lower(handle))
    WHERE NOT handle_case_twin;
