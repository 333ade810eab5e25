-- Who changed a memory, when and why (design §4, "Who may change a memory"):
-- one row per change: its creation, each correct, the supersede that
-- replaced it and its forget. Never holds memory text (forget purges text
-- from every table; a reason is the caller's own words, as the tombstone's
-- invalidation_reason is). Visible exactly when its memory is.

CREATE TABLE memory_revision (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    memory_id   uuid NOT NULL REFERENCES memory (id),
    -- The revision the change produced (forget leaves the revision as it was).
    revision    bigint NOT NULL CHECK (revision >= 1),
    action      text NOT NULL CHECK (action IN ('create', 'correct', 'supersede', 'forget')),
    changed_by  uuid NOT NULL,
    reason      text NOT NULL DEFAULT '',
    changed_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX memory_revision_memory_idx ON memory_revision (memory_id, id);

-- Every insert path (the tools, migration from the old store) records the
-- creation; the tools record their changes themselves, with the reason.
CREATE FUNCTION memory_revision_created() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = public AS $$
BEGIN
    INSERT INTO memory_revision (memory_id, revision, action, changed_by, changed_at)
    VALUES (NEW.id, NEW.revision, 'create', NEW.created_by, NEW.created_at);
    RETURN NULL;
END $$;
CREATE TRIGGER memory_revision_created AFTER INSERT ON memory
    FOR EACH ROW EXECUTE FUNCTION memory_revision_created();

-- What existing memories went through, from the memory rows and the audit
-- trail (which recorded correct and supersede with their reasons).
INSERT INTO memory_revision (memory_id, revision, action, changed_by, reason, changed_at)
SELECT memory_id, revision, action, changed_by, reason, changed_at FROM (
    SELECT m.id AS memory_id, 1::bigint AS revision, 'create' AS action,
           m.created_by AS changed_by, '' AS reason, m.created_at AS changed_at
    FROM memory m
  UNION ALL
    SELECT a.memory_id, (a.detail ->> 'revision')::bigint, 'correct', a.member_id,
           coalesce(a.detail ->> 'reason', ''), a.at
    FROM audit_log a JOIN memory m ON m.id = a.memory_id
    WHERE a.action = 'correct' AND a.detail ? 'revision'
  UNION ALL
    SELECT m.id, m.revision, 'supersede', a.member_id, coalesce(a.detail ->> 'reason', ''), a.at
    FROM audit_log a JOIN memory m ON m.id = (a.detail ->> 'superseded_id')::uuid
    WHERE a.action = 'supersede'
  UNION ALL
    SELECT m.id, m.revision, 'forget', coalesce(m.invalidated_by, m.created_by),
           coalesce(m.invalidation_reason, ''), m.invalidated_at
    FROM memory m WHERE m.invalidated_at IS NOT NULL
) r
ORDER BY changed_at, memory_id;

ALTER TABLE memory_revision ENABLE ROW LEVEL SECURITY;
ALTER TABLE memory_revision FORCE ROW LEVEL SECURITY;
CREATE POLICY memory_revision_visible ON memory_revision FOR SELECT
    USING (EXISTS (SELECT 1 FROM memory m WHERE m.id = memory_revision.memory_id));
CREATE POLICY memory_revision_insert ON memory_revision FOR INSERT
    WITH CHECK (changed_by = caller_member());

GRANT SELECT, INSERT ON memory_revision TO recallatron_app;
